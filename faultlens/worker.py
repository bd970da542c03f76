"""`faultlens worker`: attribute failed runs from the store's queue, in a process of its own.

Any number of workers, on any number of machines, share the queue that
`faultlens serve` (and `feedback.FeedbackLoop`) fill: each claims a job
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL), holds a lease on it while it
attributes and reflects, and marks it done. A worker that dies leaves its job
to be claimed again when the lease runs out; what a job writes is keyed by the
job, so running it twice stores it once. With `--export-otlp`, each
attribution a worker saves is sent onto the blamed span over OTLP, under the
OpenTelemetry trace id the server stored with that span at ingest.
"""

from __future__ import annotations

import signal
import threading

import click

from faultlens.attributors.registry import DEFAULT_METHOD, parse_options
from faultlens.middleware.store.jobs import Job, JobQueue
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store import open_store

from faultlens.server.interop import exporting

from faultlens.rerun.cli import rerun_options, rerun_wrapper
from .wiring import evaluation_exporter, export_options, export_token_of, failure_handler


@click.command("worker")
@db_option("The store whose queue to work: a postgresql:// URL (or a SQLite file) [default: $FAULTLENS_DB or .faultlens/faultlens.db].")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Jobs attributed at once in this process.")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="Attribution method (see `faultlens attribute --help`).")
@click.option("--model", default=None, help="litellm model for LLM attribution methods, e.g. openai/gpt-4o-mini.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE", help="An attribution method option, repeatable.")
@click.option("--reflector", default=None, help="How lessons are written: offline (default), or a litellm model name.")
@click.option("--lease", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds a claimed job stays ours without a heartbeat; a dead worker's job is claimed again after it.")
@click.option("--max-attempts", default=3, show_default=True, type=click.IntRange(min=1), help="Failures per job before it is marked error (leases lost with their worker are counted apart).")
@click.option("--poll", default=0.5, show_default=True, type=click.FloatRange(min=0.01), help="Seconds between looks at an empty queue.")
@click.option("--exit-when-idle", is_flag=True, help="Stop once the queue is empty (for batch jobs and scripts).")
@export_options
@rerun_options
def worker(db_path, threads, method, model, method_options, reflector, lease, max_attempts, poll, exit_when_idle,
           export_endpoint, export_token, export_token_file, rerun_command, rerun_upstream, rerun_api_base, rerun_judge):
    """Attribute failed runs queued in the store, until interrupted (Ctrl-C or SIGTERM finish the job in hand)."""
    export_token = export_token_of(export_token, export_token_file)
    store = open_store(db_path)
    handler = failure_handler(store, method=method, model=model, reflector=reflector, method_options=parse_options(method_options),
                              verify_with=rerun_wrapper(rerun_command, rerun_upstream, rerun_api_base, rerun_judge))
    exporter = evaluation_exporter(export_endpoint, export_token)
    export = exporting(store, exporter) if exporter is not None else None

    def attribute(job: Job) -> None:
        saved = handler(job.trace_id)
        if export is not None:
            export(job.trace_id, saved)

    queue = JobQueue(store, attribute, workers=threads, lease=lease, max_attempts=max_attempts, poll=poll)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    click.echo(f"faultlens worker on {store.location}: {threads} thread(s), attribution: {method}{' ' + model if model else ''}, lease {lease:g} s", err=True)
    queue.start()
    try:
        while not stop.wait(poll):
            if exit_when_idle and queue.wait_idle(0):
                break
    finally:
        queue.stop(timeout=max(lease, 10.0))
        if exporter is not None:
            exporter.shutdown()
    click.echo(f"faultlens worker: {queue.processed} job(s) done, {queue.failed} failed attempt(s)", err=True)
