"""`airline_desk`: real Agno code (a `Team` in coordinate mode whose leader delegates to two member `Agent`s with
tools) on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks` extra (agno) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.airline_desk.world import (FAMILIES, FARES, FORMULAS, answer_of, booking_of,  # noqa: E402
                                                         evaluate_formula, make_task)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "airline_desk"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("agno")
runs = seed_runs_fixture(ENV, 9)


def test_every_fare_class_prices_each_item_differently_and_answers_are_positive():
    for i in range(60):
        _, world = make_task(random.Random(i), FAMILIES[i % 3])
        policies = world["policies"]
        for item in ("change fee", "cancellation fee", "extra bag"):
            assert len({policies[f][item] for f in FARES}) == 3  # a look-up of the wrong class changes the answer
        assert answer_of(world) > 0 and booking_of(world)["paid"] > policies[booking_of(world)["fare"]]["cancellation fee"]


def test_a_formula_names_its_quantities_longest_first():
    values = {"bags": 4, "free bags": 1, "extra bag": 40}
    assert evaluate_formula(FORMULAS["bag_fee"], values) == "(4 - 1) * 40"
    assert evaluate_formula(FORMULAS["change_cost"], {"new fare": 300, "paid": 250, "change fee": 75}) == "300 - 250 + 75"


@needs_sdk
def test_the_requests_are_agnos_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["coordinator", "records"]
    # Agno's coordinate mode: the leader's own tool and Agno's delegation tool, the members listed in its system message
    assert {t["function"]["name"] for t in calls[0].request["tools"]} == {"calculate", "delegate_task_to_member"}
    system = calls[0].request["messages"][0]["content"]
    assert '<member id="records" name="records">' in system and '<member id="policy" name="policy">' in system
    assert system.startswith("You are the coordinator")
    # a member sees only the task the leader wrote for it, under Agno's role block
    first = calls[1].request["messages"]
    assert first[0]["content"].startswith("<your_role>") and first[1]["content"].startswith("Look up booking BK-")
    assert {t["function"]["name"] for t in calls[1].request["tools"]} == {"get_booking"}
    later = [c for c in calls if c.agent == "coordinator"][1].request["messages"]
    report = [m for m in later if m.get("role") == "tool"][0]["content"]
    assert report.splitlines()[0].endswith(tuple(FARES))  # the member's last reply, as Agno hands it back


@needs_sdk
def test_the_coordinator_plans_delegates_to_both_members_and_answers(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "coordinator" and steps[0].kind == StepKind.plan and steps[0].metadata["delegate"] == "records"
        assert "policy" in [s.metadata.get("delegate") for s in steps if s.kind == StepKind.message]
        reports = [s for s in steps if s.agent in ("records", "policy") and s.kind == StepKind.message]
        assert {s.agent for s in reports} == {"records", "policy"} and all(s.tool_name is None for s in reports)
        assert steps[-1].agent == "coordinator" and steps[-1].kind == StepKind.final_answer
        assert f"ANSWER: {task.reference_answer}" in steps[-1].content


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = [s.content for _, r in runs for s in r.trace.steps if s.kind == StepKind.tool_result and s.content.startswith("error")]
    assert any("no booking" in e for e in errors) and any("cannot evaluate" in e for e in errors)
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        # plan, look-up and its result, report, delegation, look-up and its result, report, calculation and result, answer
        assert len(clean.trace.steps) == 11


@needs_sdk
def test_the_coordinator_follows_its_plan_so_a_plan_with_the_other_operator_fails_the_task(runs):
    from faultlens.injectors.generators import Generated

    task, seed = next((t, r) for t, r in runs if t.metadata["family"] == "cancel_refund")
    plan = seed.trace.steps[0].content
    changed = plan.replace("calculate: paid - cancellation fee", "calculate: paid + cancellation fee")
    assert changed != plan
    attempt = inject_at(ENV, seed, 0, "R.4", Generated(changed, "the other operator"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "coordinator"
    calc = [s for s in attempt.trace.steps if s.kind == StepKind.tool_call and s.tool_name == "calculate"][-1]
    assert " + " in calc.tool_arguments["expression"]


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV)


@needs_sdk
def test_runs_are_captured_as_agnos_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.agno")
    assert imported.source.framework == "agno"
    # Agents: the Team's and the members' AGENT spans (`<name>.run`) name them; no adapter is needed because the team
    # is named after its leader. Each model call is the agent's whose run it is in, in the order of the recorded calls.
    assert [a.name for a in imported.agents] == ["coordinator", "records", "policy"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each look-up and calculation is a TOOL span whose output is the very text the agent was given;
    # each delegation is a TOOL span of the coordinator's whose output is the member's report.
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name != "delegate_task_to_member"]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    # (the importer reads a number-like output, the calculator's, as the number)
    assert [(s.agent, s.tool_name, str(s.tool_result)) for s in tools] == [(s.agent, s.tool_name, s.content) for s in given]
    assert len(given) >= 3
    delegations = [s for s in imported.steps if s.tool_name == "delegate_task_to_member"]
    reports = [s.content for s in seed_run.trace.steps if s.agent in ("records", "policy") and s.kind == StepKind.message]
    assert [s.tool_result for s in delegations] == reports and all(s.agent == "coordinator" for s in delegations)
    assert imported.task.query == seed_run.trace.task.query
