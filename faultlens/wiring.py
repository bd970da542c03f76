"""The application's wiring: the server of `faultlens.server` joined to attribution, reflection and lessons.

The server (`faultlens.server`) takes its behaviour as callables, so it can be
built and tested without a method, a model or a lesson memory; this module
builds them, for every command that serves or attributes (`serve`, `gateway`,
`worker`, `phoenix sync`):

- on_failure(trace_id): attribute the run (`attributors.build(method, model, **options)`), save the
  attribution, reflect on it and keep the lessons (`feedback.loop.attribute_and_reflect`), and
  return what it saved (`feedback.loop.Saved`: `--export-otlp` exports its attribution);
  it runs on the failed-run queue in the store (`--workers` threads here, and
  any `faultlens worker` process on the same store: `faultlens.worker`);
- on_outcome(trace_id, outcome): credit the outcome to the lessons the run was shown;
- lessons_for(agent, task, k): `LessonMemory.retrieve`;
- score_run(trace): the failure detector's p_failed for runs with no outcome (`--detect`);
- verify_with(attributor): each verdict verified by re-running the program (`--rerun`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from faultlens.middleware.errors import FaultlensError, MissingExtra, extra_needed
from faultlens.middleware.model.trace import Outcome, Trace
from faultlens.server.suspects import SUSPECT_ABOVE
from faultlens.server import create_app, otlp_http_exporter, resolve_token
from faultlens.server.auth import TOKEN_ARGUMENT_WARNING
from faultlens.server.interop import EvaluationExporter
from faultlens.middleware.store import Store

from faultlens.feedback.hooks import record_trace_outcome
from faultlens.attributors import build
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.loop import Saved, attribute_and_reflect, learn_from_label
from faultlens.feedback.memory import LessonMemory
from faultlens.feedback.reflect import get_reflector
from faultlens.attributors.base import Attributor


log = logging.getLogger(__name__)


def failure_handler(
    store: Store,
    *,
    method: str = DEFAULT_METHOD,
    model: str | None = None,
    reflector: str | None = None,
    method_options: dict[str, Any] | None = None,
    verify_with: Callable[[Attributor], Attributor] | None = None,
) -> Callable[[str], Saved]:
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
    detect: bool = False,
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
    if detect:
        server_options.setdefault("score_run", failure_detector())
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


def failure_detector() -> Callable[[Trace], float | None] | None:
    """The shipped failure detector as the server's `score_run` (trace -> p_failed), or None (said in the log)
    when its model or scikit-learn is missing: a server without it still serves, it only suspects nothing."""
    try:
        with extra_needed("the failure detector"):
            from faultlens.attributors.detect import Detector

            detector = Detector()
    except (MissingExtra, FaultlensError) as exc:
        log.warning("no failed-run detection: %s", exc)
        return None
    return lambda trace: detector.score_one(trace).p_failed


def detect_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--detect/--no-detect` and `--suspect-above`, on the commands that serve (`serve`, `gateway`)."""
    options = [
        click.option("--detect/--no-detect", default=True, show_default=True,
                     help="Score finished runs that have no outcome with the offline failure detector (p_failed)."),
        click.option("--suspect-above", type=click.FloatRange(0, 1), default=SUSPECT_ABOVE, show_default=True,
                     help="A run whose p_failed reaches this is suspected: attributed like a failed run, listed apart "
                          "until a person confirms or dismisses it (docs/detect.md)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


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


