"""The faultlens HTTP server: OTLP/HTTP ingest, a REST API, background attribution and a web UI.

    from faultlens.server import create_app, run_server
    app = create_app(open_store("runs.db"), on_failure=my_attribute_fn)
    run_server(app, host="127.0.0.1", port=4318)

`on_failure(trace_id)` is injected by the caller (`faultlens serve` wires in
attribution and reflection from the packages above middleware); it returns
what it saved (`feedback.loop.Saved`, an Attribution, a list of them, or
None), which is what `evaluation_exporter=` sends on over OTLP.
"""

from .app import DEFAULT_MAX_BODY, OutcomeIn, create_app
from .auth import TOKEN_ENV, UnsafeBind, check_bind, is_loopback, resolve_token
from .interop import EVENT_NAME, EvaluationExporter, otlp_http_exporter
from .run import ServerThread, run_server
from .failed_runs import FailureWorker, JobStatus

__all__ = [
    "DEFAULT_MAX_BODY",
    "EVENT_NAME",
    "EvaluationExporter",
    "FailureWorker",
    "JobStatus",
    "OutcomeIn",
    "ServerThread",
    "TOKEN_ENV",
    "UnsafeBind",
    "check_bind",
    "create_app",
    "is_loopback",
    "otlp_http_exporter",
    "resolve_token",
    "run_server",
]
