"""The tools of `schedule_desk`'s solver, over one task's calendars: plain functions, as DSPy's `ReAct` takes tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .world import CLOSE, OPEN, busy_text, calendar_text, free_windows, hhmm, intervals


def tools_for(world: dict[str, Any]) -> list[Callable[..., str]]:
    """`calendar` and `free_slots` over `world` (their docstrings and type hints are what DSPy shows the model)."""
    calendars = world["calendars"]

    def calendar(person: str) -> str:
        """A person's meetings on Monday and Tuesday, one line per day."""
        if person not in calendars:
            return f"error: no calendar for {person!r}; the calendars are {', '.join(sorted(calendars))}"
        return calendar_text(person, calendars[person])

    def free_slots(busy: str, minutes: int) -> str:
        """The free windows of the working day (09:00-17:00) of at least `minutes` between the busy intervals
        (comma-separated HH:MM-HH:MM)."""
        meetings = intervals(busy)
        if busy.strip() and not meetings:
            return "error: give the busy intervals as HH:MM-HH:MM, comma-separated"
        if any(not (OPEN <= s < e <= CLOSE) for s, e in meetings):
            return f"error: an interval outside the working day 09:00-17:00 in {busy_text(meetings)}"
        windows = free_windows(meetings, int(minutes))
        if not windows:
            return f"No free window of at least {minutes} minutes within the working day."
        return f"Free windows (at least {minutes} minutes, within the working day): " + \
            ", ".join(f"{hhmm(s)}-{hhmm(e)}" for s, e in windows)

    return [calendar, free_slots]
