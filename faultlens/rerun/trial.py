"""One re-run of a recorded run: a gateway on loopback whose upstream replays the prefix and corrects one call, the program, the judge."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from faultlens.middleware.capture.live_gateway import Gateway, completion_text
from faultlens.server.gateway_routes import gateway_router
from faultlens.middleware.capture.rerun_upstream import RerunUpstream, draw
from faultlens.middleware.capture.upstream import GatewayUpstream, UpstreamError
from faultlens.middleware.replay.rerunners import REGENERATED_KEPT, Trial
from faultlens.middleware.replay.session import Recording
from faultlens.server.run import ServerThread
from .contract import Judge, Program, contract_env

__all__ = ["NOT_VERIFIABLE", "TrialSpec", "draw_anew", "draw_control", "run_trial"]

# Trial outcomes after which the re-run shows nothing about the candidate (neither confirmed nor refuted).
NOT_VERIFIABLE = frozenset({"drift", "timeout", "upstream_error", "judge_timeout", "no_judge"})


class _OutcomeIn(BaseModel):
    success: bool


@dataclass
class TrialSpec:
    """What one trial re-runs: the recording, the call to correct (its position), and how."""

    recording: Recording
    at: int  # the call's position among the run's calls
    step: int  # the same call as a step index of the run (what the trial reports)
    task: str
    lesson: str | None = None
    replacement: str | dict[str, Any] | None = None  # a text, or a whole completion (an injected error)
    drawn: dict[str, Any] | None = None  # the call's new draw, made beforehand (`draw_anew`), put in its place
    control: bool = False  # correct nothing: the call as recorded, every later call drawn anew
    drawn_later: tuple[int, dict[str, Any]] | None = None  # a control's first later call whose new draw differed (`draw_control`)


def _app(gateway: Gateway, posted: dict[str, bool]) -> FastAPI:
    app = FastAPI(title="faultlens re-run", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(gateway_router(gateway))

    @app.post("/api/runs/{run}/outcome")
    def outcome(run: str, body: _OutcomeIn) -> dict[str, bool]:
        posted[run] = body.success
        return {"success": body.success}

    return app


def run_trial(spec: TrialSpec, program: Program, judge: Judge, upstream: GatewayUpstream) -> tuple[Trial, Recording]:
    """Re-run the program once with call `spec.at` corrected; the trial says what happened, in one line,
    and the recording holds the re-run's calls (requests in `request_key` form, and replies)."""
    trial, rerun = _run(spec, program, judge, upstream)
    return trial, rerun.session.recorded


def _run(spec: TrialSpec, program: Program, judge: Judge, upstream: GatewayUpstream) -> tuple[Trial, RerunUpstream]:
    started = time.monotonic()
    rerun = RerunUpstream(spec.recording, spec.at, upstream, control=spec.control, drawn_later=spec.drawn_later,
                          replacement=spec.drawn if spec.drawn is not None else spec.replacement)
    gateway = Gateway(rerun, None, default_run="rerun")
    posted: dict[str, bool] = {}
    run_id = f"rerun-{uuid.uuid4().hex[:12]}"
    with ServerThread(_app(gateway, posted)) as server:
        root = f"{server.url}/run/{run_id}"
        env = contract_env(root, spec.task, f"{server.url}/api/runs/{run_id}/outcome")
        ran = program.run(env)
    how = _how(spec)
    seconds = round(time.monotonic() - started, 4)

    def trial(outcome: str, detail: str, success: bool = False) -> tuple[Trial, RerunUpstream]:
        changed = None if rerun.corrected is None else rerun.corrected != _recorded_text(spec)
        return Trial(step=spec.step, success=success, outcome=outcome, detail=detail, changed=changed, control=spec.control or None,
                     as_recorded=_as_recorded(spec, rerun) if spec.control else None,
                     regenerated=(rerun.corrected or "")[:REGENERATED_KEPT] or None, live_calls=rerun.live_calls, seconds=seconds), rerun

    if rerun.drift is not None:
        return trial("drift", f"not verifiable: the replayed prefix drifted ({rerun.drift})")
    if ran.timed_out:
        return trial("timeout", f"not verifiable: the program ran past {program.timeout:g} s")
    if rerun.upstream_errors:
        return trial("upstream_error", f"not verifiable: the upstream failed {len(rerun.upstream_errors)} call(s): {rerun.upstream_errors[0]}")
    if not rerun.reached:
        return trial("drift", f"not verifiable: the program never made call {spec.at} again ({len(rerun.session.calls)} calls)")
    if ran.exit_code != 0:
        return trial("crash", f"call {spec.at} {how}: the program exited {ran.exit_code}: {ran.error}")
    verdict = judge.judge(ran.stdout, posted.get(run_id), env)
    if not verdict.judged:
        outcome = "judge_timeout" if verdict.how == "judge" else "no_judge"
        return trial(outcome, f"not verifiable: {verdict.detail}")
    ended = "succeeded" if verdict.success else "failed" if isinstance(spec.replacement, dict) or spec.control else "still failed"
    return trial("success" if verdict.success else "failure", f"call {spec.at} {how}: {ended} ({verdict.detail})", verdict.success)


