"""Error rules of `magentic_team` (tried before the generic ones)."""

from __future__ import annotations

MUTATORS: dict = {}
