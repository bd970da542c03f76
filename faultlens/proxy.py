"""`faultlens proxy`: an OpenAI-compatible endpoint that records, replays and injects (see `faultlens.middleware.replay.endpoint`, its routes `faultlens.server.proxy_app`)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from faultlens.injectors.proxy_mistakes import chat_error
from faultlens.middleware.replay.endpoint import ChatProxy, litellm_upstream
from faultlens.middleware.replay.session import Recording
from faultlens.server.auth import is_loopback
from faultlens.server.proxy_app import create_proxy_app
from faultlens.server.run import run_server

console = Console(stderr=True)


def build_proxy(mode: str, recording: Path, upstream: str | None, at: int | None, error_mode: str | None,
                seed: int, out: Path | None, values: tuple[str, ...] = ()) -> tuple[ChatProxy, list | None]:
    """The proxy for `mode`, with its recording read or to be written; checks the options first."""
    if mode == "record":
        if not upstream:
            raise click.UsageError("--mode record forwards every call upstream: give --upstream MODEL (any litellm model)")
        return ChatProxy.recorder(litellm_upstream(upstream), save_to=recording), None
    if not recording.exists():
        raise click.UsageError(f"--recording {recording}: no such file (record a run first with --mode record)")
    try:
        recorded = Recording.loads(recording.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise click.UsageError(f"--recording {recording}: not a faultlens recording ({exc})") from None
    if mode == "replay":
        return ChatProxy.replayer(recorded), None
    if at is None or not error_mode or not upstream:
        raise click.UsageError("--mode inject needs --at T, --error-mode MODE and --upstream MODEL (calls after T run live)")
    override = chat_error(error_mode, seed=seed, distractors=[v.split(",") for v in values])
    proxy = ChatProxy.injector(recorded, at, override, litellm_upstream(upstream), save_to=out)
    return proxy, override.injected  # type: ignore[attr-defined]


@click.command("proxy")
@click.option("--mode", type=click.Choice(["record", "replay", "inject"]), required=True,
              help="record: forward upstream and record; replay: answer from the recording; inject: replay to --at, inject there, then live.")
@click.option("--recording", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The recording: written in record mode, read in replay and inject modes.")
@click.option("--upstream", metavar="MODEL", help="litellm model that answers live calls (record, inject), e.g. ollama/llama3 or openai/gpt-4o-mini.")
@click.option("--at", type=int, help="inject: the 0-based call that gets the error.")
@click.option("--error-mode", metavar="MODE", help="inject: failure mode of the error, e.g. R.3 or A.2 (see `faultlens bench`'s taxonomy).")
@click.option("--seed", type=int, default=0, show_default=True, help="inject: seed of the error generator.")
@click.option("--values", multiple=True, metavar="A,B,C",
              help="inject: a group of interchangeable values of your domain (repeatable); entity-swapping modes swap within a group.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="inject: write the injected run's recording here.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback only: the proxy has no authentication).")
@click.option("--port", type=int, default=4000, show_default=True)
def proxy(mode, recording, upstream, at, error_mode, seed, values, out, host, port):
    """Serve an OpenAI-compatible endpoint that records, replays or injects errors into any agent's model calls.

    Point the framework's OpenAI base URL at http://HOST:PORT/v1 (or
    http://HOST:PORT/agent/NAME/v1 to name the agent). Warm-start injection for
    your own agents: record a successful run, then re-run the program against
    `--mode inject --at T --error-mode MODE` and see whether the run still succeeds.
    GET /proxy/status shows calls replayed, live and injected, and any drift.
    """
    if not is_loopback(host):
        raise click.UsageError(f"--host {host}: the proxy serves recorded model answers without authentication; bind it to a loopback address")
    chat, injected = build_proxy(mode, recording, upstream, at, error_mode, seed, out, values)
    console.print(f"faultlens proxy ({mode}) on http://{host}:{port}/v1 — recording {recording}")
    run_server(create_proxy_app(chat), host=host, port=port)
    status = chat.status()
    console.print(f"{status['calls']} call(s): {status['replayed']} replayed, {status['live']} live, "
                  f"{status['overridden']} injected, {len(status['drift'])} drift")
    for item in injected or []:
        console.print(f"injected {item['mode']} at call {item['index']} ({item['agent']}): {item['reason']}")
