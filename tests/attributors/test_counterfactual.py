"""`counterfactual`: trials from the earliest candidate, the rerun budget, fallbacks, and the corrector."""

from __future__ import annotations

import pytest

from faultlens.attributors import get
from faultlens.attributors.base import BaseAttributor
from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Attribution, Candidate, Outcome, Source, Step, StepKind, Task, Trace
from faultlens.middleware.replay.rerunners import CallableRerunner, NotRerunnable, Trial, register_rerun, rerunner_for

N = 6


def counter_run(bad: int | None, fixed: dict[int, str] | None = None, recorded: Trace | None = None) -> Trace:
    """A toy agent team: each agent adds one to the previous agent's number; the task wants N-1 at the end.

    `bad` corrupts that step (+10, carried forward). A rerun (`recorded` given) replays the steps before the
    changed one, regenerates it, and re-runs a later agent only if what it was given changed.
    """
    steps: list[Step] = []
    changed = False
    for i in range(N):
        before = int(steps[-1].content) if steps else -1
        if recorded is not None and i < min(fixed or {0: ""}):
            value = recorded.steps[i].content  # replayed prefix
        elif fixed and i in fixed:
            value = fixed[i]
        elif recorded is not None and not changed and i > min(fixed or {0: ""}):
            value = recorded.steps[i].content  # nothing it depends on changed: its recorded answer holds
        else:
            value = str(before + 1 + (10 if i == bad else 0))
        if recorded is not None and value != recorded.steps[i].content:
            changed = True
        steps.append(Step(index=i, agent=f"agent{i % 3}", kind=StepKind.message, content=value))
    ok = steps[-1].content == str(N - 1)
    return Trace(id=f"counter-{bad}", task=Task(query=f"count to {N - 1}"), steps=steps, outcome=Outcome(success=ok),
                 source=Source(benchmark="counter-team"))


def rerun_counter(trace: Trace, step: int, replacement: str | None) -> Trace:
    before = int(trace.steps[step - 1].content) if step else -1
    regenerated = replacement if replacement is not None else str(before + 1)
    return counter_run(None, {step: regenerated}, recorded=trace)


class Ranked(BaseAttributor):
    """A stand-in ranking (a real base is tested in tests/injectors/test_rerun.py): fixed candidate steps."""

    name = "ranked"

    def __init__(self, steps: list[int]):
        self.steps = steps

    def attribute(self, trace: Trace) -> Attribution:
        return Attribution(trace_id=trace.id, method=self.name, step=self.steps[0], agent=trace.steps[self.steps[0]].agent,
                           mode="R.3", confidence=0.4,
                           ranking=[Candidate(step=s, score=1.0 / (r + 1)) for r, s in enumerate(self.steps)])


@pytest.fixture
def rerunner():
    return CallableRerunner("counter-team", rerun_counter)


def test_the_toy_team_fails_only_when_a_step_is_corrupted():
    assert counter_run(None).outcome.success
    assert not counter_run(2).outcome.success


def test_verdict_is_the_earliest_candidate_whose_correction_fixes_the_run(rerunner):
    trace = counter_run(bad=2)
    cf = get("counterfactual", base=Ranked([4, 2, 0]), k=3, rerunner=rerunner)
    a = cf.attribute(trace)
    assert (a.step, a.agent, a.details["verified"]) == (2, "agent2", True)
    # earliest first: step 0 is tried (no change, still fails), then 2 fixes it; 4 is never tried
    assert [(t["step"], t["success"]) for t in a.details["trials"]] == [(0, False), (2, True)]
    assert a.details["trials"][0]["changed"] is False and a.details["trials"][1]["changed"] is True
    assert a.details["reruns"] == 2 and a.cost.reruns == 2
    assert a.ranking[0].step == 2 and a.confidence == 1.0
    assert a.mode is None and a.details["mode_from"] == "ranked"  # the base named the mode of step 4, not of step 2
    # with mode_from=correction: "12" became "2", a number no input holds, so a calculation error
    a = get("counterfactual", base=Ranked([4, 2, 0]), k=3, rerunner=rerunner, mode_from="correction").attribute(trace)
    assert a.mode == "R.3" and a.details["mode_from"] == "correction"
    with pytest.raises(FaultlensError, match="mode_from"):
        get("counterfactual", base=Ranked([2]), mode_from="guess")


