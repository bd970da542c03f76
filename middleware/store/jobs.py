"""The failed-run queue: one job row per failed run, in the store, claimed by any number of workers.

    queue = JobQueue(store, handle, workers=2)     # handle(job) attributes job.trace_id
    queue.start()
    queue.submit(trace_id)                         # a failed run becomes a job row
    queue.wait_idle(30)

The queue lives in the database, not in a process: `faultlens serve` (its
`--workers` threads), any number of `faultlens worker` processes and a
`feedback.FeedbackLoop` all take their jobs from the same `jobs` table. A
worker *claims* a job (on PostgreSQL with ``SELECT ... FOR UPDATE SKIP
LOCKED``, so two workers never claim the same one) and holds a *lease* on it
that a heartbeat renews while the handler runs. A worker that dies (SIGKILL,
lost machine) stops renewing; when the lease runs out the job is claimed
again. A handler that raises is retried after a backoff, up to
`max_attempts`, then the job is marked ``error``. A lease that ran out is not
the handler's failure (a killed worker says nothing about the run): those are
counted apart (`Job.lost`), and only `max_attempts` of them in a row of claims
give the job up (a run that kills every worker that takes it).

That is at-least-once delivery, so handlers write idempotently: `Job.key` is
the same for every attempt of one job (and changes when a run is queued
again on purpose), and an attribution saved under it replaces, rather than
adds to, what an earlier attempt wrote.

States: ``waiting`` (failed, but its spans have not arrived), ``queued``,
``running``, ``done``, ``error`` (gave up), ``dropped`` (not queued: the queue
was full or nothing attributes on this server).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Iterator, Protocol, runtime_checkable

from .redact import redact_text

log = logging.getLogger("faultlens.jobs")

STATES = ("waiting", "queued", "running", "done", "error", "dropped")
ACTIVE = ("queued", "running")
# uuid5 namespace for job keys, so a key looks like every other faultlens id (32 hex digits).
_KEY_NAMESPACE = uuid.UUID("6f1c3f52-2b7e-4d55-9a57-1d3f0e6b8a11")

JOB_COLUMNS = (
    "trace_id", "state", "generation", "attempts", "runs", "worker",
    "lease_until", "not_before", "queued_at", "started_at", "finished_at", "error", "lost",
)


# A `jobs` row as read back, in `JOB_COLUMNS`' order (the database gives its columns no types).
JobColumns = tuple[str, str, int, int, int, str | None, float | None, float | None, float | None, float | None, float | None,
                   str | None, int]


@dataclass
class Job:
    """One failed run's row in the queue."""

    trace_id: str
    state: str
    generation: int = 1  # +1 each time a finished run is queued again on purpose
    attempts: int = 0  # claims of this generation (a retry or a lost worker adds one; the fencing token)
    runs: int = 0  # attempts that finished (done or error)
    worker: str | None = None
    lease_until: float | None = None
    not_before: float | None = None
    queued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    lost: int = 0  # claims of this generation whose lease ran out (their worker died or stalled)

    @property
    def failures(self) -> int:
        """Claims that were the handler's to fail: the current one and those that raised, not those whose worker was lost."""
        return self.attempts - self.lost

    @classmethod
    def from_row(cls, row: JobColumns) -> Job:
        return cls(*row)

    @property
    def key(self) -> str:
        """The same for every attempt at this job: what its writes are keyed by."""
        return uuid.uuid5(_KEY_NAMESPACE, f"{self.trace_id}/{self.generation}").hex

    def as_dict(self) -> dict[str, str | int | float | None]:
        return asdict(self)


@runtime_checkable
class JobStore(Protocol):
    """The job half of a store (both `SQLiteStore` and `PostgresStore` have it)."""

    def submit_job(self, trace_id: str, *, hold: bool = False, again: bool = False, max_queued: int | None = None, drop_reason: str | None = None) -> Job: ...
    def claim_job(self, worker: str, *, lease: float, max_attempts: int) -> Job | None: ...
    def renew_job(self, job: Job, *, lease: float) -> bool: ...
    def finish_job(self, job: Job, *, error: str | None = None, retry_in: float | None = None) -> bool: ...
    def get_job(self, trace_id: str) -> Job | None: ...
    def job_counts(self) -> dict[str, int]: ...


