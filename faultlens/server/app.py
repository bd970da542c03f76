"""The faultlens HTTP app: OTLP ingest, the REST API, the web UI.

`create_app(store, ...)` builds a FastAPI app over a store. Everything that
needs packages above middleware (attribution, reflection, lesson retrieval) is
injected as a callable, so this module imports nothing to its right.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from faultlens.middleware.errors import InputError
from faultlens.middleware.model import Lesson, Outcome, Source, Task, Trace
from faultlens.middleware.store import SQLiteStore, TraceNotFound
from .auth import TOKEN_COOKIE, host_name, is_loopback, resolve_token, token_matches
from .ingest import Ingestor
from .interop import EvaluationExporter, blamed_span as _blamed_span
from .otlp_body import JSON, BodyError, decode_otlp, decompress, encode_response, media_type
from .worker import FailureWorker, OnFailure

log = logging.getLogger("faultlens.server")

DEFAULT_MAX_BODY = 8 * 1024 * 1024  # bytes; OTel SDK batches are far smaller
LessonsFor = Callable[[str, str, int], list[Lesson]]
# Paths open without a token: the login form itself (it only sets a cookie).
_OPEN_PATHS = {"/login"}


class OutcomeIn(BaseModel):
    """How a run ended, as the agent (or its evaluator) reports it."""

    success: bool
    score: float | None = None
    detail: str | None = None
    evaluator: str | None = Field(default=None, description="who judged the run; defaults to 'api'")


def parse_since(value: str | None) -> float | None:
    """`since` as epoch seconds, or an ISO 8601 time (naive means UTC)."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(400, f"since must be epoch seconds or ISO 8601, not {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def summary_dict(summary: Any) -> dict[str, Any]:
    return dict(summary.__dict__)


def _store_lessons_for(store: SQLiteStore) -> LessonsFor:
    """Fallback retrieval without the feedback package: the agent's active lessons, best track record first."""

    def lessons_for(agent: str, task: str, k: int) -> list[Lesson]:
        ranked = sorted(store.lessons(agent=agent), key=lambda l: ((l.helped + 1) / (l.helped + l.failed + 2), l.created_at), reverse=True)
        return ranked[:k]

    return lessons_for


def create_app(
    store: SQLiteStore,
    *,
    token: str | None = None,
    on_failure: OnFailure | None = None,
    on_outcome: Callable[[str, Outcome], Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    max_queue: int = 1000,
    lessons_for: LessonsFor | None = None,
    reports_dir: str | Path | None = None,
    media_root: str | Path | None = None,
    evaluation_exporter: EvaluationExporter | None = None,
    queue_root_errors: bool = True,
    title: str = "faultlens",
) -> FastAPI:
    """The faultlens app over `store`.

    token: if set (or $FAULTLENS_TOKEN), every request needs `Authorization: Bearer <token>`.
    on_failure: called with a trace id on the background worker whenever a run is recorded as failed.
    on_outcome: called with (trace id, outcome) right after a run's outcome is stored, through the API
        or by spans (e.g. to credit the lessons the run was shown); its errors become a 500, after the
        outcome is saved and queued.
    max_body_bytes: /v1/traces bodies larger than this (before or after decompression) get 413.
    max_queue: how many failed runs may wait for on_failure; beyond it they are marked dropped.
    lessons_for: (agent, task, k) → lessons, for GET /api/lessons/for; default: the store's lessons for the agent.
    reports_dir: a `faultlens bench report` output directory shown at /reports.
    media_root: step media given as local paths are served only from under this directory.
    evaluation_exporter: export each new attribution over OTLP (see `interop`).
    queue_root_errors: also queue on_failure for a run that becomes failed through its spans (a root
        span with status ERROR and no explicit outcome), not only through POST /api/runs/{id}/outcome.
    """
    token = resolve_token(token)
    exporter = evaluation_exporter
    ingestor = Ingestor(store)

    def export_new_attributions(trace_id: str, started: float) -> None:
        if exporter is None:
            return
        trace = store.get_trace(trace_id)
        for attribution in store.attributions(trace_id):
            if attribution.created_at >= started - 1e-3:
                exporter.export(trace, attribution, otel_trace_id=ingestor.spans.get(_blamed_span(trace, attribution)))

    worker = FailureWorker(on_failure, max_queue=max_queue, after=export_new_attributions if exporter else None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        worker.start()
        try:
            yield
        finally:
            await run_in_threadpool(worker.stop)

    app = FastAPI(
        title=title,
        summary="Agent failure attribution: OTLP ingest, runs, attributions and lessons.",
        version="1",
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.worker = worker
    app.state.token = token
    app.state.max_body_bytes = max_body_bytes
    app.state.reports_dir = Path(reports_dir) if reports_dir else None
    app.state.media_root = Path(media_root).resolve() if media_root else None
    lessons_for = lessons_for or _store_lessons_for(store)

    if not token:

        @app.middleware("http")
        async def loopback_names_only(request: Request, call_next):
            # Without a token the server trusts whoever can reach it, i.e. this
            # machine. A web page that rebinds its own DNS name to 127.0.0.1
            # could reach it too; its requests carry that name as Host.
            if is_loopback(host_name(request.headers.get("host"))):
                return await call_next(request)
            return JSONResponse(
                {"detail": "this server has no token, so it only answers requests addressed to 127.0.0.1, ::1 or localhost"},
                status_code=403,
            )

    else:

        @app.middleware("http")
        async def require_token(request: Request, call_next):
            if request.url.path in _OPEN_PATHS or request.url.path.startswith("/static/"):
                return await call_next(request)
            if token_matches(token, request.headers.get("authorization"), request.cookies.get(TOKEN_COOKIE)):
                return await call_next(request)
            wants_html = "text/html" in request.headers.get("accept", "") and request.method == "GET"
            if wants_html and not request.url.path.startswith(("/api/", "/v1/")):
                return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
            return JSONResponse(
                {"detail": "missing or wrong token: send 'Authorization: Bearer <FAULTLENS_TOKEN>'"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )

    def record_outcome(trace_id: str, outcome: Outcome) -> dict[str, Any]:
        store.set_outcome(trace_id, outcome)
        reply: dict[str, Any] = {"trace_id": trace_id, "success": outcome.success, "queued": False}
        if not outcome.success:
            # An agent may report its outcome before its span processor has
            # exported anything; attributing an empty run would blame nothing.
            if store.get_trace(trace_id).steps:
                status = worker.submit(trace_id)
            else:
                status = worker.hold(trace_id)
            reply.update(queued=status.state == "queued", worker=status.as_dict())
        if on_outcome is not None:
            on_outcome(trace_id, outcome)
        return reply

    # -- OTLP ----------------------------------------------------------------
    @app.post(
        "/v1/traces",
        tags=["otlp"],
        summary="OTLP/HTTP trace export (protobuf or JSON)",
        response_class=Response,
        responses={200: {"description": "ExportTraceServiceResponse"}, 400: {"description": "bad payload; nothing stored"}, 413: {"description": "body too large"}},
    )
    async def otlp_traces(request: Request) -> Response:
        """Point an OpenTelemetry SDK or Collector's OTLP/HTTP exporter here.

        Spans are idempotent by span id: sending the same span twice stores it
        once. A body that cannot be read stores nothing.
        """
        limit = app.state.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return JSONResponse({"detail": f"body of {declared} bytes is larger than the {limit}-byte limit"}, status_code=413)
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > limit:
                return JSONResponse({"detail": f"body is larger than the {limit}-byte limit"}, status_code=413)
        content_encoding, content_type = request.headers.get("content-encoding"), request.headers.get("content-type")

        def read_and_ingest() -> Any:
            # Off the event loop: decoding a big body takes long enough to stall other requests.
            return ingest_payload(decode_otlp(decompress(bytes(body), content_encoding, limit), content_type))

        try:
            result = await run_in_threadpool(read_and_ingest)
        except BodyError as exc:
            return JSONResponse({"detail": exc.reason}, status_code=exc.status)
        except InputError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        content, kind = encode_response(media_type(request.headers.get("content-type")) or JSON)
        return Response(content, media_type=kind, headers={"X-Faultlens-Spans": str(result.spans)})

    def ingest_payload(payload: dict[str, Any]):
        result = ingestor(payload)
        for trace_id in result.traces:
            job = worker.status(trace_id)
            if job is not None and job.state == "waiting":
                worker.submit(trace_id)
        for trace_id, outcome in result.outcomes.items():
            if queue_root_errors and not outcome.success:
                worker.submit(trace_id)
            if on_outcome is not None:
                try:
                    on_outcome(trace_id, outcome)
                except Exception:  # the spans are stored; failing the export would only make the client resend them
                    log.exception("on_outcome(%s) failed after ingest", trace_id)
        return result

    # -- runs ----------------------------------------------------------------
    @app.get("/api/runs", tags=["runs"], summary="List runs, newest first")
    def list_runs(
        status: str | None = Query(None, description="failed, succeeded or unknown"),
        agent: str | None = Query(None, description="only runs with a step by this agent"),
        since: str | None = Query(None, description="only runs updated at or after this time (epoch seconds or ISO 8601)"),
        limit: int = Query(100, ge=1, le=1000),
        offset: int = Query(0, ge=0),
    ) -> list[dict[str, Any]]:
        try:
            summaries = store.list_traces(status=status or None, agent=agent or None, since=parse_since(since), limit=limit, offset=offset)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        out = []
        for s in summaries:
            row = summary_dict(s)
            job = worker.status(s.id)
            row["attribution_job"] = job.state if job else None
            out.append(row)
        return out

    def _trace(trace_id: str):
        try:
            return store.get_trace(trace_id)
        except TraceNotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/api/runs/{trace_id}", tags=["runs"], summary="One run as a faultlens Trace")
    def get_run(trace_id: str) -> dict[str, Any]:
        return _trace(trace_id).model_dump(mode="json")

    @app.post("/api/runs/{trace_id}/outcome", tags=["runs"], summary="Record how a run ended; a failure queues attribution")
    def post_outcome(trace_id: str, outcome: OutcomeIn) -> dict[str, Any]:
        """Store the outcome. A failure is queued for attribution at once if the run has steps,
        else it waits (state `waiting`) until its first spans arrive."""
        if not store.has_trace(trace_id):
            # Spans not here yet: keep the outcome under a placeholder; the
            # run's spans fill it in (their header keeps this outcome).
            store.begin_trace(Trace(id=trace_id, task=Task(query=""), source=Source(format="otlp")))
        return record_outcome(trace_id, Outcome(success=outcome.success, score=outcome.score, detail=outcome.detail, evaluator=outcome.evaluator or "api"))

    @app.post("/api/runs/{trace_id}/attribute", tags=["runs"], summary="Queue a failed run for attribution again")
    def requeue(trace_id: str) -> dict[str, Any]:
        trace = _trace(trace_id)
        if not trace.failed:
            raise HTTPException(409, f"run {trace_id!r} is not recorded as failed; post a failed outcome first")
        status = worker.submit(trace_id)
        return {"trace_id": trace_id, "queued": status.state == "queued", "worker": status.as_dict()}

    @app.get("/api/runs/{trace_id}/attribution", tags=["runs"], summary="The run's attributions, newest last, and the worker's state")
    def get_attribution(trace_id: str) -> dict[str, Any]:
        if not store.has_trace(trace_id):
            raise HTTPException(404, f"no run with id {trace_id!r}")
        attributions = store.attributions(trace_id)
        job = worker.status(trace_id)
        return {
            "trace_id": trace_id,
            "job": job.as_dict() if job else None,
            "latest": attributions[-1].model_dump(mode="json") if attributions else None,
            "attributions": [a.model_dump(mode="json") for a in attributions],
        }

    # -- lessons -------------------------------------------------------------
    @app.get("/api/lessons", tags=["lessons"], summary="Stored lessons")
    def list_lessons(agent: str | None = None, include_retired: bool = False) -> list[dict[str, Any]]:
        return [l.model_dump(mode="json") for l in store.lessons(agent=agent or None, include_retired=include_retired)]

    @app.get("/api/lessons/for", tags=["lessons"], summary="Lessons to show an agent before it works on a task")
    def lessons_for_task(agent: str = Query(..., min_length=1), task: str = Query("", description="the task text"), k: int = Query(5, ge=1, le=50)) -> list[dict[str, Any]]:
        return [l.model_dump(mode="json") for l in lessons_for(agent, task, k)]

    # -- service -------------------------------------------------------------
    @app.get("/api/worker", tags=["service"], summary="Background worker: queue length and counters")
    def worker_status() -> dict[str, Any]:
        return worker.summary()

    @app.get("/api/health", tags=["service"], summary="Liveness and store size")
    def health() -> dict[str, Any]:
        return {"ok": True, "runs": store.count_traces(), "time": time.time()}

    from .ui import add_ui

    add_ui(app, lessons_for)
    return app