def test_budget_in_reruns_and_fallback_to_the_ranking(rerunner):
    trace = counter_run(bad=5)
    a = get("counterfactual", base=Ranked([1, 3, 5]), k=3, max_reruns=2, rerunner=rerunner).attribute(trace)
    assert a.details["reruns"] == 2 and not a.details["verified"]
    assert "budget" in a.details["fallback"]
    assert a.step == 1 and a.mode == "R.3"  # the base's top step and its mode
    a = get("counterfactual", base=Ranked([1, 3]), k=2, rerunner=rerunner).attribute(trace)
    assert "no correction of the top 2" in a.details["fallback"] and a.details["reruns"] == 2


def test_no_rerunner_falls_back_and_says_why():
    trace = counter_run(bad=2).model_copy(update={"source": Source(benchmark="somebody-else")})
    a = get("counterfactual", base=Ranked([3])).attribute(trace)
    assert a.step == 3 and a.details["verified"] is False and a.details["reruns"] == 0
    assert "no rerunner" in a.details["fallback"] and "somebody-else" in a.details["fallback"]


def test_registered_rerun_function_is_found_by_benchmark_name():
    register_rerun("counter-team", rerun_counter)
    trace = counter_run(bad=3)
    assert rerunner_for(trace).name == "counter-team"
    a = get("counterfactual", base=Ranked([3, 4])).attribute(trace)
    assert a.step == 3 and a.details["verified"] and a.details["rerunner"] == "counter-team"


def test_not_rerunnable_stops_the_trials():
    class Broken(CallableRerunner):
        def rerun(self, trace, step, replacement=None):
            raise NotRerunnable("the task is gone")

    a = get("counterfactual", base=Ranked([0, 1]), rerunner=Broken("x", rerun_counter)).attribute(counter_run(bad=1))
    assert a.step == 0 and a.details["fallback"] == "not re-runnable: the task is gone"


def test_corrector_model_writes_the_replacement(rerunner, scripted):
    llm = scripted(lambda messages, params: "2")  # the corrected number for step 2
    trace = counter_run(bad=2)
    a = get("counterfactual", base=Ranked([2]), corrector="scripted/fixer", rerunner=rerunner).attribute(trace)
    assert a.details["verified"] and a.step == 2 and a.model == "scripted/fixer"
    assert a.details["trials"][0]["regenerated"] == "2"
    assert a.cost.calls == 1 and a.cost.input_tokens == 100
    asked = llm.calls[0]["messages"][-1]["content"]
    assert "count to 5" in asked and "Step 2 by agent2" in asked and "12" in asked  # the task and the bad step shown


def test_corrector_empty_answer_is_recorded_not_rerun(rerunner, scripted):
    scripted(lambda messages, params: "   ")
    a = get("counterfactual", base=Ranked([2]), corrector="scripted/fixer", rerunner=rerunner).attribute(counter_run(bad=2))
    assert a.details["reruns"] == 0 and not a.details["verified"]
    assert "empty" in a.details["trials"][0]["detail"]


def test_bad_options_are_errors():
    with pytest.raises(FaultlensError, match="k must be"):
        get("counterfactual", base=Ranked([0]), k=0)
    with pytest.raises(FaultlensError, match="itself"):
        get("counterfactual", base="counterfactual")


def test_draws_try_a_changed_but_unfixed_step_again_within_the_budget():
    class Flaky(CallableRerunner):
        """Step 2's first new draw changes it but a slip downstream undoes it; the second draw fixes the run."""

        def __init__(self):
            super().__init__("counter-team", rerun_counter)
            self.draws = 0

        def rerun(self, trace, step, replacement=None):
            if step != 2:
                return Trial(step=step, success=False, changed=False)
            self.draws += 1
            return Trial(step=step, success=self.draws == 2, changed=True, regenerated="2")

    trace = counter_run(bad=2)
    a = get("counterfactual", base=Ranked([2, 0]), k=2, draws=2, max_reruns=4, rerunner=Flaky()).attribute(trace)
    # step 0 did not change: it is not drawn again; step 2 changed without fixing the run: drawn a second time
    assert [(t["step"], t["success"]) for t in a.details["trials"]] == [(0, False), (2, False), (2, True)]
    assert a.details["verified"] and a.step == 2 and a.cost.reruns == 3
    a = get("counterfactual", base=Ranked([2]), k=1, rerunner=Flaky()).attribute(trace)
    assert not a.details["verified"] and a.details["reruns"] == 1  # draws=1 (the default): one draw a step
    with pytest.raises(FaultlensError, match="draws"):
        get("counterfactual", base=Ranked([2]), draws=0)


