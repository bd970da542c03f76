"""`counterfactual`: attribution verified by re-running the agents with one step corrected.

1. A base attributor (default `learned`) ranks the steps; its top `k` are the candidates.
2. From the earliest candidate on, each *trial* replays the run up to the
   candidate step, regenerates that step (re-samples the agent, or, with
   `corrector=MODEL`, puts a model's corrected action there), continues with
   every call the change did not touch held fixed, and evaluates the task
   (`middleware.replay.rerunners`).
3. The decisive step is the earliest candidate whose correction turns the
   failure into a success: `details["verified"]` is true. When no trial
   succeeds, the rerun budget runs out, or the trace cannot be re-run, the
   verdict is the base's top step, `verified` is false and
   `details["fallback"]` says why. Nothing is guessed.
4. The mode is the base's (its classifier's, for a step other than its top
   one). With `mode_from="correction"`, the mode of a verified step is read
   from what its correction changed (`methods.correction`) when the change
   says something; `details["mode_from"]` says which. That reads natural slips
   well (the feedback example's team) but the bundled benchmark's injected
   errors of 22 modes worse than `learned` (mode F1 0.307 against 0.553), so it
   is not the default.

With `draws=n`, a re-sampled candidate whose new draw changed it without
fixing the run is drawn again, up to n draws in all (a slip downstream may
have undone the correction); every draw is a rerun. When no candidate fixed
the run, the candidates whose new draw (one model call, `Trial.reran` false)
only said what was recorded are asked again, up to n sweeps: a sampled agent
may repeat its slip by chance, and a call that changes now is re-run. When
still nothing was confirmed, the candidates whose every new draw changed them
without fixing the run are drawn again, up to n more draws each
(`details["drawn_again"]`): where later calls slip often, each correction may
have been undone by a new slip, and a run with no verdict has the most to gain.

When the rerunner offers a *control* (`CommandRerunner` does), a candidate
whose correction made the run succeed is confirmed only if the run re-run with
that step as recorded (and every later call drawn anew) still fails: with
agents that sample, a correction that changes the run may let later calls
draw again and succeed by chance. With `controls=n`, n such re-runs must all
fail: a control that fails only because a later call slipped again by chance
confirms an innocent step, and two in a row do so far more rarely. A control
that succeeds moves on to the next candidate; each control is a rerun. A
control that failed exactly as recorded (every call drawn anew gave its
recorded reply, `Trial.as_recorded`) ends the controls: no chance was
involved, and another would draw the same. (`CommandRerunner` draws a control's
later calls before running the program, and runs it only when one differs.)
Two exceptions, both by what the trials showed:

- a correcting re-run that made no live call (every other call got its
  recorded reply, `Trial.live_calls == 0`) needs no control: nothing but the
  corrected reply changed, so it alone turned the failure into a success;
- a control can also succeed by chance (a later call, drawn anew, slips into
  the right answer). When no candidate was confirmed, the candidates whose
  correction fixed the run but one of whose controls succeeded
  (`details["disputed"]`) are checked once more, earliest first, with n more
  controls that must all fail. An innocent step passes that second check
  about as rarely as the first, and it is made only in a run where nothing
  else was confirmed.

A step whose controls held is then checked against the candidates after it,
each drawn anew once (not with a corrector, which can write a later step's
right answer outright): a later step whose new draw makes the run succeed
replayed every call before it as recorded, so that trial is a control of the
earlier step that succeeded. The earlier step is overturned
(`details["overturned"]`: step -> the later step) and the search goes on
from the later one, whose own controls and later candidates follow. When the
budget runs out during these draws, the step whose controls held stands.

The budget is counted in reruns (`max_reruns` per trace, default `k`), not just
tokens: `details["reruns"]` is what was spent, `details["trials"]` what each
trial did, and `cost.reruns` carries the count into benchmark reports.
`cost.calls` counts the corrector's model calls (none by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Candidate, Cost, Trace
from faultlens.middleware.replay.rerunners import NotRerunnable, Rerunner, Trial, rerunner_for

from .. import prompt_text
from ..base import Attributor, BaseAttributor
from ..llm import LLMClient
from ..registry import get, register
from .correction import mode_of_correction

PROMPT_VERSION = "counterfactual/v1"
MODE_FROM = ("base", "correction")
CORRECTOR_SYSTEM = (
    "You fix one step of a failed agent run. Reply with the corrected content of that step only, written "
    "the way that agent writes it (an action stays an action in the same format), with no commentary."
)


class Counterfactual(BaseAttributor):
    """See the module docstring. `base` and `base_options` choose the ranking; `rerunner` overrides the registry."""

    name = "counterfactual"

    def __init__(self, base: str | Attributor = "learned", k: int = 3, max_reruns: int | None = None,
                 corrector: str | None = None, rerunner: Rerunner | None = None, draws: int = 1, mode_from: str = "base",
                 controls: int = 1, **base_options: Any):
        k, max_reruns, draws, controls = int(k), int(max_reruns) if max_reruns is not None else None, int(draws), int(controls)
        if draws < 1:
            raise FaultlensError(f"counterfactual: draws must be at least 1, not {draws}")
        if controls < 1:
            raise FaultlensError(f"counterfactual: controls must be at least 1, not {controls}")
        self.controls = controls
        if mode_from not in MODE_FROM:
            raise FaultlensError(f"counterfactual: mode_from must be one of {', '.join(MODE_FROM)}, not {mode_from!r}")
        self.mode_from = mode_from
        if k < 1:
            raise FaultlensError(f"counterfactual: k must be at least 1, not {k}")
        if max_reruns is not None and max_reruns < 0:
            raise FaultlensError(f"counterfactual: max_reruns must be 0 or more, not {max_reruns}")
        if isinstance(base, str) and base == self.name:
            raise FaultlensError("counterfactual cannot rank with itself; choose another base, e.g. base=learned")
        self.base = get(base, **base_options) if isinstance(base, str) else base
        self.k, self.max_reruns, self.draws = k, (k if max_reruns is None else max_reruns), draws
        self.corrector = corrector
        self.rerunner = rerunner
        self._client: LLMClient | None = None

    # -- the parts ---------------------------------------------------------
    def _candidates(self, ranked: Attribution) -> list[int]:
        steps = [c.step for c in ranked.ranking] or ([ranked.step] if ranked.step is not None else [])
        unique = list(dict.fromkeys(steps))[: self.k]
        return sorted(unique)  # earliest first: the decisive error is the first one that matters

    def _correction(self, trace: Trace, step: int) -> tuple[str | None, Cost]:
        """A model's corrected content for `step`, or (None, no cost) when the agent is simply re-sampled."""
        if self.corrector is None:
            return None, Cost()
        if self._client is None:
            self._client = LLMClient(model=self.corrector, max_tokens=800)
        target = trace.steps[step]
        history = prompt_text.render_steps(trace.steps[:step], limit=600) or "(no earlier steps)"
        user = (f"Task: {trace.task.query}\n\nSteps so far:\n{history}\n\n"
                f"Step {step} by {target.agent} ({target.kind.value}) was:\n{target.content}\n\n"
                f"It may be the decisive error of this failed run. Write what {target.agent} should have written at "
                f"step {step} instead.")
        reply = self._client.call([{"role": "system", "content": CORRECTOR_SYSTEM}, {"role": "user", "content": user}])
        return (reply.text.strip() or None), reply.cost

    def _mode_at(self, trace: Trace, ranked: Attribution, step: int) -> str | None:
        if step == ranked.step:
            return ranked.mode
        mode_at = getattr(self.base, "mode_at", None)  # a base that can name the mode of any step (learned can)
        return mode_at(trace, step) if callable(mode_at) else None

    @staticmethod
    def _trial(run: Callable[..., Trial], details: dict[str, Any], *args: Any) -> Trial:
        """One trial, listed in the details; counted as a rerun unless the program was not run."""
        trial = run(*args)
        details["reruns"] += trial.reran is not False
        details["trials"].append(trial.to_json())
        return trial

    def _controls_fail(self, control: Callable[..., Trial], details: dict[str, Any], trace: Trace, step: int) -> bool | None:
        """Whether every control of `step` still failed (None: the budget ran out first). A run that also succeeds
        with the step as it was failed by a later chance, not by this step: the first such control ends the checks.
        So does one that failed exactly as recorded (`Trial.as_recorded`): every call drawn anew gave its recorded
        reply, so no chance was involved, and another control would draw the same."""
        for _ in range(self.controls):
            if details["reruns"] >= self.max_reruns:
                return None
            trial = self._trial(control, details, trace, step)
            if trial.success:
                return False
            if trial.as_recorded:
                return True
        return True

    def _sweep(self, steps: list[int], trace: Trace, rerunner: Rerunner, details: dict[str, Any],
               disputed: dict[int, str | None]) -> tuple[int | None, str | None, str | None, Cost]:
        """Try `steps` in order: (the verified step, its correction, why the search must stop (None: it may go
        on), the corrector's cost). A step whose correction fixed the run but one of whose controls also
        succeeded is added to `disputed`, with its correction; one overturned by a later step goes on to that step."""
        cost = Cost()
        carried: Trial | None = None  # the trial of a later step that already made the run succeed (`_later_fix`)
        index = 0
        while index < len(steps):
            step = steps[index]
            index += 1
            replacement: str | None = None
            try:
                if carried is not None and carried.step == step:
                    trial, carried = carried, None
                else:
                    if details["reruns"] >= self.max_reruns:
                        return None, None, f"rerun budget spent ({self.max_reruns}) before a correction fixed the run", cost
                    replacement, spent = self._correction(trace, step)
                    cost = cost + spent
                    if self.corrector is not None and replacement is None:
                        details["trials"].append(Trial(step=step, success=False,
                                                       detail="the corrector's answer was empty; not re-run").to_json())
                        continue
                    trial = self._drawn(rerunner, details, trace, step, replacement)
                control = getattr(rerunner, "control", None)
                if trial.success and callable(control) and trial.live_calls != 0:
                    held = self._controls_fail(control, details, trace, step)
                    if held is None:
                        return None, None, f"rerun budget spent ({self.max_reruns}) before the controls of step {step}", cost
                    if not held:
                        disputed.setdefault(step, replacement if replacement is not None else trial.regenerated)
                        continue
                    later = self._later_fix(steps[index:], trace, rerunner, details) if replacement is None else None
                    if later is not None:
                        details.setdefault("overturned", {})[str(step)] = later.step
                        carried, index = later, steps.index(later.step)
                        continue
            except NotRerunnable as exc:
                return None, None, _not_rerunnable(exc, details), cost
            if trial.success:
                return step, (replacement if replacement is not None else trial.regenerated), None, cost
        return None, None, None, cost

    def _drawn(self, rerunner: Rerunner, details: dict[str, Any], trace: Trace, step: int, replacement: str | None) -> Trial:
        """The correcting trial of `step`. A new draw that changed the step yet did not fix the run may have been
        undone by a slip downstream: it is drawn again, up to `draws` times in all."""
        trial = self._trial(rerunner.rerun, details, trace, step, replacement)
        for _ in range(self.draws - 1):
            if trial.success or replacement is not None or not trial.changed or details["reruns"] >= self.max_reruns:
                break
            trial = self._trial(rerunner.rerun, details, trace, step, None)
        return trial

    def _later_fix(self, later: list[int], trace: Trace, rerunner: Rerunner, details: dict[str, Any]) -> Trial | None:
        """The trial of the first of `later` whose new draw made the run succeed (None: none did, or the budget ran
        out first). One draw each. Every earlier call was replayed as recorded, so such a trial is a control of a
        step before it that succeeded: the run can succeed with that step as it was."""
        for step in later:
            if details["reruns"] >= self.max_reruns:
                return None
            trial = self._trial(rerunner.rerun, details, trace, step, None)
            if trial.success:
                return trial
        return None

    def _recheck(self, disputed: dict[int, str | None], trace: Trace, rerunner: Rerunner,
                 details: dict[str, Any]) -> tuple[int | None, str | None, str | None]:
        """The disputed steps, earliest first, each given `controls` more controls: (the first whose new controls all
        failed, its correction, why the search stopped (None: it did not have to))."""
        control = getattr(rerunner, "control")
        for step in sorted(disputed):
            try:
                held = self._controls_fail(control, details, trace, step)
            except NotRerunnable as exc:
                return None, None, _not_rerunnable(exc, details)
            if held is None:
                return None, None, f"rerun budget spent ({self.max_reruns}) before the second controls of step {step}"
            if held:
                return step, disputed[step], None
        return None, None, None

    # -- the method --------------------------------------------------------
    def attribute(self, trace: Trace) -> Attribution:
        started = time.monotonic()
        ranked = self.base.attribute(trace)
        base_name = getattr(self.base, "name", type(self.base).__name__)
        details: dict[str, Any] = {"base": base_name, "base_step": ranked.step, "k": self.k,
                                   "max_reruns": self.max_reruns, "trials": [], "reruns": 0, "verified": False}
        if ranked.status != AttributionStatus.ok or ranked.step is None:
            return ranked.model_copy(update={"method": self.name,
                                             "details": {**details, "fallback": f"the base {base_name} gave no step"}})
        cost = ranked.cost
        verdict, fallback, corrected = None, None, None
        rerunner = self.rerunner or rerunner_for(trace)
        if rerunner is None:
            fallback = f"no rerunner can re-run this trace (source.benchmark={trace.source.benchmark!r})"
        else:
            details["rerunner"] = rerunner.name
            candidates = steps = self._candidates(ranked)
            disputed: dict[int, str | None] = {}
            for _ in range(self.draws if self.corrector is None else 1):
                verdict, corrected, fallback, spent = self._sweep(steps, trace, rerunner, details, disputed)
                cost = cost + spent
                if verdict is not None or fallback is not None:
                    break
                # Nothing fixed the run: ask again the calls whose every new draw said what was recorded (a model
                # call each, not a rerun). A sampled agent may have repeated its slip by chance; asking again only
                # when the cheap pass found nothing keeps innocent calls from drawing new slips in every run.
                steps = [step for step in steps if _only_unchanged(details["trials"], step)]
                if not steps:
                    break
            if disputed:
                details["disputed"] = sorted(disputed)
            if verdict is None and fallback is None and disputed:
                verdict, corrected, fallback = self._recheck(disputed, trace, rerunner, details)
            again = [step for step in candidates if _changed_never_fixed(details["trials"], step)]
            if verdict is None and fallback is None and self.corrector is None and self.draws > 1 and again:
                # Nothing was confirmed: a candidate whose every new draw changed it without fixing the run may have
                # been undone each time by a later slip. With nothing else left, each is given `draws` more draws.
                details["drawn_again"] = again
                verdict, corrected, fallback, spent = self._sweep(again, trace, rerunner, details, {})
                cost = cost + spent
            if verdict is None and fallback is None:
                fallback = (f"no correction of the top {self.k} candidate steps was confirmed: the ones that made the run succeed "
                            f"(steps {', '.join(map(str, sorted(disputed)))}) also had a control that succeeded" if disputed
                            else f"no correction of the top {self.k} candidate steps made the run succeed")
        if verdict is None:
            verdict = ranked.step
            details["fallback"] = fallback
        details["verified"] = fallback is None
        cost = cost.model_copy(update={"seconds": round(time.monotonic() - started, 4), "reruns": cost.reruns + details["reruns"]})
        ranking = [Candidate(step=verdict, score=1.0 if details["verified"] else (ranked.confidence or 0.0),
                             agent=trace.steps[verdict].agent, reason="verified by rerun" if details["verified"] else None)]
        ranking += [c for c in ranked.ranking if c.step != verdict]
        how = (f"correcting step {verdict} made the run succeed on rerun" if details["verified"]
               else f"not verified ({fallback}); {base_name}'s top step")
        # A verified correction shows what was wrong; the base's classifier saw only the failing step.
        mode = mode_of_correction(trace, verdict, corrected) if corrected and self.mode_from == "correction" else None
        details["mode_from"] = "correction" if mode else base_name
        return Attribution(
            trace_id=trace.id, method=self.name, backend="rerun", status=AttributionStatus.ok,
            agent=trace.steps[verdict].agent, step=verdict, mode=mode or self._mode_at(trace, ranked, verdict),
            reason=f"{how}. {ranked.reason or ''}".strip(),
            confidence=1.0 if details["verified"] else ranked.confidence, ranking=ranking, cost=cost,
            model=self.corrector, prompt_version=PROMPT_VERSION, raw=ranked.raw, details=details,
        )


def _not_rerunnable(exc: NotRerunnable, details: dict[str, Any]) -> str:
    """Why the search stopped; a re-run that showed nothing (drift, a timeout, ...) is listed, never counted."""
    if exc.trial is not None:
        details["reruns"] += exc.trial.reran is not False
        details["trials"].append(exc.trial.to_json())
        details["not_verifiable"] = True
    return f"not re-runnable: {exc}"


def _changed_never_fixed(trials: list[dict[str, Any]], step: int) -> bool:
    """Did `step`'s corrections change it, re-run, and never make the run succeed (its controls aside)?"""
    mine = [t for t in trials if t.get("step") == step and not t.get("control")]
    return any(t.get("changed") and t.get("reran") is not False for t in mine) and not any(t.get("success") for t in mine)


def _only_unchanged(trials: list[dict[str, Any]], step: int) -> bool:
    """Did every trial of `step` end at a new draw that said what was recorded (the program never re-run)?"""
    mine = [t for t in trials if t.get("step") == step]
    return bool(mine) and all(t.get("reran") is False and t.get("changed") is False for t in mine)


@register("counterfactual")
def _factory(**options: Any) -> Counterfactual:
    return Counterfactual(**options)