_current: ContextVar[Job | None] = ContextVar("faultlens_current_job", default=None)


def current_job() -> Job | None:
    """The job the calling handler is running (None outside a queue worker)."""
    return _current.get()


@contextmanager
def running(job: Job) -> Iterator[Job]:
    token = _current.set(job)
    try:
        yield job
    finally:
        _current.reset(token)


def worker_name(prefix: str = "worker") -> str:
    return f"{prefix}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class JobQueue:
    """Worker threads that claim jobs from `store` and run `handler(job)` on each.

    handler: called with the claimed `Job` (also visible as `current_job()`);
        None makes a queue that only records jobs (`submit` marks them dropped).
    workers: threads in this process (0: only submit; other processes attribute).
    lease: seconds a claim lasts without a heartbeat; a heartbeat renews it
        every lease/3 while the handler runs.
    max_attempts: handler failures per job before it is marked error (and, apart, lost leases).
    poll: seconds an idle worker sleeps before looking again (a local
        `submit` wakes it at once).
    max_queued: `submit` drops a job when this many are already queued.
    after: called with (job, seconds it started at) after each handler success.
    """

    def __init__(
        self,
        store: JobStore,
        handler: Callable[[Job], object] | None,
        *,
        workers: int = 1,
        lease: float = 60.0,
        max_attempts: int = 3,
        poll: float = 0.5,
        max_queued: int | None = None,
        retry_backoff: float = 1.0,
        after: Callable[[Job, float], object] | None = None,
        name: str = "faultlens-worker",
        no_handler: str = "no handler: nothing attributes failed runs here",
    ):
        if workers < 0:
            raise ValueError(f"workers must be 0 or more, not {workers}")
        if lease <= 0:
            raise ValueError(f"lease must be positive, not {lease}")
        self.store = store
        self.handler = handler
        self.workers = workers
        self.lease = lease
        self.max_attempts = max_attempts
        self.poll = poll
        self.max_queued = max_queued
        self.retry_backoff = retry_backoff
        self.after = after
        self.name = name
        self.no_handler = no_handler
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._counts_lock = threading.Lock()
        self.processed = 0
        self.failed = 0
        self.dropped = 0

    @property
    def enabled(self) -> bool:
        return self.handler is not None

    # -- producing --------------------------------------------------------
    def submit(self, trace_id: str, *, again: bool = False) -> Job:
        """Queue a failed run. A run already queued, running or finished is not queued
        twice; with `again`, a finished one is (a new generation: a new attribution)."""
        reason = None if self.enabled else self.no_handler
        job = self.store.submit_job(trace_id, again=again, max_queued=self.max_queued, drop_reason=reason)
        if job.state == "dropped":
            with self._counts_lock:
                self.dropped += 1
        else:
            self._wake.set()
        return job

    def hold(self, trace_id: str) -> Job:
        """Mark a failed run as waiting for its spans; `submit` it when they arrive."""
        return self.store.submit_job(trace_id, hold=True)

    def status(self, trace_id: str) -> Job | None:
        return self.store.get_job(trace_id)

    def counts(self) -> dict[str, int]:
        return self.store.job_counts()

    def wait_idle(self, timeout: float | None = 30.0, interval: float = 0.02) -> bool:
        """Block until no job is queued or running (in any process). False if `timeout` ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            counts = self.store.job_counts()
            if not any(counts.get(state, 0) for state in ACTIVE):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    # -- consuming --------------------------------------------------------
    def start(self) -> None:
        if not self.enabled or self._threads:
            return
        self._stopping.clear()
        for n in range(self.workers):
            label = self.name if self.workers == 1 else f"{self.name}-{n}"
            thread = threading.Thread(target=self._loop, args=(worker_name(label),), name=label, daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def alive(self) -> int:
        return sum(t.is_alive() for t in self._threads)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming; a job in hand is finished first. Queued jobs stay in the store for the next worker."""
        self._stopping.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def run_one(self, worker: str) -> Job | None:
        """Claim and run one job, if there is one. Returns it (finished) or None."""
        job = self.store.claim_job(worker, lease=self.lease, max_attempts=self.max_attempts)
        if job is None:
            return None
        assert self.handler is not None
        beat = threading.Event()
        heart = threading.Thread(target=self._heartbeat, args=(job, beat), name=f"{worker}-lease", daemon=True)
        heart.start()
        started = time.time()
        try:
            with running(job):
                self.handler(job)
                if self.after is not None:
                    self.after(job, started)
        except Exception as exc:  # the worker must outlive one bad run; the error is kept on the job
            beat.set()
            heart.join()
            # (an exception's text may quote a key, e.g. a provider's answer to a bad one)
            log.error("job %s (trace %s, attempt %d) failed: %s\n%s", job.key, job.trace_id, job.attempts, redact_text(str(exc)), redact_text(traceback.format_exc()))
            final = job.failures >= self.max_attempts
            with self._counts_lock:
                self.failed += 1
            self.store.finish_job(
                job, error=f"{type(exc).__name__}: {exc}",
                retry_in=None if final else self.retry_backoff * 2 ** (job.failures - 1),
            )
            return job
        beat.set()
        heart.join()
        with self._counts_lock:  # counted before the row says done, so whoever sees `done` sees the count
            self.processed += 1
        if not self.store.finish_job(job):
            # Our lease ran out and another worker holds the job now; what we
            # wrote is keyed by job.key, so its run overwrites ours, not adds to it.
            log.warning("job %s (trace %s): lease lost before it finished", job.key, job.trace_id)
        return job

    def _heartbeat(self, job: Job, done: threading.Event) -> None:
        while not done.wait(self.lease / 3):
            try:
                if not self.store.renew_job(job, lease=self.lease):
                    log.warning("job %s (trace %s): lease lost; another worker may run it", job.key, job.trace_id)
                    return
            except Exception:  # a failed renewal is retried at the next beat
                log.exception("job %s: could not renew the lease", job.key)

    def _loop(self, worker: str) -> None:
        while not self._stopping.is_set():
            try:
                job = self.run_one(worker)
            except Exception:  # the store is unreachable for a moment: back off and try again
                log.exception("%s could not claim a job", worker)
                job = None
                self._stopping.wait(self.poll)
            if job is None:
                self._wake.wait(self.poll)
                self._wake.clear()


