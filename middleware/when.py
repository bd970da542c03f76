"""Moments as people write them: `7d` or `24h` ago, an ISO 8601 time (naive means UTC), or epoch seconds."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from .errors import FaultlensError

__all__ = ["BadMoment", "moment"]

_AGO = re.compile(r"^(\d+(?:\.\d+)?)([dh])$")


class BadMoment(FaultlensError, ValueError):
    """A moment that is none of the accepted forms; the message shows them."""


def moment(value: str | None, now: float | None = None) -> float | None:
    """`value` as epoch seconds (None for empty). `7d`/`24h` count back from `now` (default: the clock)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    ago = _AGO.match(value)
    if ago:
        return (time.time() if now is None else now) - float(ago[1]) * (86400 if ago[2] == "d" else 3600)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadMoment(f"{value!r} is not a moment: give 7d, 24h, an ISO 8601 time (2026-01-31T12:00) or epoch seconds") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