def test_a_control_that_also_succeeds_moves_on_to_the_next_candidate():
    class Sampling(CallableRerunner):
        """Step 0's new draw changes the run and it succeeds, but so does the run with step 0 as it was (a later call
        drawn anew no longer slips): step 0 decided nothing. Step 2's control still fails: step 2 is decisive."""

        def __init__(self):
            super().__init__("counter-team", rerun_counter)
            self.controls: list[int] = []

        def rerun(self, trace, step, replacement=None):
            return Trial(step=step, success=step in (0, 2), changed=True, regenerated="x")

        def control(self, trace, step):
            self.controls.append(step)
            return Trial(step=step, success=step == 0, control=True)

    sampling = Sampling()
    a = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=6, rerunner=sampling).attribute(counter_run(bad=2))
    assert a.details["verified"] and a.step == 2 and sampling.controls == [0, 2]
    assert [(t["step"], t["success"], t.get("control", False)) for t in a.details["trials"]] == [
        (0, True, False), (0, True, True), (2, True, False), (2, False, True)]
    assert a.details["reruns"] == 4
    # The control is a rerun: with no budget left for it, the step is not confirmed.
    a = get("counterfactual", base=Ranked([2]), k=1, max_reruns=1, rerunner=Sampling()).attribute(counter_run(bad=2))
    assert not a.details["verified"] and "before the controls of step 2" in a.details["fallback"]


def test_with_two_controls_a_step_is_confirmed_only_if_both_still_fail():
    class Chance(CallableRerunner):
        """Every new draw fixes the run. Step 0's first control fails by chance (a later call slipped again), its
        second succeeds: step 0 decided nothing. Step 2's controls both fail: step 2 is decisive."""

        def __init__(self):
            super().__init__("counter-team", rerun_counter)
            self.controls: list[int] = []

        def rerun(self, trace, step, replacement=None):
            return Trial(step=step, success=True, changed=True, regenerated="x")

        def control(self, trace, step):
            self.controls.append(step)
            return Trial(step=step, success=step == 0 and self.controls.count(0) == 2, control=True)

    one = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=9, rerunner=Chance()).attribute(counter_run(bad=2))
    # One control: the chance failure passes the innocent step 0, but step 2's new draw fixed the run with step 0 as
    # recorded, which overturns it (see the next test).
    assert one.details["verified"] and one.step == 2 and one.details["overturned"] == {"0": 2}
    chance = Chance()
    two = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=9, controls=2, rerunner=chance).attribute(counter_run(bad=2))
    assert two.details["verified"] and two.step == 2 and chance.controls == [0, 0, 2, 2]
    assert two.details["reruns"] == 6
    # Every control counts against the budget: with room for one of step 2's two, it is not confirmed.
    short = get("counterfactual", base=Ranked([2]), k=1, max_reruns=2, controls=2, rerunner=Chance()).attribute(counter_run(bad=2))
    assert not short.details["verified"] and "before the controls of step 2" in short.details["fallback"]
    with pytest.raises(FaultlensError, match="controls"):
        get("counterfactual", base=Ranked([2]), controls=0)


class LaterFix(CallableRerunner):
    """Step 0 is innocent, but its new draw fixes the run (a later call drawn anew did not slip) and its control fails
    by chance. Step 2 is decisive: its new draw, with step 0 as recorded, fixes the run."""

    def __init__(self):
        super().__init__("counter-team", rerun_counter)
        self.asked: list[tuple[int, str]] = []

    def rerun(self, trace, step, replacement=None):
        self.asked.append((step, "draw"))
        return Trial(step=step, success=step in (0, 2), changed=True, regenerated=replacement or "x", live_calls=1)

    def control(self, trace, step):
        self.asked.append((step, "control"))
        return Trial(step=step, success=False, control=True)


def test_a_later_step_whose_new_draw_fixed_the_run_overturns_an_earlier_confirmed_one():
    later = LaterFix()
    a = get("counterfactual", base=Ranked([2, 1, 0]), k=3, max_reruns=9, rerunner=later).attribute(counter_run(bad=2))
    # Step 0 passed its control; then each later candidate is drawn once: step 1 does not fix the run, step 2 does,
    # with step 0 as recorded. Step 2's own control follows; nothing after it is left to overturn it.
    assert a.details["verified"] and a.step == 2 and a.details["overturned"] == {"0": 2}
    assert later.asked == [(0, "draw"), (0, "control"), (1, "draw"), (2, "draw"), (2, "control")]
    assert a.details["reruns"] == 5
    # The later draws count against the budget; when it runs out first, the step whose controls held stands.
    short = get("counterfactual", base=Ranked([2, 1, 0]), k=3, max_reruns=3, rerunner=LaterFix()).attribute(counter_run(bad=2))
    assert short.details["verified"] and short.step == 0 and "overturned" not in short.details


