"""A framework run's steps read off its recorded replies: one step a reply, then a tool's result after a tool call."""

from __future__ import annotations

import json
from collections.abc import Callable
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


# `classify(call, tool_call) -> (kind, metadata)`: the step a recorded reply is (`tool_call`: its first, or None).
Classify = Callable[[CallRecord, dict[str, Any] | None], tuple[StepKind, dict[str, Any]]]


def record_replies(rt: Runtime, outputs: dict[str, str], classify: Classify) -> None:
    """One step per recorded call (a model reply, as `classify` says), then the tool's result after a tool call
    whose output `outputs` holds (by tool-call id)."""
    steps = StepLog(rt)
    for index, call in enumerate(rt.session.calls):
        tc = tool_call_of(call.response)
        kind, meta = classify(call, tc)
        step = steps.reply(index, call, kind, meta=meta)
        output = outputs.get(str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
        if output is not None:
            steps.result(step, output)
    steps.close()


def delegating_steps(rt: Runtime, outputs: dict[str, str], leader: str, delegate: str,
                     member: Callable[[dict[str, Any]], str]) -> None:
    """`record_replies` of a leader delegating with its tool `delegate`: the first delegation is the leader's plan,
    a later one a message (metadata `delegate`: `member(tool_call)`); a reply with no tool call is the leader's
    answer, or a member's report to the leader."""
    delegated = False

    def classify(call: CallRecord, tc: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
        nonlocal delegated
        if call.agent == leader and tc is not None and (tc.get("function") or {}).get("name") == delegate:
            kind = StepKind.message if delegated else StepKind.plan
            delegated = True
            return kind, {"delegate": member(tc)}
        if tc is not None:
            return StepKind.tool_call, {}
        return (StepKind.final_answer if call.agent == leader else StepKind.message), {}

    record_replies(rt, outputs, classify)
