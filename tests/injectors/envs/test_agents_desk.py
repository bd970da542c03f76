"""`agents_desk`: real OpenAI Agents SDK code (handoffs, function tools, an input guardrail) on simulated agents.

The tests that run the team skip when the `frameworks` extra (openai-agents) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import captured_seed, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.agents_desk.wire import completion, text_of  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "agents_desk"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("agents") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    return seed_runs(ENV, SIM, 0, 12)  # shared with test_framework_envs


def test_a_step_text_and_its_completion_map_onto_each_other():
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    call = 'Looking it up.\nAction: lookup_order\n{"order_id": "A1234"}'
    made = completion(request, call)
    message = made["choices"][0]["message"]
    assert message["content"] == "Looking it up." and message["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert text_of(made) == call and completion(request, call) == made  # deterministic ids
    assert text_of(completion(request, '{"resolution": "refund"}')) == '{"resolution": "refund"}'


@needs_sdk
def test_the_requests_are_the_sdks_own(runs):
    _, result = next((t, r) for t, r in runs if any(c.agent == "refunds" for c in r.recording.calls))
    calls = result.recording.calls
    assert calls[0].agent == "screen"  # the input guardrail's agent runs before Triage
    assert calls[0].request["response_format"]["json_schema"]["schema"]["title"] == "Screen"
    triage = next(c for c in calls if c.agent == "triage")
    tools = {t["function"]["name"] for t in triage.request["tools"]}
    assert {"verify_customer", "transfer_to_refunds_specialist", "transfer_to_orders_specialist"} <= tools
    specialist = next(c for c in calls if c.agent == "refunds")
    handed = [m for m in specialist.request["messages"] if m.get("role") == "tool" and "Refunds Specialist" in m["content"]]
    assert handed and handed[0]["content"] == '{"assistant": "Refunds Specialist"}'  # the SDK's handoff result


@needs_sdk
def test_the_guardrail_comes_first_and_handoffs_are_triages_messages(runs):
    for _, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "Request Screen" and steps[-1].kind == StepKind.final_answer
        handoffs = [s for s in steps if s.metadata.get("handoff")]
        assert all(s.agent == "Triage" and s.kind == StepKind.message for s in handoffs)


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in r.trace.steps)
                 for _, r in runs)
    assert errors >= 2
    env = envs.get(ENV)
    for task, _ in runs[:4]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert not any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in clean.trace.steps)


@needs_sdk
def test_runs_are_captured_as_the_sdks_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.openai_agents")
    assert imported.source.framework == "openai-agents"
    # One LLM span per recorded call, each under the agent that made it.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    names = {"screen": "Request Screen", "triage": "Triage", "refunds": "Refunds Specialist", "orders": "Orders Specialist"}
    assert llm == [names[c.agent] for c in seed_run.recording.calls]
    assert {"Triage", "Request Screen"} <= {a.name for a in imported.agents}