def test_a_corrector_s_fix_of_a_later_step_overturns_nothing(scripted):
    # A corrector can write a later step's right answer outright; that says nothing about the earlier step.
    scripted(lambda messages, params: "fixed")
    later = LaterFix()
    a = get("counterfactual", base=Ranked([2, 1, 0]), k=3, max_reruns=9, corrector="scripted/fixer", rerunner=later).attribute(
        counter_run(bad=2))
    assert a.details["verified"] and a.step == 0 and later.asked == [(0, "draw"), (0, "control")]


def test_a_control_that_failed_exactly_as_recorded_ends_the_controls():
    class Repeat(CallableRerunner):
        """Step 2's new draw fixes the run; its control gives every recorded reply again (`exact`) or not."""

        def __init__(self, exact):
            super().__init__("counter-team", rerun_counter)
            self.exact, self.controls = exact, 0

        def rerun(self, trace, step, replacement=None):
            return Trial(step=step, success=step == 2, changed=True, regenerated="x", live_calls=1)

        def control(self, trace, step):
            self.controls += 1
            return Trial(step=step, success=False, control=True, as_recorded=self.exact)

    for exact, controls in ((True, 1), (False, 2)):
        repeat = Repeat(exact)
        a = get("counterfactual", base=Ranked([2]), k=1, max_reruns=5, controls=2, rerunner=repeat).attribute(counter_run(bad=2))
        assert a.details["verified"] and a.step == 2 and repeat.controls == controls and a.details["reruns"] == 1 + controls


def test_a_correcting_rerun_that_made_no_live_call_needs_no_control():
    class Replayed(CallableRerunner):
        """Step 2's new draw fixes the run; every other call got its recorded reply (`live`: how many went live)."""

        def __init__(self, live):
            super().__init__("counter-team", rerun_counter)
            self.live, self.controls = live, []

        def rerun(self, trace, step, replacement=None):
            return Trial(step=step, success=step == 2, changed=True, regenerated="x", live_calls=self.live)

        def control(self, trace, step):
            self.controls.append(step)
            return Trial(step=step, success=False, control=True)

    alone = Replayed(live=0)
    a = get("counterfactual", base=Ranked([2]), k=1, max_reruns=5, controls=2, rerunner=alone).attribute(counter_run(bad=2))
    assert a.details["verified"] and a.step == 2 and alone.controls == [] and a.details["reruns"] == 1
    drawn = Replayed(live=1)  # a later call went live: it may have drawn the success by chance, so the controls run
    a = get("counterfactual", base=Ranked([2]), k=1, max_reruns=5, controls=2, rerunner=drawn).attribute(counter_run(bad=2))
    assert a.details["verified"] and drawn.controls == [2, 2] and a.details["reruns"] == 3


class Disputed(CallableRerunner):
    """Every new draw fixes the run. Step 0 is innocent: its controls succeed. Step 2 is decisive, but the first of its
    controls succeeds by chance (`lucky`: how many of its controls do)."""

    def __init__(self, lucky):
        super().__init__("counter-team", rerun_counter)
        self.lucky, self.controls = lucky, []

    def rerun(self, trace, step, replacement=None):
        return Trial(step=step, success=True, changed=True, regenerated=f"fixed {step}", live_calls=1)

    def control(self, trace, step):
        self.controls.append(step)
        return Trial(step=step, success=step == 0 or self.controls.count(2) <= self.lucky, control=True)


def test_steps_whose_control_succeeded_by_chance_are_checked_again_when_nothing_was_confirmed():
    lucky = Disputed(lucky=1)
    a = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=12, controls=2, rerunner=lucky).attribute(counter_run(bad=2))
    # Sweep: step 0 disputed (its control succeeded), step 2 disputed (its first control succeeded by chance).
    # Nothing confirmed: step 0 is checked again and fails its check; step 2's two new controls both fail.
    assert a.details["verified"] and a.step == 2 and a.details["disputed"] == [0, 2]
    assert lucky.controls == [0, 2, 0, 2, 2]
    assert a.details["reruns"] == 7  # two draws and five controls
    assert "fallback" not in a.details
    unlucky = Disputed(lucky=3)  # step 2's new controls succeed too: nothing is confirmed, the base's step stands
    a = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=12, controls=2, rerunner=unlucky).attribute(counter_run(bad=2))
    assert not a.details["verified"] and a.details["disputed"] == [0, 2]
    assert "was confirmed: the ones that made the run succeed (steps 0, 2) also had a control that succeeded" in a.details["fallback"]
    short = get("counterfactual", base=Ranked([2, 0]), k=2, max_reruns=4, controls=2, rerunner=Disputed(lucky=1)).attribute(
        counter_run(bad=2))
    assert not short.details["verified"] and "second controls" in short.details["fallback"]


