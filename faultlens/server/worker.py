"""The background worker: failed runs wait in a bounded queue for `on_failure`.

`on_failure(trace_id)` is whatever the caller injected (in `faultlens serve`:
attribution, then reflection). It runs on one worker thread so a slow model
call never holds up ingest; the queue is bounded so a burst of failures cannot
grow memory without limit — a run that does not fit is marked `dropped` and can
be queued again later.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger("faultlens.server.worker")

OnFailure = Callable[[str], Any]


@dataclass
class JobStatus:
    trace_id: str
    state: str  # waiting (for spans), queued, running, done, error, dropped
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    runs: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FailureWorker:
    """One thread draining a bounded queue of trace ids through `on_failure`.

    `after` (optional) runs after each successful `on_failure`, with the trace
    id and the time the job started (the server uses it to export new
    attributions over OTLP).
    """

    def __init__(
        self,
        on_failure: OnFailure | None,
        *,
        max_queue: int = 1000,
        after: Callable[[str, float], Any] | None = None,
        keep_statuses: int = 10_000,
    ):
        self.on_failure = on_failure
        self.after = after
        self.max_queue = max_queue
        self.keep_statuses = keep_statuses
        self._queue: queue.Queue[str | None] = queue.Queue(maxsize=max_queue)
        # Oldest first, so a long-running server forgets the oldest finished jobs (the attributions stay in the store).
        self._status: OrderedDict[str, JobStatus] = OrderedDict()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.processed = 0
        self.failed = 0
        self.dropped = 0

    @property
    def enabled(self) -> bool:
        return self.on_failure is not None

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="faultlens-worker", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        # The sentinel waits behind queued work: stopping finishes what was accepted.
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)
        self._thread = None

    def submit(self, trace_id: str) -> JobStatus:
        """Queue a trace; a trace already waiting is not queued twice."""
        with self._lock:
            current = self._status.get(trace_id)
            if current is not None and current.state == "queued":
                return current
            if not self.enabled:
                status = JobStatus(trace_id, "dropped", error="no on_failure configured: the server only stores")
                self._status[trace_id] = status
                self._forget_old()
                return status
            status = JobStatus(trace_id, "queued", runs=current.runs if current else 0)
            try:
                self._queue.put_nowait(trace_id)
            except queue.Full:
                status.state = "dropped"
                status.error = f"queue full ({self.max_queue} waiting); record the outcome again later"
                self.dropped += 1
            self._status[trace_id] = status
            self._status.move_to_end(trace_id)
            self._forget_old()
            return status

    def _forget_old(self) -> None:
        excess = len(self._status) - self.keep_statuses
        if excess <= 0:
            return
        for trace_id in [t for t, s in self._status.items() if s.state not in ("waiting", "queued", "running")][:excess]:
            del self._status[trace_id]

    def hold(self, trace_id: str) -> JobStatus:
        """Mark a failed run as waiting for its spans; `submit` it when they arrive."""
        with self._lock:
            current = self._status.get(trace_id)
            if current is not None and current.state in ("queued", "running"):
                return current
            status = JobStatus(trace_id, "waiting", runs=current.runs if current else 0)
            self._status[trace_id] = status
            self._status.move_to_end(trace_id)
            self._forget_old()
            return status

    def status(self, trace_id: str) -> JobStatus | None:
        with self._lock:
            return self._status.get(trace_id)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            states: dict[str, int] = {}
            for s in self._status.values():
                states[s.state] = states.get(s.state, 0) + 1
        return {
            "enabled": self.enabled,
            "running": self._thread is not None and self._thread.is_alive(),
            "queued": self._queue.qsize(),
            "max_queue": self.max_queue,
            "processed": self.processed,
            "failed": self.failed,
            "dropped": self.dropped,
            "states": states,
        }

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is queued or running (for tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                busy = any(s.state in ("queued", "running") for s in self._status.values())
            if not busy:
                return True
            time.sleep(0.02)
        return False

    def _run(self) -> None:
        while True:
            trace_id = self._queue.get()
            if trace_id is None:
                return
            with self._lock:
                status = self._status[trace_id]
                status.state, status.started_at, status.error = "running", time.time(), None
                started = status.started_at
            try:
                assert self.on_failure is not None
                self.on_failure(trace_id)
                if self.after is not None:
                    self.after(trace_id, started)
            except Exception as exc:  # the worker must outlive one bad run
                log.error("on_failure(%s) failed: %s\n%s", trace_id, exc, traceback.format_exc())
                with self._lock:
                    status.state, status.error = "error", f"{type(exc).__name__}: {exc}"
                    status.finished_at = time.time()
                    status.runs += 1
                self.failed += 1
                continue
            with self._lock:
                status.state, status.finished_at = "done", time.time()
                status.runs += 1
            self.processed += 1
