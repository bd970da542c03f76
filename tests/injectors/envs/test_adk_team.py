"""`adk_team`: real Google ADK code (a coordinator LlmAgent transferring to specialists with function tools) on simulated agents.

The tests that run the team skip when the `frameworks` extra (google-adk) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import captured_seed, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.adk_team.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.adk_team.policy import transcript  # noqa: E402
from faultlens.injectors.envs.adk_team.world import evaluate, make_task, reference  # noqa: E402
from faultlens.injectors.generators import gen_input  # noqa: E402
from faultlens.injectors.pipeline import inject_one  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "adk_team"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}


def _has_adk() -> bool:
    try:
        return importlib.util.find_spec("google.adk") is not None
    except ModuleNotFoundError:  # no `google` namespace at all
        return False


needs_sdk = pytest.mark.skipif(not _has_adk(), reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    return seed_runs(ENV, SIM, 0, 9)  # shared with test_framework_envs


def test_the_reference_is_the_budget_formula_on_the_tasks_figures():
    world = make_task(random.Random(3), "per_person")[1]
    t = world["trip"]
    hotel = world["hotels"][t["hotel"]]
    fare = world["fares"][f"{t['origin']}-{t['city']}"]
    total = t["rooms"] * t["nights"] * hotel["nightly_rate"] * world["fx"][hotel["currency"]] + \
        t["travellers"] * fare * world["fx"][world["fare_currency"]]
    assert abs(float(reference(world)) - total / t["travellers"]) < 0.006
    with pytest.raises(ValueError):
        evaluate("__import__('os')")


def test_the_transcript_reads_own_turns_and_other_agents_quoted_turns():
    quote = "\n<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n{}\n<<<END_QUOTED_AGENT_CONTENT>>>"
    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "We are 2 travellers"},
                {"role": "assistant", "content": "Plan:", "tool_calls": [{"id": "c1", "type": "function",
                 "function": {"name": "transfer_to_agent", "arguments": '{"agent_name": "research_agent"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"result": null}'},
                {"role": "user", "content": [{"type": "text", "text": "For context: ..."},
                                             {"type": "text", "text": "[research_agent] said:" + quote.format("Findings:")},
                                             {"type": "text", "text": "[research_agent] `fx_rate` tool returned result:" + quote.format("{'a': 1}")}]}]
    events = transcript(messages)
    assert [(e["author"], e["type"]) for e in events] == [("user", "said"), ("self", "said"), ("self", "call"), ("self", "result"),
                                                          ("research_agent", "said"), ("research_agent", "result")]
    assert events[2]["args"] == {"agent_name": "research_agent"} and events[5]["output"] == {"a": 1}


@needs_sdk
def test_the_requests_are_adks_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls][:2] == ["coordinator", "research_agent"]
    first = calls[0].request
    tools = {t["function"]["name"] for t in first["tools"]}
    assert tools == {"transfer_to_agent"}  # ADK's own transfer tool, with the sub-agents as its enum
    enum = first["tools"][0]["function"]["parameters"]["properties"]["agent_name"]["enum"]
    assert set(enum) == {"research_agent", "budget_agent"}
    assert 'Your internal name is "coordinator"' in first["messages"][0]["content"]
    research = calls[1].request
    assert {t["function"]["name"] for t in research["tools"]} >= {"hotel_rate", "flight_fare", "transfer_to_agent"}
    quoted = json.dumps(research["messages"])
    assert "[coordinator] said:" in quoted  # ADK shows another agent's turns as quoted context


@needs_sdk
def test_the_coordinator_plans_and_transfers_are_messages_in_order(runs):
    for _, result in runs:
        steps = result.trace.steps
        assert steps[0].kind == StepKind.plan and steps[-1].kind == StepKind.final_answer
        handoffs = [s for s in steps if "handoff" in s.metadata]
        assert all(s.tool_name is None and s.kind in (StepKind.plan, StepKind.message) for s in handoffs)
        assert [s.metadata["handoff"] for s in handoffs] == ["research_agent", "coordinator", "budget_agent", "coordinator"]


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    def errors(result):
        return any(s.kind == StepKind.tool_result and '"error"' in s.content for s in result.trace.steps)

    assert sum(errors(r) for _, r in runs) >= 2
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success and not errors(clean)


@needs_sdk
def test_every_applicable_mode_fails_the_task_or_is_filtered(runs):
    """The template generator (these rules, then the generic ones) at the first step each mode fits, per seed."""
    from faultlens.injectors.applicability import applicable_modes
    from faultlens.injectors.generators import get_generator

    env, generator = envs.get(ENV), get_generator("template")
    tried: set[str] = set()
    kept = 0
    for task, seed in runs[:3]:
        trace, done = seed.trace, set()
        for step in trace.steps:
            for mode in applicable_modes(step, trace):
                assert mode not in env.not_applicable
                generated = None if mode in done else generator.generate(gen_input(trace, step.index, mode, random.Random(step.index), env))
                if generated is None:
                    continue
                done.add(mode)
                attempt = inject_one(env, trace, seed.recording, step.index, mode, generated, model=None, sim=SIM,
                                     trace_id=f"{task.id}-t{step.index}-{mode}", step_calls=seed.step_calls)
                assert attempt.status in ("kept", "succeeded"), (mode, attempt.status, attempt.reason)
                if attempt.status == "kept":
                    gold = attempt.trace.gold
                    assert (gold.step, gold.agent, gold.mode) == (step.index, step.agent, mode)
                    assert attempt.trace.steps[step.index].content == generated.text
                    kept += 1
        tried |= done
    assert set(MUTATORS) <= tried, sorted(set(MUTATORS) - tried)
    assert kept >= len(tried)


@needs_sdk
def test_runs_are_captured_as_adks_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.google_adk")
    assert imported.source.framework == "google-adk"
    # One LLM span per recorded call, each under the agent that made it.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    assert llm == [c.agent for c in seed_run.recording.calls]
    assert {"coordinator", "research_agent", "budget_agent"} <= {a.name for a in imported.agents}