def test_a_trial_that_did_not_rerun_the_program_is_not_counted_as_a_rerun():
    class Probing(CallableRerunner):
        def __init__(self):
            super().__init__("counter-team", rerun_counter)

        def rerun(self, trace, step, replacement=None):
            if step == 0:  # its new draw gave the recorded reply: nothing to re-run
                return Trial(step=step, success=False, changed=False, reran=False, outcome="unchanged")
            return Trial(step=step, success=True, changed=True)

    a = get("counterfactual", base=Ranked([2, 0]), k=2, draws=3, max_reruns=1, rerunner=Probing()).attribute(counter_run(bad=2))
    assert a.details["verified"] and a.step == 2 and a.details["reruns"] == 1
    assert [t["outcome"] for t in a.details["trials"] if "outcome" in t] == ["unchanged"]  # not drawn again either


def test_when_nothing_fixed_the_run_the_calls_that_said_the_same_are_asked_again():
    class Repeating(CallableRerunner):
        """Step 0 is decisive, but its first new draw repeats the slip (a model call, no re-run); step 2 is innocent:
        its new draws change it and the run still fails."""

        def __init__(self):
            super().__init__("counter-team", rerun_counter)
            self.asked: list[int] = []

        def rerun(self, trace, step, replacement=None):
            self.asked.append(step)
            if step == 0 and self.asked.count(0) == 1:
                return Trial(step=0, success=False, changed=False, reran=False, outcome="unchanged")
            return Trial(step=step, success=step == 0, changed=True, outcome="success" if step == 0 else "failure")

        def control(self, trace, step):
            return Trial(step=step, success=False, control=True, outcome="failure")

    repeating = Repeating()
    a = get("counterfactual", base=Ranked([2, 0]), k=2, draws=2, max_reruns=9, rerunner=repeating).attribute(counter_run(bad=2))
    # The first sweep: step 0 said the same, step 2 drawn twice without a fix. The second asks step 0 alone again.
    assert repeating.asked == [0, 2, 2, 0]
    assert a.details["verified"] and a.step == 0 and a.details["reruns"] == 4  # two of step 2, step 0's, its control
    one = Repeating()
    b = get("counterfactual", base=Ranked([2, 0]), k=2, draws=1, max_reruns=9, rerunner=one).attribute(counter_run(bad=2))
    assert not b.details["verified"] and one.asked == [0, 2]  # one draw: one sweep


def test_when_nothing_was_confirmed_a_step_whose_draws_were_all_undone_is_drawn_again():
    class Undone(CallableRerunner):
        """Step 1 is decisive, but its first two new draws are each undone by a later slip; its third fixes the run.
        Step 3 is innocent: its new draws change it and the run still fails."""

        def __init__(self):
            super().__init__("counter-team", rerun_counter)
            self.asked: list[int] = []

        def rerun(self, trace, step, replacement=None):
            self.asked.append(step)
            fixed = step == 1 and self.asked.count(1) == 3
            return Trial(step=step, success=fixed, changed=True, outcome="success" if fixed else "failure")

        def control(self, trace, step):
            return Trial(step=step, success=False, control=True, outcome="failure", as_recorded=True)

    undone = Undone()
    a = get("counterfactual", base=Ranked([3, 1]), k=2, draws=2, max_reruns=20, rerunner=undone).attribute(counter_run(bad=1))
    # The first sweep draws each candidate twice, in vain; the second gives each changed one more, earliest first:
    # step 1's third draw fixes the run, its control holds, and step 3 drawn once after it (the later check) does not.
    assert undone.asked == [1, 1, 3, 3, 1, 3] and a.details["drawn_again"] == [1, 3]
    assert a.details["verified"] and a.step == 1 and a.details["reruns"] == 7  # six draws and one control
    once = Undone()
    b = get("counterfactual", base=Ranked([3, 1]), k=2, draws=1, max_reruns=20, rerunner=once).attribute(counter_run(bad=1))
    assert not b.details["verified"] and once.asked == [1, 3] and "drawn_again" not in b.details  # one draw: no second chance
