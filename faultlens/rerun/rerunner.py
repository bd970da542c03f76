"""`CommandRerunner`: re-runs a run the gateway recorded by running the user's program under the re-run contract."""

from __future__ import annotations

from collections.abc import Callable

from faultlens.middleware.capture.upstream import GatewayUpstream
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.replay.gateway_calls import call_steps, recording_of, request_of
from faultlens.middleware.replay.rerunners import NotRerunnable, Trial
from .contract import Judge, Program
from .trial import NOT_VERIFIABLE, TrialSpec, draw_anew, draw_control, run_trial

__all__ = ["CommandRerunner"]

LessonFor = Callable[[Trace, int], "str | None"]  # (trace, step) -> the lesson text shown to that step's call when drawn again


class CommandRerunner:
    """A `Rerunner` for any program that reads its model base URL from the environment (`contract`).

    Step `t` of a gateway-recorded run is the run's i-th model call; a trial
    replays calls before it, corrects it (`replacement`, or a new draw with
    `lesson_for(trace, t)` in its system message) and lets the rest run live.
    A new draw is made first, as one model call (`draw_anew`): when it gives
    the recorded reply, the program is not re-run (the run would fail as
    recorded). `control(trace, t)` re-runs with call `t` as recorded and the
    rest drawn anew; the later calls are drawn first (`draw_control`), and the
    program is re-run only when one of them differs from the recording. A
    trial that shows nothing (drift, a timeout, a failing upstream, no judge)
    raises `NotRerunnable` carrying the trial, so the verdict stays the base's.
    """

    name = "command"

    def __init__(self, program: Program, judge: Judge, upstream: GatewayUpstream, *, lesson_for: LessonFor | None = None,
                 on_trial: Callable[[Trial], None] | None = None):
        self.program, self.judge, self.upstream = program, judge, upstream
        self.lesson_for = lesson_for
        self.on_trial = on_trial

    def can_rerun(self, trace: Trace) -> bool:
        return bool(call_steps(trace))

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        calls = call_steps(trace)
        if not calls:
            raise NotRerunnable(f"run {trace.id} has no model calls recorded through the gateway; record it with `faultlens gateway`")
        if step not in calls:
            return self._report(Trial(step=step, success=False, outcome="not_a_call",
                                      detail=f"step {step} is not a model call through the gateway; only calls can be corrected"))
        lesson = self.lesson_for(trace, step) if replacement is None and self.lesson_for is not None else None
        spec = TrialSpec(recording_of(trace), calls.index(step), step, trace.task.query, lesson=lesson, replacement=replacement)
        if replacement is None:
            drawn = draw_anew(spec, trace.steps[step].agent, request_of(trace.steps[step]), self.upstream)
            if isinstance(drawn, Trial):
                return self._report(drawn)
            spec.drawn = drawn
        return self._report(run_trial(spec, self.program, self.judge, self.upstream)[0])

    def control(self, trace: Trace, step: int) -> Trial:
        """Re-run with call `step` as recorded and every later call drawn anew: does the run still fail?"""
        calls = call_steps(trace)
        if step not in calls:
            raise NotRerunnable(f"step {step} is not a model call through the gateway")
        spec = TrialSpec(recording_of(trace), calls.index(step), step, trace.task.query, control=True)
        later = [(trace.steps[s].agent, request_of(trace.steps[s])) for s in calls[spec.at + 1:]]
        drawn = draw_control(spec, later, self.upstream)
        if isinstance(drawn, Trial):
            return self._report(drawn)
        spec.drawn_later = drawn
        return self._report(run_trial(spec, self.program, self.judge, self.upstream)[0])

    def _report(self, trial: Trial) -> Trial:
        if self.on_trial is not None:
            self.on_trial(trial)
        if trial.outcome in NOT_VERIFIABLE:
            raise NotRerunnable(trial.detail, trial)
        return trial
