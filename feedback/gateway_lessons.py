"""Lessons at the gateway's door: which agents get lessons, and the lessons memory retrieves for them.

`GatewayLessons(memory)` is the `lessons` provider of `middleware.capture.live_gateway.Gateway`:
for a call of an *enabled* agent it retrieves the lessons memory holds for that
agent and the run's task (`BaseLessonMemory.retrieve`, the retrieval the
LangGraph hooks use) and gives their ids and the block the gateway adds to the
system message (`hooks.lessons_block`, whose lines a program can read back with
`hooks.parse_lessons_block`). Every agent is off until enabled: a gateway put
in front of a team changes no prompt until someone decides it should.

The gateway records the ids on the call's step (`Step.lessons`), so
`record_trace_outcome` credits each run's outcome to the lessons it was shown,
as it does for the LangGraph team.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from faultlens.middleware.capture.live_gateway import LessonsShown

from .hooks import lessons_block
from .memory import BaseLessonMemory

__all__ = ["EVERY_AGENT", "GatewayLessons"]

EVERY_AGENT = "*"  # `enable("*")`: every agent that calls, named or not


class GatewayLessons:
    """(agent, task) -> the agent's lessons for the task, for enabled agents only."""

    def __init__(self, memory: BaseLessonMemory, enabled: Iterable[str] = (), *, k: int | None = None):
        self.memory = memory
        self.k = k
        self._enabled = set(enabled)
        self._lock = threading.Lock()

    def enable(self, agent: str) -> None:
        with self._lock:
            self._enabled.add(agent)

    def disable(self, agent: str) -> None:
        with self._lock:
            self._enabled.discard(agent)

    def enabled(self, agent: str) -> bool:
        with self._lock:
            return agent in self._enabled or EVERY_AGENT in self._enabled

    def __call__(self, agent: str, task: str) -> LessonsShown | None:
        if not self.enabled(agent):
            return None
        lessons = self.memory.retrieve(agent, task, self.k)
        if not lessons:
            return None
        return LessonsShown([lesson.id for lesson in lessons], lessons_block(lessons))
