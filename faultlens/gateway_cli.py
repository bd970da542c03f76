"""`faultlens gateway`: the live gateway (`middleware.capture.live_gateway`) mounted on the faultlens server, with lessons at the door.

One process serves both: the gateway's OpenAI-compatible routes (every call
forwarded upstream and recorded as a step) and the server's (OTLP ingest,
`POST /api/runs/{id}/outcome`, the failed-run worker that attributes and
reflects, the UI), under the server's rules: loopback by default, a token
when exposed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from faultlens.attributors import parse_options
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.gateway_lessons import EVERY_AGENT, GatewayLessons
from faultlens.feedback.memory import LessonMemory
from faultlens.middleware.capture.live_gateway import Gateway
from faultlens.middleware.capture.upstream import DEFAULT_TIMEOUT, LiteLLMUpstream
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store import Store, open_store
from faultlens.rerun.cli import rerun_options, rerun_wrapper
from faultlens.wiring import build_app, cli_token, detect_options
from faultlens.server import TOKEN_ENV, check_bind, run_server
from faultlens.server.gateway_routes import gateway_router


SHUTDOWN_DRAIN_SECONDS = 30.0  # how long a stopping gateway waits for a store that is down before dropping queued steps


def build_gateway_app(store: Store, upstream: Any, *, lessons_for: tuple[str, ...] | list[str] = (), k: int | None = None,
                      max_pending: int = 10_000, max_upstream_calls: int = 64, **serve_options: Any) -> tuple[Any, Gateway]:
    """The faultlens server app over `store` with the gateway's routes; lessons shown to the agents in `lessons_for`.

    When the server stops (SIGINT or SIGTERM) the gateway writes its queued steps before the app's worker stops.
    """
    memory = LessonMemory(store)
    made: list[Gateway] = []  # the gateway needs the app's services, and the app's shutdown needs the gateway
    app = build_app(store, on_shutdown=[lambda: made[0].close(SHUTDOWN_DRAIN_SECONDS)], **serve_options)
    # A failed outcome posted before the run's steps were written holds its job: the writer wakes it, as ingest does.
    live = Gateway(upstream, store, GatewayLessons(memory, lessons_for, k=k), max_pending=max_pending,
                   max_upstream_calls=max_upstream_calls, on_stored=app.state.services.wake_waiting)
    made.append(live)
    app.include_router(gateway_router(live))
    return app, live


@click.command("gateway")
@click.option("--upstream", metavar="MODEL", required=True,
              help="litellm model every call is forwarded to; {agent} is replaced by the calling agent's name (e.g. openai/gpt-4o-mini).")
@click.option("--api-base", default=None, help="Base URL of the upstream (a local OpenAI-compatible server), passed to litellm.")
@click.option("--lessons-for", "lessons_for", multiple=True, metavar="AGENT",
              help=f"Show this agent its lessons (repeatable; '{EVERY_AGENT}' for every agent). Default: no agent gets lessons.")
@click.option("--lessons", "k", type=int, default=None, help="At most this many lessons per call [default: the memory's, 3].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on. Anything but loopback needs a token.")
@click.option("--port", default=4318, show_default=True)
@db_option()
@click.option("--token", default=None, help="Require 'Authorization: Bearer TOKEN' [default: $FAULTLENS_TOKEN]. Prefer $FAULTLENS_TOKEN or --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Read the token from this file's first line.")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="Attribution method for failed runs.")
@click.option("--model", default=None, help="litellm model for LLM attribution methods.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE", help="An attribution method option, repeatable.")
@click.option("--reflector", default=None, help="How lessons are written: offline (default), or a litellm model name.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=0), help="Threads attributing failed runs (0: `faultlens worker`).")
@click.option("--max-pending", default=10_000, show_default=True, help="Steps kept waiting while the store is unreachable; more are dropped and counted.")
@click.option("--upstream-timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds an upstream call may take; then the client gets 504.")
@click.option("--max-upstream-calls", type=click.IntRange(min=1), default=64, show_default=True,
              help="Upstream calls in flight at once; more wait. The server's own routes (health, API, UI) never wait on them.")
@rerun_options
@detect_options
def gateway(upstream, api_base, lessons_for, k, host, port, db_path, token, token_file, method, model, method_options, reflector,
            workers, max_pending, upstream_timeout, max_upstream_calls, rerun_command, rerun_upstream, rerun_api_base, rerun_judge,
            detect, suspect_above):
    """Forward every model call of any framework upstream, record it as a step, and show each agent its lessons.

    Point the program's OpenAI base URL at http://HOST:PORT/agent/NAME/v1 (one
    per agent; or /v1 with the header X-Faultlens-Agent). Runs are told apart by
    the W3C traceparent header (joining the OpenTelemetry spans of the same
    trace), else /run/ID/agent/NAME/v1 or the header X-Faultlens-Run. Report how
    a run ended with POST /api/runs/ID/outcome: a failure is attributed, and the
    lessons drawn from it are shown to the enabled agents (--lessons-for) on
    similar tasks. GET /gateway/status counts calls, steps recorded, queued and dropped.

    Only the OpenAI chat parameters reach the upstream; a request naming where
    the call goes or with which key (base_url, api_key, mock_response,
    num_retries, ...) gets 400 (docs/gateway.md lists both).
    """
    token = cli_token("--token", token, token_file, TOKEN_ENV)
    check_bind(host, token)
    store = open_store(db_path)
    kwargs = {"api_base": api_base} if api_base else {}
    app, gw = build_gateway_app(store, LiteLLMUpstream(upstream, timeout=upstream_timeout, **kwargs), lessons_for=lessons_for, k=k,
                                max_pending=max_pending, max_upstream_calls=max_upstream_calls,
                                method=method, model=model, method_options=parse_options(method_options), reflector=reflector,
                                verify_with=rerun_wrapper(rerun_command, rerun_upstream, rerun_api_base, rerun_judge),
                                detect=detect, suspect_above=suspect_above,
                                token=token, workers=workers)
    shown = ", ".join(lessons_for) if lessons_for else "no agent (enable with --lessons-for)"
    click.echo(f"faultlens gateway on http://{host}:{port}/v1 -> {upstream}; store {store.location}; lessons for {shown}")
    try:
        run_server(app, host=host, port=port, token=token)
    finally:  # reached on SIGINT; on SIGTERM the app's shutdown has written the queued steps already
        gw.close()
        status = gw.status()
        click.echo(f"{status['calls']} call(s): {status['recorded']} step(s) recorded, {status['dropped']} dropped, "
                   f"{status['upstream_errors']} upstream error(s), lessons shown on {status['lessons_shown']} call(s)")
