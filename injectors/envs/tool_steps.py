"""A framework run's steps read off its recorded replies: one step a reply, then a tool's result after a tool call."""

from __future__ import annotations

import json
from typing import Any

from faultlens.middleware.model.trace import Media, Step, StepKind
from faultlens.middleware.replay.session import CallRecord

from .agents_desk.wire import text_of, tool_call_of
from .base import Runtime


def tool_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments: the JSON object it sent, else `{"input": raw}` as sent."""
    try:
        args = json.loads(raw or "")
    except (json.JSONDecodeError, TypeError):
        args = None
    return args if isinstance(args, dict) else {"input": raw}


class StepLog:
    """Records a run's steps on `rt` and which recorded call each came from (`rt.step_calls`, None for a result)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.step_calls: list[int | None] = []

    def reply(self, index: int, call: CallRecord, kind: StepKind, *, agent: str | None = None,
              meta: dict[str, Any] | None = None, media: list[Media] | None = None) -> Step:
        """The step of recorded call `index`: its reply as text, with the tool and arguments when it is a tool call."""
        step = Step(index=len(self.rt.steps), agent=agent or call.agent, kind=kind, content=text_of(call.response),
                    model=self.rt.model, metadata=meta or {}, media=media or [])
        if kind == StepKind.tool_call:
            fn = (tool_call_of(call.response) or {}).get("function") or {}
            step.tool_name = fn.get("name")
            step.tool_arguments = tool_arguments(fn.get("arguments"))
        self.rt.record_step(step)
        self.step_calls.append(index)
        return step

    def result(self, call_step: Step, output: str, media: list[Media] | None = None) -> None:
        """The tool's result after `call_step` (no recorded call of its own)."""
        self.rt.record_step(Step(index=len(self.rt.steps), agent=call_step.agent, kind=StepKind.tool_result,
                                 content=output, tool_name=call_step.tool_name, tool_result=output,
                                 metadata={"role": "tool"}, media=media or []))
        self.step_calls.append(None)

    def close(self) -> None:
        self.rt.step_calls = self.step_calls
