"""The faultlens HTTP app: OTLP ingest, the REST API, the web UI.

`create_app(store, ...)` wires one `Services` (store, failed-run worker,
ingestor, the caller's hooks) onto the app and includes the routers:
`routes_otlp` (POST /v1/traces), `routes_runs` (/api/runs), `routes_lessons`
(/api/lessons, /api/health, /api/worker) and `ui` (the pages). `security`
adds the token / loopback / same-origin checks and the response headers.
Attribution and reflection are injected as callables by `faultlens serve`;
lessons are ranked by the feedback package's track record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from faultlens.middleware.store import Store
from . import routes_lessons, routes_otlp, routes_runs, security
from .auth import resolve_token
from .ingest import Ingestor
from .interop import EvaluationExporter, exporting
from .routes_runs import OutcomeIn
from .services import LessonsFor, OnLabel, OnOutcome, Services, best_track_record_first, parse_since
from .ui import add_ui
from .failed_runs import FailureWorker, OnFailure
from .suspects import SUSPECT_ABOVE, Score, SuspectSweep

DEFAULT_MAX_BODY = 8 * 1024 * 1024  # bytes; OTel SDK batches are far smaller

__all__ = ["DEFAULT_MAX_BODY", "LessonsFor", "OutcomeIn", "create_app", "parse_since"]


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    # FastAPI's default answer echoes the bad input, which cannot even be encoded when it holds a lone
    # surrogate; the field and the complaint are what the client needs.
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]
    return JSONResponse({"detail": detail}, status_code=422)


def create_app(
    store: Store,
    *,
    token: str | None = None,
    on_failure: OnFailure | None = None,
    on_outcome: OnOutcome | None = None,
    on_label: OnLabel | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    max_queue: int = 1000,
    lessons_for: LessonsFor | None = None,
    reports_dir: str | Path | None = None,
    media_root: str | Path | None = None,
    evaluation_exporter: EvaluationExporter | None = None,
    queue_root_errors: bool = True,
    title: str = "faultlens",
    workers: int = 1,
    failed_login_limit: int = 10,
    failed_login_window: float = 60.0,
    on_shutdown: Sequence[Callable[[], object]] = (),
    score_run: Score | None = None,
    suspect_above: float = SUSPECT_ABOVE,
    suspect_idle: float = 60.0,
) -> FastAPI:
    """The faultlens app over `store`.

    token: if set (or $FAULTLENS_TOKEN), every request needs `Authorization: Bearer <token>`.
    on_failure: called with a trace id on the background worker whenever a run is recorded as failed;
        returns what it saved (`feedback.loop.Saved`, an Attribution, a list of them, or None), which
        `evaluation_exporter` exports.
    on_outcome: called with (trace id, outcome) right after a run's outcome is stored, through the API
        or by spans (e.g. to credit the lessons the run was shown); its errors become a 500, after the
        outcome is saved and queued.
    on_label: called with a trace id right after a person's label of the run is stored (PUT
        /api/runs/{id}/label, the run page's form), e.g. to learn lessons from it
        (`feedback.loop.learn_from_label`); its errors become a 500, after the label is saved.
    max_body_bytes: /v1/traces bodies larger than this (before or after decompression) get 413.
    max_queue: how many failed runs may wait for on_failure; beyond it they are marked dropped.
    workers: threads of this process that run on_failure; the failed-run queue is in the store, so
        `faultlens worker` processes on the same store share it (0: this server only queues).
    lessons_for: (agent, task, k) → lessons, for GET /api/lessons/for; default: the agent's active lessons,
        best track record (`feedback.memory.track_record`) first; `faultlens serve` passes `LessonMemory.retrieve`.
    reports_dir: a `faultlens bench report` output directory shown at /reports.
    media_root: step media given as local paths are served only from under this directory.
    evaluation_exporter: export each attribution on_failure saved in this process over OTLP (see
        `interop`); `faultlens worker` processes export what they save themselves (`--export-otlp`).
    queue_root_errors: also queue on_failure for a run that becomes failed through its spans (a root
        span with status ERROR and no explicit outcome), not only through POST /api/runs/{id}/outcome.
    on_shutdown: called in order when the server stops (SIGINT or SIGTERM), before the worker stops,
        e.g. to write the gateway's queued steps (uvicorn re-raises SIGTERM after its shutdown, so
        code after `uvicorn.run` never runs then).
    score_run: the failure detector (trace -> p_failed): finished runs with no outcome are scored by a
        background sweep (`suspects.SuspectSweep`); at or above `suspect_above` a run is *suspected*,
        attributed like a failed run and listed apart until a person confirms or dismisses it.
        `suspect_idle`: seconds without a new step before a run counts as finished.
    failed_login_limit, failed_login_window: after this many wrong tokens from one address within
        the window (seconds), that address gets 429 until the window has passed.
    """
    token = resolve_token(token)
    ingestor = Ingestor(store)
    after = exporting(store, evaluation_exporter) if evaluation_exporter is not None else None
    worker = FailureWorker(on_failure, store=store, workers=workers, max_queue=max_queue, after=after)
    suspects = SuspectSweep(store, worker, score_run, suspect_above, suspect_idle) if score_run is not None else None
    if lessons_for is None:
        lessons_for = best_track_record_first(store)
    services = Services(
        store=store,
        worker=worker,
        ingestor=ingestor,
        lessons_for=lessons_for,
        on_outcome=on_outcome,
        on_label=on_label,
        queue_root_errors=queue_root_errors,
        max_body_bytes=max_body_bytes,
        token=token,
        reports_dir=Path(reports_dir) if reports_dir else None,
        media_root=Path(media_root).resolve() if media_root else None,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        worker.start()
        if suspects is not None:
            suspects.start()
        try:
            yield
        finally:
            if suspects is not None:
                suspects.stop()
            for hook in on_shutdown:
                await run_in_threadpool(hook)
            await run_in_threadpool(worker.stop)

    app = FastAPI(
        title=title,
        summary="Agent failure attribution: OTLP ingest, runs, attributions and lessons.",
        version="1",
        lifespan=lifespan,
        # One schema per model, its fields as read: `Step`'s serializer (which leaves out an implied role)
        # would otherwise give it an empty output schema.
        separate_input_output_schemas=False,
    )
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.state.services = services
    app.state.suspects = suspects
    app.state.failed_logins = security.FailedLogins(failed_login_limit, failed_login_window)
    # Added first, so it runs inside the gatekeeping added next.
    app.add_middleware(routes_otlp.OtlpFastPath, services=services)
    security.install(app, token, app.state.failed_logins)
    app.include_router(routes_otlp.router)
    app.include_router(routes_runs.router)
    app.include_router(routes_lessons.router)
    add_ui(app)
    return app
