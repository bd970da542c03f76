"""The lessons and patterns API and the service endpoints (health, worker)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, HTTPException, Query

from faultlens.middleware.model.trace import Lesson
from faultlens.middleware.store import Store
from faultlens.feedback.patterns import find_patterns
from .api_models import HealthOut, PatternOut, WorkerOut
from .deps import get_services, get_store, get_worker
from .services import Services, parse_since
from .failed_runs import FailureWorker

router = APIRouter()


@router.get("/api/lessons", tags=["lessons"], summary="Stored lessons", response_model=list[Lesson])
def list_lessons(agent: str | None = None, include_retired: bool = False, store: Store = Depends(get_store)) -> list[Lesson]:
    return store.lessons(agent=agent or None, include_retired=include_retired)


@router.get("/api/lessons/for", tags=["lessons"], summary="Lessons to show an agent before it works on a task", response_model=list[Lesson])
def lessons_for_task(
    agent: str = Query(..., min_length=1),
    task: str = Query("", description="the task text"),
    k: int = Query(5, ge=1, le=50),
    services: Services = Depends(get_services),
) -> list[Lesson]:
    return services.lessons_for(agent, task, k)


@router.get("/api/patterns", tags=["lessons"], summary="Recurring failures: failed runs grouped by agent, mode and evidence",
            response_model=list[PatternOut])
def list_patterns(since: str | None = Query(None, description="only runs since: an ISO time or epoch seconds"),
                  store: Store = Depends(get_store)) -> list[PatternOut]:
    try:
        return [PatternOut.model_validate(p.as_dict()) for p in find_patterns(store, since=parse_since(since or ""))]
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None


@router.get("/api/worker", tags=["service"], summary="Background worker: queue length and counters", response_model=WorkerOut)
def worker_status(worker: FailureWorker = Depends(get_worker)) -> WorkerOut:
    return WorkerOut.model_validate(worker.summary())


@router.get("/api/health", tags=["service"], summary="Liveness and store size", response_model=HealthOut)
def health(store: Store = Depends(get_store)) -> HealthOut:
    return HealthOut(ok=True, runs=store.count_traces(), time=time.time())
