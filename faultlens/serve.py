"""`faultlens serve`: the HTTP server of `faultlens.server`, wired to attribution and reflection.

middleware cannot import the packages above it, so the server takes its
behaviour as callables; this module builds them:

- on_failure(trace_id): attribute the run (`attributors.build(method, model, **options)`), save the
  attribution, reflect on it and keep the lessons (`feedback.loop.attribute_and_reflect`), and
  return what it saved (`feedback.loop.Saved`: `--export-otlp` exports its attribution);
  it runs on the failed-run queue in the store (`--workers` threads here, and
  any `faultlens worker` process on the same store: `faultlens.worker`);
- on_outcome(trace_id, outcome): credit the outcome to the lessons the run was shown;
- lessons_for(agent, task, k): `LessonMemory.retrieve`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from faultlens.middleware.model.trace import Outcome
from faultlens.server import DEFAULT_MAX_BODY, TOKEN_ENV, check_bind, create_app, otlp_http_exporter, resolve_token, run_server
from faultlens.server.auth import TOKEN_ARGUMENT_WARNING
from faultlens.server.interop import EvaluationExporter
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store.sqlite import Store, open_store

from faultlens.feedback.hooks import record_trace_outcome
from faultlens.attributors import build, parse_options
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.loop import Saved, attribute_and_reflect, learn_from_label
from faultlens.feedback.memory import LessonMemory
from faultlens.feedback.reflect import get_reflector
from faultlens.attributors.base import Attributor
from faultlens.rerun.cli import rerun_options, rerun_wrapper


def failure_handler(
    store: Store,
    *,
    method: str = DEFAULT_METHOD,
    model: str | None = None,
    reflector: str | None = None,
    method_options: dict[str, Any] | None = None,
    verify_with: Callable[[Attributor], Attributor] | None = None,
):
    """on_failure(trace_id) -> Saved: attribute with `method`, save, reflect with `reflector`, keep the lessons.

    verify_with: wraps the attributor (`rerun.cli.rerun_wrapper`: each verdict verified by re-running the program).

    Inside a queue job, what it writes is keyed by the job (`feedback.loop.reflect_on`),
    so a job run twice (a retry, a worker that died) stores one attribution."""
    attributor = build(method, model, **(method_options or {}))
    if verify_with is not None:
        attributor = verify_with(attributor)
    reflect = get_reflector(reflector)
    memory = LessonMemory(store)

    def on_failure(trace_id: str) -> Saved:
        return attribute_and_reflect(store, trace_id, attributor, reflect, memory)

    return on_failure


def build_app(
    store: Store,
    *,
    method: str = DEFAULT_METHOD,
    model: str | None = None,
    reflector: str | None = None,
    token: str | None = None,
    export_endpoint: str | None = None,
    export_token: str | None = None,
    method_options: dict[str, Any] | None = None,
    verify_with: Callable[[Attributor], Attributor] | None = None,
    **server_options: Any,
):
    """The faultlens app over `store`, attributing failed runs with `method` (and `model`, and
    `method_options`) and reflecting with `reflector`."""
    on_failure = failure_handler(store, method=method, model=model, reflector=reflector, method_options=method_options,
                                 verify_with=verify_with)
    memory = LessonMemory(store)

    def on_outcome(trace_id: str, outcome: Outcome) -> None:
        record_trace_outcome(memory, store.get_trace(trace_id))

    label_reflector = get_reflector(reflector)

    def on_label(trace_id: str) -> None:
        # A person's verdict overrules the attributor's: the lessons follow the label.
        learn_from_label(store, trace_id, label_reflector, memory)

    exporter = evaluation_exporter(export_endpoint, export_token)
    return create_app(
        store,
        token=token,
        on_failure=on_failure,
        on_outcome=on_outcome,
        on_label=on_label,
        lessons_for=lambda agent, task, k: memory.retrieve(agent, task, k),
        evaluation_exporter=exporter,
        **server_options,
    )


EXPORT_TOKEN_ENV = "FAULTLENS_EXPORT_TOKEN"


def evaluation_exporter(endpoint: str | None, token: str | None = None) -> EvaluationExporter | None:
    """What `--export-otlp` builds: attributions out to `endpoint` over OTLP/HTTP (None: no export)."""
    return EvaluationExporter(otlp_http_exporter(endpoint, token)) if endpoint else None


def export_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--export-otlp`, `--export-token` and `--export-token-file`, on `serve` and on `worker` (each exports what it attributes)."""
    options = [
        click.option("--export-otlp", "export_endpoint", default=None,
                     help="Also send each attribution made here to this OTLP/HTTP endpoint (…/v1/traces) as a gen_ai.evaluation.result "
                          "event on the blamed span (`faultlens worker` processes export theirs: give them --export-otlp too)."),
        click.option("--export-token", default=None, help="Bearer token for --export-otlp [default: $FAULTLENS_EXPORT_TOKEN]. Visible in `ps`: prefer "
                                                         "$FAULTLENS_EXPORT_TOKEN or --export-token-file."),
        click.option("--export-token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Read the --export-otlp token from the first line of this file."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def export_token_of(given: str | None, file: Path | None) -> str | None:
    """The --export-otlp token from `--export-token`, `--export-token-file` or $FAULTLENS_EXPORT_TOKEN."""
    return cli_token("--export-token", given, file, EXPORT_TOKEN_ENV)


def cli_token(option: str, given: str | None, file: Path | None, env: str) -> str | None:
    """A token from the command line (said loudly: `ps` shows it), its file, or the environment."""
    if given is not None and file is not None:
        raise click.UsageError(f"give {option} or {option}-file, not both")
    if given:
        click.secho(TOKEN_ARGUMENT_WARNING.format(option=option, env=f"${env}"), fg="red", bold=True, err=True)
    if given is None and file is None:
        return os.environ.get(env) or None
    return resolve_token(given, file=file)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on. Anything but loopback needs a token.")
@click.option("--port", default=4318, show_default=True, help="Port (4318 is the OTLP/HTTP default, so exporters need only the host).")
@db_option()
@click.option("--token", default=None, help="Require 'Authorization: Bearer TOKEN' on every request [default: $FAULTLENS_TOKEN]. "
                                            "Visible in `ps`: prefer $FAULTLENS_TOKEN or --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Read the token from the first line of this file (not shown by `ps`, unlike --token).")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="Attribution method for failed runs (see `faultlens attribute --help`).")
@click.option("--model", default=None, help="litellm model for LLM attribution methods, e.g. openai/gpt-4o-mini.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE",
              help="An attribution method option, repeatable, e.g. -O k=5 for counterfactual.")
@click.option("--reflector", default=None, help="How lessons are written: offline (default), or a litellm model name.")
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="A `faultlens bench report` output directory to show at /reports.")
@click.option("--media-root", type=click.Path(file_okay=False, path_type=Path), default=None, help="Serve step images given as file paths only from under this directory.")
@export_options
@click.option("--max-body", default=DEFAULT_MAX_BODY, show_default=True, help="Largest accepted /v1/traces body in bytes (also after decompression).")
@click.option("--queue", "max_queue", default=1000, show_default=True, help="How many failed runs may wait for attribution.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=0),
              help="Threads attributing failed runs in this process; 0 leaves them to `faultlens worker` processes on the same store.")
