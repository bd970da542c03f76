"""The runs API: list and read runs, record outcomes, queue and read attributions, label the decisive step."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, Field

from faultlens.middleware.model.trace import Outcome, Source, Task, Trace
from faultlens.middleware.otlp.schema import Text
from faultlens.middleware.store import Store
from .api_models import AttributionsOut, LabelOut, OutcomeOut, RequeueOut, RunSummaryOut
from .deps import get_services, get_store, get_worker, trace_or_404
from .services import Services, parse_since
from .failed_runs import FailureWorker

router = APIRouter(prefix="/api/runs", tags=["runs"])


class OutcomeIn(BaseModel):
    """How a run ended, as the agent (or its evaluator) reports it."""

    success: bool
    score: float | None = None
    detail: Text | None = None
    evaluator: Text | None = Field(default=None, description="who judged the run; defaults to 'api'")


class LabelIn(BaseModel):
    """A person's verdict on a failed run: the decisive step, and optionally who and why."""

    step: int = Field(description="the decisive step's index")
    agent: Text | None = Field(default=None, description="who is to blame; defaults to the step's agent")
    mode: Text | None = Field(default=None, description="a failure mode code of the taxonomy, e.g. A.2")
    reason: Text | None = None


@router.get("", summary="List runs, newest first", response_model=list[RunSummaryOut])
def list_runs(
    status: str | None = Query(None, description="failed, succeeded or unknown"),
    agent: str | None = Query(None, description="only runs with a step by this agent"),
    since: str | None = Query(None, description="only runs updated at or after this time (epoch seconds or ISO 8601)"),
    labelled: bool | None = Query(None, description="only runs with (true) or without (false) a person's label"),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    store: Store = Depends(get_store),
    worker: FailureWorker = Depends(get_worker),
) -> list[RunSummaryOut]:
    try:
        summaries = store.list_traces(status=status or None, agent=agent or None, since=parse_since(since), labelled=labelled,
                                      limit=limit, offset=offset)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    out = []
    for s in summaries:
        job = worker.status(s.id)
        out.append(RunSummaryOut.model_validate({**vars(s), "attribution_job": job.state if job else None}))
    return out


# A run id is the caller's conversation id and may hold '/' or a newline; `:run_id` (deps.RunIdConvertor) keeps such runs reachable, and the
# attribution route is declared first so that '.../attribution' is not read as part of an id.
@router.get("/{trace_id:run_id}/attribution", summary="The run's attributions, newest last, and the worker's state", response_model=AttributionsOut)
def get_attribution(trace_id: str, store: Store = Depends(get_store), worker: FailureWorker = Depends(get_worker)) -> AttributionsOut:
    if not store.has_trace(trace_id):
        raise HTTPException(404, f"no run with id {trace_id!r}")
    attributions = store.attributions(trace_id)
    job = worker.status(trace_id)
    return AttributionsOut(trace_id=trace_id, job=job.out() if job else None, latest=attributions[-1] if attributions else None,
                           attributions=attributions)


@router.get("/{trace_id:run_id}", summary="One run as a faultlens Trace", response_model=Trace)
def get_run(trace_id: str, store: Store = Depends(get_store)) -> Trace:
    return trace_or_404(store, trace_id)


# exclude_unset: `worker` is in the answer only for a failed run, as it always was.
@router.post("/{trace_id:run_id}/outcome", summary="Record how a run ended; a failure queues attribution", response_model=OutcomeOut,
             response_model_exclude_unset=True)
def post_outcome(trace_id: str, outcome: OutcomeIn, services: Services = Depends(get_services)) -> OutcomeOut:
    """Store the outcome. A failure is queued for attribution at once if the run has steps,
    else it waits (state `waiting`) until its first spans arrive."""
    store = services.store
    if not store.has_trace(trace_id):
        # Spans not here yet: keep the outcome under a placeholder; the
        # run's spans fill it in (their header keeps this outcome). Only if
        # still absent: a header written since the look-up is kept.
        store.begin_trace_if_absent(Trace(id=trace_id, task=Task(query=""), source=Source(format="otlp")))
    return services.record_outcome(trace_id, Outcome(success=outcome.success, score=outcome.score, detail=outcome.detail, evaluator=outcome.evaluator or "api"))


class SuspicionIn(BaseModel):
    """A person's decision on a run the failure detector suspected."""

    failed: bool = Field(description="true: confirm the run failed; false: dismiss the suspicion (the run succeeded)")


@router.post("/{trace_id:run_id}/suspicion", summary="Confirm or dismiss a suspected failure", response_model=OutcomeOut,
             response_model_exclude_unset=True)
def decide_suspicion(trace_id: str, decision: SuspicionIn, services: Services = Depends(get_services)) -> OutcomeOut:
    """The run gets the person's outcome (evaluator `person`): a confirmed failure is a failed run from now on
    (its lessons' counters and the detector's training count it); a dismissed one is a success. 409 if the run
    is not suspected or already has an outcome."""
    trace_or_404(services.store, trace_id)
    return services.decide_suspicion(trace_id, decision.failed)


@router.post("/{trace_id:run_id}/attribute", summary="Queue a failed run for attribution again", response_model=RequeueOut)
def requeue(trace_id: str, store: Store = Depends(get_store), worker: FailureWorker = Depends(get_worker)) -> RequeueOut:
    trace = trace_or_404(store, trace_id)
    if not trace.failed:
        raise HTTPException(409, f"run {trace_id!r} is not recorded as failed; post a failed outcome first")
    status = worker.submit(trace_id, again=True)
    return RequeueOut(trace_id=trace_id, queued=status.state == "queued", worker=status.out())


@router.put("/{trace_id:run_id}/label", summary="Label the run's decisive step (what `learned` trains on; lessons follow it)", response_model=LabelOut)
def put_label(trace_id: str, label: LabelIn, services: Services = Depends(get_services)) -> LabelOut:
    return services.record_label(trace_or_404(services.store, trace_id), label.step, agent=label.agent, mode=label.mode,
                                 reason=label.reason)


@router.delete("/{trace_id:run_id}/label", summary="Remove the run's label", response_model=LabelOut)
def delete_label(trace_id: str, services: Services = Depends(get_services)) -> LabelOut:
    return services.record_label(trace_or_404(services.store, trace_id), None)
