"""`faultlens phoenix sync URL`: attribute a Phoenix project's failed runs and write the verdicts back as annotations."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn
from rich.table import Table

from faultlens.attributors.registry import DEFAULT_METHOD, parse_options
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store import open_store

from .client import PhoenixClient, PhoenixUnavailable
from .failed import FailureRule
from .source import parse_time
from .state import SyncState, default_state_path
from .sync import PhoenixSync, SkippedSpan, SyncSummary, watch
from .sync import Progress as ProgressCallback

console = Console(stderr=True)
_STAGES = {"spans": "spans stored", "attribute": "runs attributed", "annotate": "runs written back"}


@click.group("phoenix")
def phoenix() -> None:
    """Attribute the failed runs of an Arize Phoenix project and write the verdicts back to it."""


@phoenix.command("sync")
@click.argument("url")
@click.option("--project", default="default", show_default=True, help="The Phoenix project (its name or id).")
@db_option()
@click.option("--api-key", envvar="PHOENIX_API_KEY", default=None, help="Phoenix API key, when its auth is on [default: $PHOENIX_API_KEY].")
@click.option("--failed-if", "failed_if", multiple=True, metavar="NAME=LABEL",
              help="A run also failed when its trace or root span has this annotation (NAME=LABEL, or NAME<SCORE / NAME>SCORE), "
                   "or, as p_failed>0.7, when the failure detector's p_failed passes the bound; repeatable.")
@click.option("--trace-id", "trace_ids", multiple=True, metavar="ID", help="A Phoenix trace id to treat as failed; repeatable.")
@click.option("--status-error/--no-status-error", default=True, show_default=True, help="Whether a root span with status ERROR makes its run failed.")
@click.option("--since", default=None, metavar="ISO", help="Only spans that started at or after this time (ISO 8601; UTC unless it says).")
@click.option("--until", default=None, metavar="ISO", help="Only spans that started before this time.")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="Attribution method (see `faultlens attribute --help`).")
@click.option("--model", default=None, help="litellm model for LLM attribution methods, e.g. openai/gpt-4o-mini.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE", help="An attribution method option, repeatable.")
@click.option("--reflector", default=None, help="How lessons are written: offline (default), or a litellm model name.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Runs attributed at once in this process.")
@click.option("--page-size", default=100, show_default=True, type=click.IntRange(1, 1000), help="Spans per request.")
@click.option("--state", "state_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Where the sync keeps its place [default: beside the store, one file per URL, project and window].")
@click.option("--retries", default=5, show_default=True, type=click.IntRange(min=1), help="Attempts per request on a connection error or a 5xx answer.")
@click.option("--watch", "watch_", is_flag=True, help="Keep polling for new spans and failed runs until interrupted.")
@click.option("--interval", default=10.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds between passes with --watch.")
def sync(url, project, db_path, api_key, failed_if, trace_ids, status_error, since, until, method, model, method_options, reflector,
         workers, page_size, state_path, retries, watch_, interval) -> None:
    """Import a Phoenix project's spans, attribute its failed runs, and annotate the blamed spans in Phoenix.

    A run failed when its root span has status ERROR, when it has an annotation named with
    --failed-if (or, with --failed-if 'p_failed>0.7', when the offline failure detector's p_failed
    for the run passes the bound: every run scored gets a `faultlens.p_failed` annotation on its
    root span), or when its trace id is given with --trace-id. Each failed run is attributed
    once (the store's failed-run queue) and gets two span annotations: `faultlens.decisive_error`
    on the blamed step's span, `faultlens.verdict` on its root span. Running it again writes
    nothing new; a sync that stopped (Phoenix went down) goes on where it stopped.
    """
    rule = FailureRule.parse(failed_if, trace_ids=trace_ids, status_error=status_error)
    start = parse_time(since, "--since", "since") if since else None
    end = parse_time(until, "--until", "until") if until else None
    window = f"{start.isoformat() if start else ''}/{end.isoformat() if end else ''}" if start or end else ""
    store = open_store(db_path)
    path = state_path or default_state_path(store.location, url.rstrip("/"), project, window)
    state = SyncState.load(path, url=url.rstrip("/"), project=project, window=window)
    with PhoenixClient(url, api_key=api_key, retries=retries) as client, _bars() as (progress, bar):
        runner = PhoenixSync(client, store, project, state=state, rule=rule, method=method, model=model,
                             method_options=parse_options(method_options), reflector=reflector, workers=workers,
                             page_size=page_size, since=start, until=end, recheck=watch_, progress=bar)
        if not watch_:
            try:
                summary = runner.run_once()
            except PhoenixUnavailable as exc:
                progress.stop()
                raise click.ClickException(f"{exc}\nNothing is lost: the sync's place is saved in {path}; run the same command again to go on.") from None
        else:
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())

            def on_pass(done: SyncSummary | None, error: Exception | None) -> None:
                if error is not None:
                    progress.console.print(f"[yellow]{error}; trying again in {interval:g} s[/]")
                elif done is not None and (done.spans or done.annotations or done.skipped):
                    progress.console.print(f"pass: {done.spans} span(s), {done.failed} failed run(s), {done.annotations} annotation(s) written")
                    if done.skipped:
                        progress.console.print(f"[yellow]{escape(skipped_line(done.skipped))}[/]")

            summary = watch(runner, interval=interval, stop=stop, on_pass=on_pass)
    _print_summary(summary, state, path)


@contextmanager
def _bars() -> Iterator[tuple[Progress, ProgressCallback]]:
    """A rich progress display, and the `progress(stage, done, total)` callback that drives it."""
    progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        console=console, transient=True)
    tasks: dict[str, TaskID] = {}

    def bar(stage: str, done: int, total: int | None) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(_STAGES.get(stage, stage), total=total)
        progress.update(tasks[stage], completed=done, total=total)

    with progress:
        yield progress, bar


def _print_summary(summary: SyncSummary, state: SyncState, path: Path) -> None:
    counts = state.counts()
    table = Table(title="faultlens phoenix sync", show_header=True)
    table.add_column("")
    table.add_column("this sync", justify="right")
    table.add_column("in all", justify="right")
    table.add_row("spans", str(summary.spans), str(state.spans))
    if summary.skipped:
        table.add_row("spans skipped (malformed)", str(len(summary.skipped)), "")
    table.add_row("runs seen", str(summary.runs_seen), str(len(state.runs)))
    table.add_row("failed", str(summary.failed), str(counts["failed"] + counts["annotated"] + counts["unattributed"]))
    table.add_row("attributed", str(summary.attributed), str(counts["annotated"]))
    if summary.unattributed or counts["unattributed"]:
        table.add_row("not attributable", str(summary.unattributed), str(counts["unattributed"]))
    table.add_row("annotations written", str(summary.annotations), str(sum(len(r.annotations) for r in state.runs.values())))
    if summary.detected:
        table.add_row("p_failed written (detector)", str(summary.detected), "")
    Console().print(table)
    if summary.skipped:
        console.print(f"[yellow]{escape(skipped_line(summary.skipped))}[/]", soft_wrap=True)
    for note in summary.notes:
        console.print(f"[yellow]{note}[/]")
    if summary.pending:
        console.print(f"{summary.pending} failed run(s) are still being attributed by another worker; the next sync writes them back.")
    console.print(f"state: {path}")


def skipped_line(skipped: list[SkippedSpan], shown: int = 5) -> str:
    """How many malformed spans were left out, the ids of the first few, and why the first was."""
    ids = [span.id or "(no id)" for span in skipped]
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (f"{len(skipped)} malformed span(s) skipped (not stored, the sync went on past them): {', '.join(ids[:shown])}{more}; "
            f"the first: {skipped[0].reason}")
