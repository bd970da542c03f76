"""`supervisor_team`: LangGraph's prebuilt supervisor (handoff tools, ReAct workers with tools) on simulated agents.

The tests that run the team skip when the `frameworks` extra (langgraph-supervisor, langchain-openai) is not
installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import captured_seed, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.supervisor_team.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.supervisor_team.seams import SeededIds  # noqa: E402
from faultlens.injectors.envs.supervisor_team.world import calculate, read_question  # noqa: E402
from faultlens.injectors.generators import gen_input  # noqa: E402
from faultlens.injectors.pipeline import inject_one  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "supervisor_team"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("langgraph_supervisor") is None or importlib.util.find_spec("langchain_openai") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    return seed_runs(ENV, SIM, 0, 9)  # shared with test_framework_envs


def test_the_answers_are_computed_by_us():
    env = envs.get(ENV)
    for task in env.tasks(0, 6):
        items, formula = read_question(task.query)
        assert items == task.metadata["items"] and formula == task.metadata["formula"]
        prices = {i: task.metadata["catalogue"][i]["price"] for i in items}
        expr = formula
        for item, price in prices.items():
            expr = expr.replace(item, price)
        assert calculate(expr).endswith(f"= {task.reference_answer}")
    assert calculate("2 × 3").startswith("cannot compute")


def test_seeded_ids_are_the_same_in_every_process():
    a, b = SeededIds("t"), SeededIds("t")
    assert [a.uuid4() for _ in range(3)] == [b.uuid4() for _ in range(3)]
    assert SeededIds("u").uuid4() != SeededIds("t").uuid4()


@needs_sdk
def test_the_requests_are_langgraph_supervisors_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls][0] == "supervisor" and calls[-1].agent == "supervisor"
    tools = [t["function"]["name"] for t in calls[0].request["tools"]]
    assert tools == ["transfer_to_researcher", "transfer_to_calculator"]  # our fixed order (see env.py)
    back = [m for c in calls if c.agent == "supervisor" for m in c.request["messages"]
            if m.get("role") == "assistant" and m.get("content") == "Transferring back to supervisor"]
    assert back and back[0]["tool_calls"][0]["function"]["name"] == "transfer_back_to_supervisor"
    worker = next(c for c in calls if c.agent == "researcher")
    assert {t["function"]["name"] for t in worker.request["tools"]} == {"lookup_price", "lookup_shipping"}


@needs_sdk
def test_the_supervisor_plans_and_answers(runs):
    for _, result in runs:
        steps = result.trace.steps
        assert steps[0].kind == StepKind.plan and steps[-1].kind == StepKind.final_answer
        assert all(s.tool_name is None for s in steps if s.metadata.get("handoff"))


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    unknown = sum(any(s.kind == StepKind.tool_result and s.content.startswith("unknown item") for s in r.trace.steps) for _, r in runs)
    assert unknown >= 2
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert not any(s.content.startswith("unknown item") for s in clean.trace.steps)


@needs_sdk
def test_a_run_that_loops_ends_as_a_failed_run_at_the_recursion_limit(monkeypatch):
    from faultlens.injectors.envs.supervisor_team import env as team

    monkeypatch.setattr(team, "RECURSION_LIMIT", 3)
    env = envs.get(ENV)
    result = env.run(env.tasks(0, 1)[0], sim={"seed": 0, "noise": 0.0})
    assert not result.trace.outcome.success and len(result.trace.steps) < 10


@needs_sdk
def test_runs_are_captured_as_langchains_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.langchain")
    assert imported.source.framework == "langgraph"
    # One LLM span per recorded call, each under the agent that made it (the langgraph span adapter).
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    assert llm == [c.agent for c in seed_run.recording.calls]
    assert [a.name for a in imported.agents] == ["supervisor", "researcher", "calculator"]
    assert not any(s.content == "__end__" for s in imported.steps)  # the routing to the graph's end is no step
    tools = [s.content for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name == "lookup_price"]
    assert tools and not any(t.startswith('{"type": "tool"') for t in tools)  # the tool's output, not LangChain's ToolMessage


@needs_sdk
def test_every_applicable_mode_is_made_by_the_template_generator_and_never_drifts(runs):
    from faultlens.injectors.applicability import applicable_modes
    from faultlens.injectors.generators import get_generator

    env, generator = envs.get(ENV), get_generator("template")
    kept: set[str] = set()
    for task, result in runs[:4]:
        done: set[str] = set()
        for t, call in enumerate(result.step_calls):
            step = result.trace.steps[t]
            for mode in applicable_modes(step, result.trace) if call is not None else []:
                generated = None if mode in done else generator.generate(gen_input(result.trace, t, mode, random.Random(t), env))
                if generated is None:
                    continue
                done.add(mode)
                attempt = inject_one(env, result.trace, result.recording, t, mode, generated, model=None, sim=SIM,
                                     trace_id=f"{task.id}-t{t}-{mode}", step_calls=result.step_calls)
                assert attempt.status in ("kept", "succeeded"), (mode, attempt.status, attempt.reason)
                if attempt.status == "kept":
                    assert attempt.trace.steps[t].content == generated.text
                    kept.add(mode)
    assert kept == set(MUTATORS)  # every mode with a rule, and no other (P.*, V.3 are declared not applicable)