def next_submission(
    current: Job | None,
    trace_id: str,
    now: float,
    *,
    hold: bool,
    queued: int,
    max_queued: int | None,
    drop_reason: str | None,
    again: bool = False,
) -> Job | None:
    """The row `submit_job` writes (None: leave `current` as it is). Both stores share this rule.

    A run is queued once: a finished job (done or error) is queued again only
    when asked to (`again`), as a new generation."""
    if current is not None and (current.state in ACTIVE or (hold and current.state == "waiting")):
        return None
    finished = current is not None and current.state in ("done", "error")
    if finished and not again:
        return None
    job = Job(
        trace_id=trace_id,
        state="waiting" if hold else "queued",
        generation=(current.generation + int(finished)) if current is not None else 1,
        runs=current.runs if current is not None else 0,
        queued_at=now,
        not_before=now,
    )
    if drop_reason is not None and not hold:
        job.state, job.error = "dropped", drop_reason
    elif not hold and max_queued is not None and queued >= max_queued:
        job.state, job.error = "dropped", f"queue full ({queued} waiting); record the outcome again later"
    if job.state == "dropped" and current is not None:
        job.generation = current.generation
    return job


def job_row(job: Job) -> dict[str, object]:
    return {column: getattr(job, column) for column in JOB_COLUMNS}
