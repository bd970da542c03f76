"""`ToolCallingTeam`: a framework team whose agents reply with tool calls and whose answer is a number.

Apart from `framework` because its replies are the OpenAI Agents SDK team's wire format
(`agents_desk.wire`), which reads messages with `framework.message_text`.
"""

from __future__ import annotations

from typing import Any

from faultlens.middleware.model.trace import Outcome, Task
from faultlens.middleware.replay.session import CallRecord

from .agents_desk.wire import completion
from .framework import FrameworkTeam, numeric_outcome

__all__ = ["ToolCallingTeam"]


class ToolCallingTeam(FrameworkTeam):
    """A `FrameworkTeam` whose agents reply with tool calls (chat completions by `agents_desk.wire.completion`) and
    whose answer ends with an `ANSWER: <number>` line (`numeric_outcome`, evaluator `<name>:numeric`)."""

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return numeric_outcome(answer, task.reference_answer or "", f"{self.name}:numeric")
