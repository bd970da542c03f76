"""Re-running environment traces: only correcting the injected step turns the failure into a success."""

from __future__ import annotations

import pytest

from faultlens.attributors import get
from faultlens.attributors.base import BaseAttributor
from faultlens.injectors.pipeline import InjectConfig, inject
from faultlens.injectors.rerun import EnvironmentRerunner
from faultlens.middleware.model.trace import Attribution, Candidate, Trace
from faultlens.middleware.replay.rerunners import NotRerunnable, rerunner_for


@pytest.fixture(scope="module")
def kept() -> list[Trace]:
    traces = inject(InjectConfig(envs=["math_react", "research_team"], seeds=3, per_seed=3, seed=7, workers=1)).traces
    assert len(traces) >= 6
    return traces


class EveryStep(BaseAttributor):
    """A ranking that lists every step, latest first, so that trials cover the whole trace."""

    name = "every-step"

    def attribute(self, trace: Trace) -> Attribution:
        last = len(trace.steps) - 1
        return Attribution(trace_id=trace.id, method=self.name, step=last, agent=trace.steps[last].agent,
                           ranking=[Candidate(step=i, score=float(i)) for i in reversed(range(len(trace.steps)))])


def test_environment_traces_find_their_rerunner_through_the_entry_point(kept):
    assert all(rerunner_for(t).name == "environments" for t in kept)
    bare = kept[0].model_copy(update={"metadata": {}})
    assert not EnvironmentRerunner().can_rerun(bare)  # the agents' settings are unknown: not the same agents


def test_only_the_injected_step_fixes_the_run(kept):
    rerunner = EnvironmentRerunner()
    for trace in kept:
        fixed = [s for s in range(len(trace.steps)) if rerunner.rerun(trace, s).success]
        assert fixed == [trace.gold.step], trace.id


def test_counterfactual_over_a_full_ranking_is_verified_at_the_gold_step(kept):
    cf = get("counterfactual", base=EveryStep(), k=100, max_reruns=100)
    for trace in kept:
        a = cf.attribute(trace)
        assert a.details["verified"] and a.step == trace.gold.step and a.agent == trace.gold.agent
        # earliest first, and no trial after the fixing one
        tried = [t["step"] for t in a.details["trials"]]
        assert tried == list(range(trace.gold.step + 1)) and a.details["reruns"] == len(tried)
        assert a.details["trials"][-1]["changed"] is True


def test_a_trace_that_no_longer_replays_is_not_rerunnable(kept):
    trace = kept[0]
    cut = trace.model_copy(update={"steps": trace.steps[:-1]})
    with pytest.raises(NotRerunnable, match="steps"):
        EnvironmentRerunner().rerun(cut, 0)
    a = get("counterfactual", base=EveryStep(), k=2).attribute(cut)
    assert not a.details["verified"] and a.details["fallback"].startswith("not re-runnable")


def test_rerun_judges_with_the_world_task_not_the_blinded_one(kept):
    from faultlens.benchmark.runner import prepare

    trace = kept[0]
    blind = prepare(trace, with_reference=False)
    assert blind.task.reference_answer is None and "injection" not in blind.metadata and blind.gold is None
    trial = EnvironmentRerunner().rerun(blind, trace.gold.step)
    assert trial.success  # the environment still knows its answer
    renamed = blind.model_copy(update={"task": blind.task.model_copy(update={"id": "someone-else"})})
    with pytest.raises(NotRerunnable, match="does not name"):
        EnvironmentRerunner().rerun(renamed, 0)


# -- a team whose failures are its own slips (the feedback example's): fresh draws and lessons shown again

@pytest.fixture(scope="module")
def desk_failure():
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.envs.research_desk.env import gold_label

    env = get_env("research_desk")
    sim = {"seed": 1, "tendencies": {"analyst": {"R.3": 0.5}, "reviewer": {"V.2": 1.0}}}
    for task in env.tasks(5, 20):
        trace = env.run(task, sim=sim).trace
        gold = gold_label(task, trace)
        if gold is not None and gold.agent == "analyst":
            return env, sim, task, trace, gold
    pytest.fail("no analyst slip in 20 tasks")


def test_recorded_resampling_repeats_a_natural_slip_and_fresh_draws_anew(desk_failure):
    env, sim, task, trace, gold = desk_failure
    same = EnvironmentRerunner().rerun(trace, gold.step)
    assert same.changed is False and not same.success  # asked the same way, the simulated analyst slips the same way
    fresh = EnvironmentRerunner(resample="fresh")
    draws = [fresh.rerun(trace, gold.step) for _ in range(6)]
    assert any(d.changed for d in draws) and len({d.regenerated for d in draws}) > 1  # every rerun is a new draw
    # the reviewer always approves, so a draw without the slip makes the run succeed, and one with it does not
    from faultlens.injectors.envs.research_desk.env import parse_calc

    def right(text: str) -> bool:
        x, sign, y, result = parse_calc(text)
        return result == (x - y if sign == "-" else x + y)

    assert all(d.success == right(d.regenerated) for d in draws)
    assert any(d.success for d in draws)
    with pytest.raises(ValueError, match="resample"):
        EnvironmentRerunner(resample="sometimes")


def test_a_rerun_shows_the_agents_the_lessons_their_run_showed(desk_failure):
    from faultlens.middleware.model.trace import Lesson

    env, sim, task, _, gold = desk_failure
    lesson = Lesson(id="l-1", agent="reporter", mode="A.4", situation="any question", mistake="wrote words", advice="Write the bare number.")
    trace = env.run(task, sim=sim, lessons={"reporter": [lesson]}).trace
    assert any(s.lessons == ["l-1"] for s in trace.steps)
    with pytest.raises(NotRerunnable, match="lessons"):
        EnvironmentRerunner().rerun(trace, 0)
    rerunner = EnvironmentRerunner(lessons={"l-1": lesson}.__getitem__)
    rerunner.rerun(trace, 0)
    reporter_calls = [c for c in rerunner._last[2].recording.calls if c.agent == "reporter"]
    assert reporter_calls and all("Write the bare number." in c.request["messages"][0]["content"] for c in reporter_calls)
    with pytest.raises(NotRerunnable, match="cannot be found"):
        EnvironmentRerunner(lessons={}.__getitem__).rerun(trace, 0)
