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
from faultlens.middleware.capture.rerun_upstream import RerunUpstream
from faultlens.middleware.capture.upstream import GatewayUpstream
from faultlens.middleware.replay.rerunners import Trial
from faultlens.middleware.replay.session import Recording
from faultlens.server.run import ServerThread
from .contract import Judge, Program, contract_env

__all__ = ["NOT_VERIFIABLE", "TrialSpec", "run_trial"]

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
    rerun = RerunUpstream(spec.recording, spec.at, upstream, lesson=spec.lesson, replacement=spec.replacement)
    gateway = Gateway(rerun, None, default_run="rerun")
    posted: dict[str, bool] = {}
    run_id = f"rerun-{uuid.uuid4().hex[:12]}"
    with ServerThread(_app(gateway, posted)) as server:
        root = f"{server.url}/run/{run_id}"
        env = contract_env(root, spec.task, f"{server.url}/api/runs/{run_id}/outcome")
        ran = program.run(env)
    how = ("with a lesson in its system message" if spec.lesson else "replaced by an injected error" if isinstance(spec.replacement, dict)
           else "replaced by the corrector's text" if spec.replacement is not None else "drawn again")
    seconds = round(time.monotonic() - started, 4)

    def trial(outcome: str, detail: str, success: bool = False) -> tuple[Trial, RerunUpstream]:
        changed = None if rerun.corrected is None else rerun.corrected != _recorded_text(spec)
        return Trial(step=spec.step, success=success, outcome=outcome, detail=detail, changed=changed,
                     regenerated=(rerun.corrected or "")[:300] or None, live_calls=rerun.live_calls, seconds=seconds), rerun

    if rerun.drift is not None:
        return trial("drift", f"not verifiable: the replayed prefix drifted ({rerun.drift})")
    if ran.timed_out:
        return trial("timeout", f"not verifiable: the program ran past {program.timeout:g} s")
    if rerun.upstream_errors:
        return trial("upstream_error", f"not verifiable: the upstream failed {len(rerun.upstream_errors)} call(s): {rerun.upstream_errors[0]}")
    if rerun.corrected is None:
        return trial("drift", f"not verifiable: the program never made call {spec.at} again ({len(rerun.session.calls)} calls)")
    if ran.exit_code != 0:
        return trial("crash", f"call {spec.at} {how}: the program exited {ran.exit_code}: {ran.error}")
    verdict = judge.judge(ran.stdout, posted.get(run_id), env)
    if not verdict.judged:
        outcome = "judge_timeout" if verdict.how == "judge" else "no_judge"
        return trial(outcome, f"not verifiable: {verdict.detail}")
    ended = "succeeded" if verdict.success else "failed" if isinstance(spec.replacement, dict) else "still failed"
    return trial("success" if verdict.success else "failure", f"call {spec.at} {how}: {ended} ({verdict.detail})", verdict.success)


def _recorded_text(spec: TrialSpec) -> str:
    return completion_text(spec.recording[spec.at].response)
