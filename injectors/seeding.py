"""Seeds that are the same in every process and run: what makes the bundled benchmark byte-identical."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_seed(*parts: Any) -> int:
    """A seed derived from parts, identical across processes and runs (unlike hash())."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big")