@rerun_options
def serve(db_path, host, port, token, token_file, method, model, method_options, reflector, reports_dir, media_root, export_endpoint, export_token,
          export_token_file, max_body, max_queue, workers, rerun_command, rerun_upstream, rerun_api_base, rerun_judge):
    """Run the faultlens service: OTLP/HTTP ingest, background attribution, REST API and web UI.

    Point any OpenTelemetry SDK or Collector at it
    (OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318), record outcomes with
    POST /api/runs/ID/outcome, and open http://127.0.0.1:4318/ in a browser.
    The API is described at /docs.
    """
    token = cli_token("--token", token, token_file, TOKEN_ENV)
    export_token = export_token_of(export_token, export_token_file)

    check_bind(host, token)  # before opening the store: refuse early and plainly
    store = open_store(db_path)
    app = build_app(
        store,
        method=method,
        model=model,
        method_options=parse_options(method_options),
        reflector=reflector,
        token=token,
        export_endpoint=export_endpoint,
        export_token=export_token,
        reports_dir=reports_dir,
        media_root=media_root,
        max_body_bytes=max_body,
        max_queue=max_queue,
        workers=workers,
        verify_with=rerun_wrapper(rerun_command, rerun_upstream, rerun_api_base, rerun_judge),
    )
    if rerun_command:
        method = f"{method}, verified by re-running `{rerun_command}`"
    attributing = f"attribution: {method}{' ' + model if model else ''} on {workers} worker(s)" if workers else "attribution: by `faultlens worker` processes"
    if export_endpoint and not workers:
        attributing += ", which export what they attribute when given --export-otlp"
    click.echo(f"faultlens serving {store.location} on http://{host}:{port}/  ({attributing})")
    run_server(app, host=host, port=port, token=token)
