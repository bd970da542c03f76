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
from typing import Any

from faultlens.attributors import build
from faultlens.attributors.base import Attributor
from faultlens.attributors.methods.counterfactual import Counterfactual
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.hooks import lessons_block
from faultlens.feedback.memory import LessonMemory
from faultlens.feedback.reflect import OfflineReflector
from faultlens.middleware.capture.upstream import GatewayUpstream
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.model.trace import Attribution, Lesson, Trace
from faultlens.middleware.replay.rerunners import Trial
from faultlens.middleware.store.sqlite import Store
from .contract import Judge, Program
from .rerunner import CommandRerunner

__all__ = ["verify", "verdict_json"]


class _Ranked:
    """The base's attribution, computed once: the lessons of the candidates are written from it too."""

    def __init__(self, base: Attributor, ranked: Attribution):
        self.base, self.ranked = base, ranked
        self.name = getattr(base, "name", type(base).__name__)

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


def verify(store: Store, run_id: str, program: Program, upstream: GatewayUpstream, *, judge: Judge | None = None,
           method: str | Attributor = DEFAULT_METHOD, k: int = 3, draws: int = 1, max_reruns: int | None = None,
           corrector: str | None = None, on_trial: Callable[[Trial], None] | None = None) -> Attribution:
    """Verify the decisive step of failed run `run_id` by re-running `program`; the verdict is stored and returned.

    `details["verified"]` says whether a re-run confirmed it; `details["trials"]` what each re-run did.
    """
    trace = store.get_trace(run_id)
    if trace.outcome is None or trace.outcome.success:
        state = "succeeded" if trace.outcome is not None else "has no outcome yet"
        raise ConfigError(f"run {run_id} {state}: only a failed run has a decisive error to verify "
                          f"(post its outcome first: POST /api/runs/{run_id}/outcome)")
    judge = judge or Judge()
    if judge.reference is None:
        judge.reference = trace.task.reference_answer
    view = attributor_view(trace)
    base = build(method) if isinstance(method, str) else method
    ranked = _Ranked(base, base.attribute(view))
    lessons: dict[int, Lesson] = {}

    def lesson_for(shown: Trace, step: int) -> str | None:
        lesson = lessons.get(step) or _lesson(ranked, shown, step)
        if lesson is None:
            return None
        lessons[step] = lesson
        return lessons_block([lesson])

    rerunner = CommandRerunner(program, judge, upstream, lesson_for=lesson_for, on_trial=on_trial)
    counterfactual = Counterfactual(base=ranked, k=k, max_reruns=max_reruns, corrector=corrector, rerunner=rerunner, draws=draws)
    attribution = counterfactual.attribute(view)
    attribution = attribution.model_copy(update={"method": "verify", "details": {**attribution.details, "base": ranked.name}})
    store.save_attribution(attribution)
    lesson = lessons.get(attribution.step) if attribution.details.get("verified") and attribution.step is not None else None
    if lesson is not None and corrector is None:
        # The re-run that succeeded was shown this lesson: a lesson that fixed a run.
        LessonMemory(store).add(lesson.model_copy(update={"attribution_id": attribution.id, "shown": 1, "helped": 1,
                                                          "method": "verified by re-run"}))
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
