"""`schedule_desk`: real DSPy code (a `Solver` module around `dspy.ReAct`, a litellm-engine `dspy.LM`) on a
simulated solver.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks` extra (dspy) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.schedule_desk.tools import tools_for  # noqa: E402
from faultlens.injectors.envs.schedule_desk.world import (  # noqa: E402
    DAYS, FAMILIES, answer_for, answer_of, free_windows, make_task, other_duration, read_question)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "schedule_desk"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("dspy")
runs = seed_runs_fixture(ENV, 9)


def test_a_tasks_answer_changes_with_the_other_day_a_missing_invitee_or_another_duration():
    for i in range(60):
        question, world = make_task(random.Random(i), FAMILIES[i % 3])
        q = read_question(question)
        assert q is not None and list(q.people) == world["question"]["people"] and q.family == FAMILIES[i % 3]
        right = answer_of(world)
        other_day = DAYS[1 - DAYS.index(q.day)]
        for changed in (answer_for(world, q.people, other_day, q.minutes, q.family),
                        answer_for(world, q.people[:-1], q.day, q.minutes, q.family),
                        answer_for(world, q.people, q.day, other_duration(q.minutes), q.family)):
            assert changed is None or f"{changed // 60:02d}:{changed % 60:02d}" != right
        assert world["colleague"] not in q.people and world["colleague"] in world["calendars"]


def test_the_tools_read_the_tasks_calendars_and_refuse_what_they_cannot_read():
    _, world = make_task(random.Random(3), "earliest")
    calendar, free_slots = tools_for(world)
    person = world["question"]["people"][0]
    assert calendar(person).startswith(f"{person}'s calendar:\nMonday: ") and "\nTuesday: " in calendar(person)
    assert calendar(person + "x").startswith("error: no calendar")
    assert free_slots("10:00-11:00, 12:00-16:30", 60) == \
        "Free windows (at least 60 minutes, within the working day): 09:00-10:00, 11:00-12:00"
    assert free_slots("ten to eleven", 30).startswith("error") and free_slots("08:00-09:30", 30).startswith("error")
    assert free_windows([(540, 1020)], 30) == []


@needs_sdk
def test_the_requests_are_dspys_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert {c.agent for c in calls} == {"solver"}
    first, last = calls[0].request["messages"], calls[-1].request["messages"]
    # DSPy's ChatAdapter: the signature's fields in the system message, the inputs as [[ ## field ## ]] sections
    assert "`next_tool_name`" in first[0]["content"] and "You are the solver" in first[0]["content"]
    assert "(1) calendar" in first[0]["content"] and "finish" in first[0]["content"]
    assert first[1]["content"].startswith("[[ ## question ## ]]\nFind the ")
    assert "`reasoning`" in last[0]["content"] and "[[ ## observation_0 ## ]]" in last[1]["content"]


@needs_sdk
def test_the_solver_plans_reads_calendars_finds_slots_and_answers(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].kind == StepKind.plan and steps[0].tool_name == "calendar"
        assert steps[0].content.startswith("[[ ## next_thought ## ]]\nPlan:\n1. calendar: ")
        tools = [s.tool_name for s in steps if s.kind in (StepKind.plan, StepKind.tool_call)]
        assert tools[-1] == "free_slots" and tools.count("free_slots") == 1
        assert steps[-2].kind == StepKind.message and steps[-2].metadata["tool"] == "finish"
        assert steps[-1].kind == StepKind.final_answer and f"ANSWER: {task.reference_answer}" in steps[-1].content


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    refused = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error: no calendar") for s in r.trace.steps)
                  for _, r in runs)
    assert refused >= 1
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert len(clean.trace.steps) == 10  # plan, two calendars, free slots (each with its result), finish, answer


@needs_sdk
def test_the_solver_follows_its_plan_so_a_plan_for_the_other_day_fails_the_task(runs):
    from faultlens.injectors.envs.schedule_desk.mistakes import _r4
    from faultlens.injectors.generators import gen_input

    env = envs.get(ENV)
    task, seed = runs[0]
    generated = _r4(gen_input(seed.trace, 0, "R.4", random.Random(0), env))
    assert generated is not None
    attempt = inject_at(ENV, seed, 0, "R.4", generated)
    assert attempt.status == "kept" and attempt.trace.gold.agent == "solver"
    slots = lambda t: next(s for s in t.steps if s.tool_name == "free_slots").tool_arguments["busy"]  # noqa: E731
    assert slots(attempt.trace) != slots(seed.trace)


@needs_sdk
def test_a_tool_dspy_does_not_have_ends_the_run_unanswered(runs):
    from faultlens.injectors.envs.schedule_desk.mistakes import _a3
    from faultlens.injectors.generators import gen_input

    env = envs.get(ENV)
    task, seed = runs[1]
    generated = _a3(gen_input(seed.trace, 2, "A.3", random.Random(0), env))
    attempt = inject_at(ENV, seed, 2, "A.3", generated)
    assert attempt.status == "kept" and attempt.trace.outcome.detail == "no 'ANSWER:' line"
    assert attempt.trace.steps[-1].kind == StepKind.message and attempt.trace.steps[-1].metadata["tool"] == "find_meeting_time"


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    kept = assert_inject_keeps_many_modes(ENV)
    assert not {t.gold.mode for t in kept} & set(envs.get(ENV).not_applicable)


@needs_sdk
def test_runs_are_captured_as_dspys_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.dspy")
    assert imported.source.framework == "dspy"
    # Agents: the program's own `Solver.forward` span names the agent (the dspy span adapter), and every model call
    # and tool under it is the solver's.
    assert [a.name for a in imported.agents] == ["solver"]
    assert {s.agent for s in imported.steps} == {"solver"}
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.content for s in llm] == [c.response["choices"][0]["message"]["content"] for c in seed_run.recording.calls]
    # Tool outputs: each tool's span, its JSON-string output read as the very text the solver was given.
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name != "finish.__call__"]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [s.tool_result for s in tools] == [s.content for s in given] and len(given) >= 4
    assert [s.tool_arguments for s in tools] == [s.tool_arguments for s in seed_run.trace.steps
                                                 if s.kind in (StepKind.plan, StepKind.tool_call)]
    assert imported.task.query == seed_run.trace.task.query  # the program's question, not the adapter's prompt
