"""The server's side of the failed-run queue (`middleware.store.jobs`): failed runs become job rows in the store.

`on_failure(trace_id)` is whatever the caller injected (in `faultlens serve`:
attribution, then reflection). It runs on `workers` threads of this process,
and on any `faultlens worker` process using the same store, so a slow model
call never holds up ingest. The queue is bounded: a run that does not fit
is marked `dropped` and can be queued again later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from faultlens.middleware.model.trace import Attribution
from faultlens.middleware.store.jobs import Job, JobQueue, JobStore
from faultlens.middleware.store import open_store
from .api_models import JobOut


@runtime_checkable
class HoldsAttributions(Protocol):
    """What an `on_failure` saved, as the server reads it: its attributions (`feedback.loop.Saved` and
    `feedback.LoopResult` have this shape; the server does not import the feedback loop to say so)."""

    @property
    def attributions(self) -> Sequence[Attribution]: ...


# What on_failure(trace_id) returns: what it saved (`feedback.loop.Saved`), one Attribution, a list of them, or None.
FailureResult = HoldsAttributions | Attribution | Sequence[Attribution] | None
OnFailure = Callable[[str], FailureResult]
# after(trace_id, what on_failure returned): e.g. `interop.exporting`; what it returns is not used.
AfterFailure = Callable[[str, FailureResult], object]


@dataclass
class JobStatus:
    trace_id: str
    state: str  # waiting (for spans), queued, running, done, error, dropped
    queued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    runs: int = 0
    attempts: int = 0
    worker: str | None = None

    @classmethod
    def of(cls, job: Job) -> JobStatus:
        return cls(job.trace_id, job.state, job.queued_at, job.started_at, job.finished_at, job.error, job.runs, job.attempts, job.worker)

    def as_dict(self) -> dict[str, str | float | int | None]:
        return asdict(self)

    def out(self) -> JobOut:
        """As the API answers it."""
        return JobOut.model_validate(self.as_dict())


def _then(on_failure: OnFailure, after: AfterFailure | None) -> Callable[[Job], FailureResult]:
    """A queue handler: `on_failure(trace_id)`, then `after(trace_id, what it returned)`."""

    def handle(job: Job) -> FailureResult:
        saved = on_failure(job.trace_id)
        if after is not None:
            after(job.trace_id, saved)
        return saved

    return handle


class FailureWorker:
    """`on_failure` over the store's job queue, on `workers` threads of this process.

    store: where the jobs live (default: a private in-memory store, for tests).
    workers: threads here; 0 only queues (separate `faultlens worker` processes attribute).
    `after` (optional) runs after each successful `on_failure`, in the same
    job, with the trace id and what `on_failure` returned (the server exports
    the attributions it saved over OTLP: `interop.exporting`).
    """

    def __init__(
        self,
        on_failure: OnFailure | None,
        *,
        store: JobStore | None = None,
        max_queue: int = 1000,
        after: AfterFailure | None = None,
        workers: int = 1,
        lease: float = 60.0,
        poll: float = 0.5,
    ):
        self.on_failure = on_failure
        self.max_queue = max_queue
        self.queue = JobQueue(
            store if store is not None else open_store(":memory:"),
            None if on_failure is None else _then(on_failure, after),
            workers=workers,
            lease=lease,
            poll=poll,
            max_queued=max_queue,
            no_handler="no on_failure configured: the server only stores",
        )

    @property
    def enabled(self) -> bool:
        return self.queue.enabled

    @property
    def processed(self) -> int:
        return self.queue.processed

    @property
    def failed(self) -> int:
        return self.queue.failed

    @property
    def dropped(self) -> int:
        return self.queue.dropped

    def start(self) -> None:
        self.queue.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.queue.stop(timeout)

    def submit(self, trace_id: str, *, again: bool = False) -> JobStatus:
        """Queue a trace; one already queued, running or attributed is not queued twice (unless `again`)."""
        return JobStatus.of(self.queue.submit(trace_id, again=again))

    def hold(self, trace_id: str) -> JobStatus:
        """Mark a failed run as waiting for its spans; `submit` it when they arrive."""
        return JobStatus.of(self.queue.hold(trace_id))

    def status(self, trace_id: str) -> JobStatus | None:
        job = self.queue.status(trace_id)
        return None if job is None else JobStatus.of(job)

    def summary(self) -> dict[str, bool | int | dict[str, int]]:
        """The queue's counts across processes and this process's counters (`api_models.WorkerOut`)."""
        states = self.queue.counts()
        return {
            "enabled": self.enabled,
            "running": self.queue.alive > 0,
            "workers": self.queue.workers if self.enabled else 0,
            "queued": states.get("queued", 0),
            "max_queue": self.max_queue,
            "processed": self.processed,
            "failed": self.failed,
            "dropped": self.dropped,
            "states": states,
        }

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is queued or running (for tests and shutdown)."""
        return self.queue.wait_idle(timeout)
