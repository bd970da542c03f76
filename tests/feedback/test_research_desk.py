"""The research_desk LangGraph team: seed runs, simulated slips, gold labels, and lesson following."""

from __future__ import annotations

import pytest

from faultlens.injectors.envs import get
from faultlens.injectors.envs.research_desk.env import gold_label, plan_for
from faultlens.middleware.model.trace import Lesson


@pytest.fixture(scope="module")
def env():
    return get("research_desk")


def _sim(**tendencies):
    return {"seed": 3, "noise": 0.0, "tendencies": tendencies}


def test_tasks_are_deterministic_and_fresh(env):
    a, b = env.tasks(5, 9), env.tasks(5, 9)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert len({t.query for t in a}) == 9
    assert {t.metadata["kind"] for t in a} == {"change", "combined", "larger"}
    assert all(plan_for(t.query) is not None for t in a)


def test_a_seed_run_without_tendencies_succeeds_and_is_a_langgraph_team(env):
    for task in env.tasks(1, 3):
        result = env.run(task, sim=_sim())
        assert result.trace.outcome.success, result.trace.outcome
        assert [s.agent for s in result.trace.steps][:1] == ["planner"]
        assert {s.agent for s in result.trace.steps} == set(env.agent_names)
        assert gold_label(task, result.trace) is None


@pytest.mark.parametrize(
    ("agent", "mode"),
    [("planner", "R.4"), ("researcher", "A.2"), ("researcher", "C.2"), ("analyst", "R.3"), ("reporter", "A.4")],
)
def test_each_tendency_fails_the_run_with_the_right_gold_label_and_a_matching_lesson_prevents_it(env, agent, mode):
    task = env.tasks(2, 1)[0]
    sim = _sim(**{agent: {mode: 1.0}, "reviewer": {"V.2": 1.0}})
    failed = env.run(task, sim=sim).trace
    assert not failed.outcome.success
    gold = gold_label(task, failed)
    assert (gold.agent, gold.mode) == (agent, mode)
    assert failed.steps[gold.step].agent == agent
    lesson = Lesson(agent=agent, mode=mode, situation=f'{agent}: tasks like "{task.query}"', mistake="m", advice="a")
    # the lesson, shown to the agent it is for, is followed
    fixed = env.run(task, sim=sim, lessons={agent: [lesson]}).trace
    assert fixed.outcome.success
    assert any(lesson.id in s.lessons for s in fixed.steps if s.agent == agent)
    # shown to another agent, or naming another mode, it changes nothing
    other = "analyst" if agent != "analyst" else "planner"
    assert not env.run(task, sim=sim, lessons={other: [lesson]}).trace.outcome.success
    wrong_mode = lesson.model_copy(update={"mode": "R.2"})
    assert not env.run(task, sim=sim, lessons={agent: [wrong_mode]}).trace.outcome.success


def test_the_reviewer_catches_a_miscalculation_unless_it_slips(env):
    task = env.tasks(4, 1)[0]
    checked = env.run(task, sim=_sim(analyst={"R.3": 1.0})).trace
    reviews = [s.content for s in checked.steps if s.agent == "reviewer"]
    assert reviews and all(r.startswith("REJECTED") for r in reviews)
    assert len([s for s in checked.steps if s.agent == "analyst"]) == 2  # the analyst was asked to recompute
    # the analyst's first wrong calculation is the decisive step (it was never corrected)
    gold = gold_label(task, checked)
    assert gold.agent == "analyst" and gold.step == next(s.index for s in checked.steps if s.agent == "analyst")
    missed = env.run(task, sim=_sim(analyst={"R.3": 1.0}, reviewer={"V.2": 1.0})).trace
    assert [s.content for s in missed.steps if s.agent == "reviewer"][0].startswith("APPROVED")


def test_recovered_typos_are_not_decisive(env):
    found_typo = False
    for task in env.tasks(6, 12):
        trace = env.run(task, sim={"seed": 1, "noise": 0.6, "tendencies": {}}).trace
        errors = [s for s in trace.steps if s.kind.value == "tool_result" and "No record" in s.content]
        found_typo |= bool(errors)
        assert trace.outcome.success
    assert found_typo
