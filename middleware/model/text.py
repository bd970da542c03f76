"""Text helpers shared by the terminal view, the attribution prompts and the lessons."""

from __future__ import annotations

import json
from typing import Any


def shorten(text: str, limit: int) -> str:
    """Head and tail of `text` with a visible marker saying how much was cut, so
    both the start and the end stay readable (prompts tell the model what the
    marker means, so it is the same everywhere)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 30, 20)
    head, tail = text[: keep * 2 // 3], text[-(keep // 3) :]
    return f"{head} [... {len(text) - len(head) - len(tail)} characters cut ...] {tail}"


def compact(value: Any) -> str:
    """A string as it is; anything else as one line of JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def one_line(text: Any, limit: int = 240) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
