"""`injectors.envs.tool_steps`: a framework run's steps read off its recorded tool-call replies."""

from __future__ import annotations

import pytest

from faultlens.injectors.envs import Runtime, get
from faultlens.injectors.envs.agents_desk.wire import completion, render_call
from faultlens.injectors.envs.tool_steps import StepLog, tool_arguments
from faultlens.middleware.model.trace import StepKind
from faultlens.middleware.replay.session import Session

REQUEST = {"model": "sim", "messages": [{"role": "user", "content": "refund order A-1"}]}


def _runtime() -> Runtime:
    env = get("agents_desk")
    return Runtime(env, env.tasks(0, 1)[0], model="sim", session=Session())


@pytest.mark.parametrize("raw, args", [('{"order_id": "A-1"}', {"order_id": "A-1"}), ("[1, 2]", {"input": "[1, 2]"}),
                                       ("not json", {"input": "not json"}), (None, {"input": None})])
def test_tool_arguments_are_the_object_sent_or_the_raw_input(raw, args):
    assert tool_arguments(raw) == args


def test_a_tool_call_its_result_and_a_final_reply_map_to_their_calls():
    rt = _runtime()
    calls = [rt.session.call("model", "desk", dict(REQUEST), lambda r: completion(r, text))
             for text in (render_call("lookup_order", {"order_id": "A-1"}, "Looking it up."), "Refunded 12.00 EUR.")]
    assert calls
    steps = StepLog(rt)
    records = rt.session.calls
    call_step = steps.reply(0, records[0], StepKind.tool_call, agent="Refunds Specialist")
    steps.result(call_step, "order A-1: 12.00 EUR")
    steps.reply(1, records[1], StepKind.final_answer, meta={"handoff": None})
    steps.close()
    assert rt.step_calls == [0, None, 1]
    first, result, final = rt.steps
    assert (first.agent, first.tool_name, first.tool_arguments) == ("Refunds Specialist", "lookup_order", {"order_id": "A-1"})
    assert first.content.startswith("Looking it up.")
    assert (result.kind, result.agent, result.tool_name, result.tool_result) == (
        StepKind.tool_result, "Refunds Specialist", "lookup_order", "order A-1: 12.00 EUR")
    assert (final.agent, final.content, final.tool_name, final.metadata) == ("desk", "Refunded 12.00 EUR.", None, {"handoff": None})
