"""FastAPI dependencies: the routers get the store and the shared services from the app, not from closures."""

from __future__ import annotations

from fastapi import HTTPException, Request
from starlette.convertors import PathConvertor, register_url_convertor

from faultlens.middleware.model.trace import Trace
from faultlens.middleware.store import Store, TraceNotFound
from .services import Services
from .failed_runs import FailureWorker


class RunIdConvertor(PathConvertor):
    """`{trace_id:run_id}`: a run id as the caller gave it, '/' and line breaks included (`:path`'s `.*` stops at a newline)."""

    regex = "(?s:.*)"


register_url_convertor("run_id", RunIdConvertor())


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_store(request: Request) -> Store:
    return request.app.state.services.store


def get_worker(request: Request) -> FailureWorker:
    return request.app.state.services.worker


def trace_or_404(store: Store, trace_id: str) -> Trace:
    try:
        return store.get_trace(trace_id)
    except TraceNotFound as exc:
        raise HTTPException(404, str(exc)) from None