def _how(spec: TrialSpec) -> str:
    if spec.control:
        return "kept as recorded, every later call drawn anew (a control)"
    if spec.lesson:
        return "drawn again with a lesson in its system message"
    if isinstance(spec.replacement, dict):
        return "replaced by an injected error"
    return "replaced by the corrector's text" if spec.replacement is not None else "drawn again"


def _as_recorded(spec: TrialSpec, rerun: RerunUpstream) -> bool:
    """Did the re-run make the recorded calls again, each getting its recorded reply (live or replayed)?"""
    calls, recorded = rerun.session.calls, spec.recording.calls
    return len(calls) == len(recorded) and all(completion_text(new.response) == completion_text(old.response)
                                               for new, old in zip(calls, recorded))


def _recorded_text(spec: TrialSpec, at: int | None = None) -> str:
    """The recorded reply of call `at` (default: the trial's call), as step text."""
    return completion_text(spec.recording[spec.at if at is None else at].response)


def _upstream_failed(spec: TrialSpec, exc: UpstreamError, started: float, what: str, control: bool = False) -> Trial:
    """The trial that ends a new draw the upstream failed (`what`: which draw): it shows nothing, and ran no program."""
    return Trial(step=spec.step, success=False, outcome="upstream_error", control=control or None, reran=False,
                 seconds=round(time.monotonic() - started, 4),
                 detail=f"not verifiable: the upstream failed {what}: {exc.status}: {exc.body[:200].decode('utf-8', 'replace')}")


def draw_anew(spec: TrialSpec, agent: str, request: dict[str, Any], upstream: GatewayUpstream) -> Trial | dict[str, Any]:
    """Draw call `spec.at` anew before re-running anything: one model call with `request` (the call as recorded,
    `gateway_calls.request_of`) and the lesson in its system message.

    Returns the new completion when it differs from the recorded reply (the re-run then puts it in place), or
    the trial that ends the candidate without running the program: the same reply (the run would fail as
    recorded), or an upstream that failed.
    """
    started = time.monotonic()
    try:
        drawn = draw(upstream, agent, request, spec.lesson)
    except UpstreamError as exc:
        return _upstream_failed(spec, exc, started, f"call {spec.at}'s new draw")
    text = completion_text(drawn)
    if text != _recorded_text(spec):
        return drawn
    return Trial(step=spec.step, success=False, outcome="unchanged", changed=False, reran=False, regenerated=text[:REGENERATED_KEPT] or None,
                 seconds=round(time.monotonic() - started, 4),
                 detail=f"call {spec.at} {_how(spec)}: the same reply as recorded, so the run fails as recorded "
                        "(one model call; the program was not re-run)")


def draw_control(spec: TrialSpec, later: list[tuple[str, dict[str, Any]]], upstream: GatewayUpstream) -> Trial | tuple[int, dict[str, Any]]:
    """Draw a control's later calls anew before re-running anything, in order: `later` holds (agent, request) of
    each call after `spec.at` as recorded (`gateway_calls.request_of`).

    While each new draw gives the recorded reply, the program, replayed, would ask the next recorded request: so
    the draws go on, one model call each. Returns (position, completion) of the first call whose draw differs (the
    control re-runs the program from there, `TrialSpec.drawn_later`), or the trial that ends the control without
    running the program: every draw gave its recorded reply (the run fails as recorded, by no chance), or an
    upstream that failed. These are the calls a re-run would have drawn, in the same order: only the program's
    run is saved.
    """
    started = time.monotonic()
    for position, (agent, request) in enumerate(later, start=spec.at + 1):
        try:
            drawn = draw(upstream, agent, request)
        except UpstreamError as exc:
            return _upstream_failed(spec, exc, started, f"call {position}'s new draw for a control", control=True)
        if completion_text(drawn) != _recorded_text(spec, position):
            return position, drawn
    return Trial(step=spec.step, success=False, outcome="failure", control=True, as_recorded=True, reran=False, live_calls=len(later),
                 seconds=round(time.monotonic() - started, 4),
                 detail=f"call {spec.at} {_how(spec)}: every later call ({len(later)}) gave its recorded reply, so the run "
                        f"fails as recorded ({len(later)} model call(s); the program was not re-run)")
