"""Verify a verdict by re-running the program: `verify()` and the `faultlens verify` command.

The base method ranks the steps of a failed run; from the earliest of its
top-k candidates on, the program is re-run with that call corrected
(`CommandRerunner`); the first candidate whose re-run succeeds is the
verified decisive step. Every trial is stored with the verdict; the lesson
shown to the call that fixed the run is kept in memory and counted as one
that helped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from faultlens.attributors import build
from faultlens.attributors.base import Attributor, BaseAttributor
from faultlens.attributors.methods.counterfactual import Counterfactual
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.hooks import lessons_block
from faultlens.feedback.memory import LessonMemory
from faultlens.feedback.reflect import OfflineReflector
from faultlens.middleware.capture.upstream import GatewayUpstream
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.model.trace import Attribution, Candidate, Lesson, Trace
from faultlens.middleware.replay.gateway_calls import call_steps
from faultlens.middleware.replay.rerunners import Trial
from faultlens.middleware.store import Store
from .contract import Judge, Program
from .rerunner import CommandRerunner

__all__ = ["Verifier", "verify", "verdict_json"]


class _Ranked(BaseAttributor):
    """The base's attribution, computed once: the lessons of the candidates are written from it too.

    Its ranking holds the run's model calls only (the steps a re-run can correct): the base's ranked calls
    first, in its order, then the calls it left out, earliest first (a base may rank only some kinds of step).
    """

    def __init__(self, base: Attributor, ranked: Attribution, calls: list[int]):
        self.base = base
        self.name = getattr(base, "name", type(base).__name__)
        listed = [c for c in ranked.ranking if c.step in calls]
        if not listed and ranked.step in calls:
            listed = [Candidate(step=ranked.step, score=ranked.confidence or 0.0, agent=ranked.agent)]
        seen = {c.step for c in listed}
        rest = [Candidate(step=step, score=0.0) for step in calls if step not in seen]
        self.ranked = ranked.model_copy(update={"ranking": listed + rest})

    def attribute(self, trace: Trace) -> Attribution:
        return self.ranked

    def mode_at(self, trace: Trace, step: int) -> str | None:
        if step == self.ranked.step:
            return self.ranked.mode
        mode_at = getattr(self.base, "mode_at", None)
        return mode_at(trace, step) if callable(mode_at) else self.ranked.mode


def _lesson(ranked: _Ranked, trace: Trace, step: int) -> Lesson | None:
    candidate = Attribution(trace_id=trace.id, method=ranked.name, agent=trace.steps[step].agent, step=step,
                            mode=ranked.mode_at(trace, step), reason=ranked.ranked.reason if step == ranked.ranked.step else None)
    reflection = OfflineReflector().reflect(trace, candidate)
    return reflection.lessons[0] if reflection.status == "ok" and reflection.lessons else None


class Verifier(BaseAttributor):
    """An attributor (name `verify`) that confirms its base's verdict by re-running the program (`CommandRerunner`).

    Usable wherever an attributor is: `faultlens verify`, and the server's worker (`faultlens serve --rerun CMD`).
    `lessons` holds, per step tried, the lesson shown to its re-drawn call.
    """

    name = "verify"

    def __init__(self, program: Program, upstream: GatewayUpstream, *, judge: Judge | None = None,
                 method: str | Attributor = DEFAULT_METHOD, k: int = 3, draws: int = 1, max_reruns: int | None = None,
                 corrector: str | None = None, on_trial: Callable[[Trial], None] | None = None, mode_from: str = "base",
                 controls: int = 1):
        self.program, self.upstream, self.judge = program, upstream, judge or Judge()
        self.controls = controls  # Counterfactual's: re-runs with the step as recorded that must all still fail
        self.mode_from = mode_from  # Counterfactual's: the base's mode, or one read from what the correction changed
        self.base = build(method) if isinstance(method, str) else method
        self.k, self.draws, self.max_reruns, self.corrector, self.on_trial = k, draws, max_reruns, corrector, on_trial
        self.lessons: dict[int, Lesson] = {}

    def attribute(self, trace: Trace) -> Attribution:
        ranked = _Ranked(self.base, self.base.attribute(trace), call_steps(trace))
        self.lessons = {}

        def lesson_for(shown: Trace, step: int) -> str | None:
            lesson = self.lessons.get(step) or _lesson(ranked, shown, step)
            if lesson is None:
                return None
            self.lessons[step] = lesson
            return lessons_block([lesson])

        judge = self.judge if self.judge.reference is not None else replace(self.judge, reference=trace.task.reference_answer)
        rerunner = CommandRerunner(self.program, judge, self.upstream, lesson_for=lesson_for, on_trial=self.on_trial)
        counterfactual = Counterfactual(base=ranked, k=self.k, max_reruns=self.max_reruns, corrector=self.corrector,
                                        rerunner=rerunner, draws=self.draws, mode_from=self.mode_from,
                                        controls=self.controls)
        attribution = counterfactual.attribute(trace)
        return attribution.model_copy(update={"method": self.name, "details": {**attribution.details, "base": ranked.name}})

    def fixing_lesson(self, attribution: Attribution) -> Lesson | None:
        """The lesson whose re-run made the run succeed (None if none did, or a corrector's text fixed it)."""
        if not attribution.details.get("verified") or attribution.step is None or self.corrector is not None:
            return None
        lesson = self.lessons.get(attribution.step)
        return None if lesson is None else lesson.model_copy(update={"attribution_id": attribution.id, "shown": 1, "helped": 1,
                                                                      "method": "verified by re-run"})


def verify(store: Store, run_id: str, program: Program, upstream: GatewayUpstream, *, judge: Judge | None = None,
           method: str | Attributor = DEFAULT_METHOD, k: int = 3, draws: int = 1, max_reruns: int | None = None,
           corrector: str | None = None, on_trial: Callable[[Trial], None] | None = None, mode_from: str = "base",
           controls: int = 1) -> Attribution:
    """Verify the decisive step of failed run `run_id` by re-running `program`; the verdict is stored and returned.

    `details["verified"]` says whether a re-run confirmed it; `details["trials"]` what each re-run did. The
    lesson shown to the call whose re-run succeeded is kept in memory, counted as one that helped.
    """
    trace = store.get_trace(run_id)
    if trace.outcome is None or trace.outcome.success:
        state = "succeeded" if trace.outcome is not None else "has no outcome yet"
        raise ConfigError(f"run {run_id} {state}: only a failed run has a decisive error to verify "
                          f"(post its outcome first: POST /api/runs/{run_id}/outcome)")
    verifier = Verifier(program, upstream, judge=judge, method=method, k=k, draws=draws, max_reruns=max_reruns,
                        corrector=corrector, on_trial=on_trial, mode_from=mode_from, controls=controls)
    attribution = verifier.attribute(attributor_view(trace))
    store.save_attribution(attribution)
    lesson = verifier.fixing_lesson(attribution)
    if lesson is not None:
        LessonMemory(store).add(lesson)
    return attribution


def verdict_json(attribution: Attribution) -> dict[str, Any]:
    """The verdict as `faultlens verify --json` prints it."""
    details = attribution.details
    return {"run": attribution.trace_id, "verified": bool(details.get("verified")), "agent": attribution.agent,
            "step": attribution.step, "mode": attribution.mode, "reruns": details.get("reruns", 0),
            "not_verifiable": bool(details.get("not_verifiable")), "base": details.get("base"),
            "base_step": details.get("base_step"), "fallback": details.get("fallback"), "trials": details.get("trials", [])}


def dumps(attribution: Attribution) -> str:
    return json.dumps(verdict_json(attribution), indent=2, ensure_ascii=False)
