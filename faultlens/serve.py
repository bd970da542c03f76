"""`faultlens serve`: the command that runs the faultlens server (the app and its worker come from `faultlens.wiring`)."""

from __future__ import annotations

from pathlib import Path

import click

# The server first: without the [server] extra, `faultlens serve` says so, not what an import after it lacks.
from faultlens.server import DEFAULT_MAX_BODY, TOKEN_ENV, check_bind, run_server
from faultlens.attributors import parse_options
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.store import open_store
from faultlens.middleware.terminal.options import db_option
from faultlens.rerun.cli import rerun_options, rerun_wrapper
from faultlens.wiring import build_app, cli_token, detect_options, export_options, export_token_of


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
@detect_options
def serve(db_path, host, port, token, token_file, method, model, method_options, reflector, reports_dir, media_root, export_endpoint, export_token,
          export_token_file, max_body, max_queue, workers, rerun_command, rerun_upstream, rerun_api_base, rerun_judge, detect, suspect_above):
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
        detect=detect,
        suspect_above=suspect_above,
    )
    if rerun_command:
        method = f"{method}, verified by re-running `{rerun_command}`"
    attributing = f"attribution: {method}{' ' + model if model else ''} on {workers} worker(s)" if workers else "attribution: by `faultlens worker` processes"
    if export_endpoint and not workers:
        attributing += ", which export what they attribute when given --export-otlp"
    click.echo(f"faultlens serving {store.location} on http://{host}:{port}/  ({attributing})")
    run_server(app, host=host, port=port, token=token)
