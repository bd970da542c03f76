"""`workflow_team`: real LlamaIndex AgentWorkflow code (FunctionAgents, its handoff tool, its runtime) on simulated agents.

The tests that run the team skip when the `frameworks` extra (llama-index) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import captured_seed, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.workflow_team.env import MAX_ITERATIONS  # noqa: E402
from faultlens.injectors.envs.workflow_team.world import FAMILIES, make_task, resolve  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "workflow_team"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("llama_index") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    return seed_runs(ENV, SIM, 0, 12)  # shared with test_framework_envs


def test_every_criterion_matters_in_the_tasks():
    for i in range(60):
        family = FAMILIES[i % len(FAMILIES)]
        _, world = make_task(random.Random(i), family)
        want = resolve(world)
        cheapest = min(world["hotels"], key=lambda h: h["nightly"])
        best = max(world["hotels"], key=lambda h: h["rating"])
        assert want.hotel != (best if family == "comfort" else cheapest)
        if family == "comfort":
            assert min(world["flights"], key=lambda f: f["price"])["stops"] == 1 and want.flight["stops"] == 0


@needs_sdk
def test_the_requests_are_llama_indexs_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["concierge", "researcher"]
    tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert tools == {"handoff"}  # the concierge has no tools of its own: LlamaIndex adds its handoff tool
    assert "Currently available agents" in calls[0].request["tools"][0]["function"]["description"]
    researcher = calls[1].request
    handed = [m for m in researcher["messages"] if m.get("role") == "tool"]
    assert handed and handed[0]["content"].startswith("Agent researcher is now handling the request")
    assert researcher["parallel_tool_calls"] is False
    assert {t["function"]["name"] for t in researcher["tools"]} == {"search_flights", "search_hotels", "handoff"}


@needs_sdk
def test_the_concierge_plans_the_reviewer_answers_and_handoffs_are_messages(runs):
    for _, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "concierge" and steps[0].kind == StepKind.plan
        assert steps[-1].agent == "reviewer" and steps[-1].kind == StepKind.final_answer
        handoffs = [s for s in steps[1:] if s.metadata.get("handoff")]
        assert all(s.kind == StepKind.message and s.tool_name is None for s in handoffs)


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    loops = sum(any(s.agent == "reviewer" and s.metadata.get("handoff") == "booker" for s in r.trace.steps) for _, r in runs)
    errors = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in r.trace.steps) for _, r in runs)
    assert loops >= 2 and errors >= 1
    env = envs.get(ENV)
    for task, _ in runs[:4]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert len(clean.trace.steps) == 14  # no error, no review loop


@needs_sdk
def test_a_run_that_loops_ends_at_llama_indexs_iteration_cap(runs):
    """A booker that always rebooks would loop forever: LlamaIndex's max_iterations ends the run, which fails."""
    from faultlens.injectors.envs.workflow_team import policy as team

    env = envs.get(ENV)
    task, _ = runs[0]
    original = team.TeamPolicy.booker

    def rebook(self, note, brief, mine, chance):
        return original(self, note, brief, [c for c in mine if c.tool != "book_trip"], chance)

    team.TeamPolicy.booker = rebook
    try:
        result = env.run(task, sim=dict(SIM, noise=0.0))
    finally:
        team.TeamPolicy.booker = original
    assert not result.trace.outcome.success and "Max iterations" in result.trace.outcome.detail
    assert len(result.recording.calls) == MAX_ITERATIONS


@needs_sdk
def test_runs_are_captured_as_llama_indexs_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.llama_index")
    assert imported.source.framework == "llama-index"
    # Each function tool and each handoff is a TOOL span (`FunctionTool.acall`), in the order the run called them.
    from faultlens.injectors.envs.agents_desk.wire import tool_call_of

    called = [tool_call_of(c.response)["function"]["name"] for c in seed_run.recording.calls if tool_call_of(c.response)]
    assert [s.tool_name for s in imported.steps if s.kind == StepKind.tool_call] == called
    # LlamaIndex's instrumentation nests three LLM spans per call (`_prepare_chat_with_tools`, `OpenAILike.achat`
    # twice); the adapter keeps the one with the messages, under the agent its `run_agent_step` runs.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    assert llm == [c.agent for c in seed_run.recording.calls]
    assert [a.name for a in imported.agents][:4] == ["concierge", "researcher", "booker", "reviewer"]
    assert not any(s.content.startswith(("AgentInput(", "AgentOutput(", "ToolCallResult(")) for s in imported.steps)
    assert imported.task.query == seed_run.trace.task.query  # the customer's message, not the workflow's state
    outputs = [s.content for s in imported.steps if s.kind == StepKind.tool_call]
    assert outputs and not any(o.startswith('{"blocks"') for o in outputs)  # the tool's text, not LlamaIndex's ToolOutput
