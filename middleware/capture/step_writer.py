"""The gateway's steps into the store, on a thread of their own: a slow or down store never holds up a call."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from ..model.trace import AgentInfo, Step, Trace

log = logging.getLogger("faultlens.middleware.capture.live_gateway")


@dataclass
class PendingWrite:
    run_id: str
    header: Trace  # the run's header, written if the store has no such run yet
    step: Step
    new_agent: bool


# DB-API 2 (PEP 249) errors about the statement or its values, named as both sqlite3 and psycopg name them:
# the same write fails the same way however often it is tried. (OperationalError, InterfaceError and
# the rest are the database's state: a lost connection, a lock, a restart; those pass.)
_REFUSED_FOR_GOOD = frozenset({"DataError", "IntegrityError", "ProgrammingError", "NotSupportedError"})

Outcome = Literal["recorded", "rejected", "abandoned"]


def refused_for_good(exc: BaseException) -> bool:
    """Whether a failed write fails on its data (retrying it can never succeed), not on the store being out of reach."""
    if isinstance(exc, (ValueError, TypeError, OverflowError)):  # UnicodeEncodeError, pydantic's ValidationError, an int too big
        return True
    return any(cls.__name__ in _REFUSED_FOR_GOOD for cls in type(exc).__mro__)


class StepWriter:
    """Writes the gateway's steps to the store on its own thread, so a slow or down store never holds up a call.

    A write that fails is retried (backing off up to `max_wait` seconds)
    while the steps behind it wait; at most `max_pending` steps wait, and a
    step beyond that is dropped (the oldest first) and counted. A step the
    store refuses on its data (`refused_for_good`: a lone surrogate, a value
    out of range) is no outage: it is dropped at once, counted as `rejected`
    (and in `dropped`), and the steps behind it go on.

    on_stored(run_id) is called after each step is stored (the server wakes
    the run's attribution job that waited for its steps); if it raises, the
    step is written again, which replaces it.
    """

    def __init__(self, store: Any, *, max_pending: int = 10_000, max_wait: float = 2.0,
                 on_stored: Callable[[str], Any] | None = None):
        self.store = store
        self.max_pending = max_pending
        self.max_wait = max_wait
        self.on_stored = on_stored
        self.recorded = 0
        self.dropped = 0
        self.rejected = 0
        self.store_errors = 0
        self.last_error: str | None = None
        self._pending: deque[PendingWrite] = deque()
        self._known: set[str] = set()  # runs this writer has seen in the store (header written or found)
        self._agents: dict[str, list[str]] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def submit(self, write: PendingWrite) -> None:
        with self._cond:
            if len(self._pending) >= self.max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append(write)
            self._cond.notify_all()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="faultlens-gateway-writer", daemon=True)
                self._thread.start()

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._pending)  # the step being written is still the first of them

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    return
                write = self._pending[0]
                self._busy = True
            outcome = self._write_with_retries(write)
            with self._cond:
                if self._pending and self._pending[0] is write:
                    self._pending.popleft()
                    if outcome == "recorded":
                        self.recorded += 1
                    else:
                        self.dropped += 1
                        if outcome == "rejected":
                            self.rejected += 1
                self._busy = False
                self._cond.notify_all()

    def _failed(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        with self._cond:
            self.store_errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}" if exc else "unknown"
        log.warning("gateway: the store refused a step (%s); retrying", self.last_error)

    def _write_with_retries(self, write: PendingWrite) -> Outcome:
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: not refused_for_good(exc)),
            wait=wait_exponential(multiplier=0.05, max=self.max_wait),
            stop=lambda _state: self._stopping,
            after=self._failed,
            reraise=False,
            retry_error_callback=lambda _state: False,
        )
        try:
            return "recorded" if retrying(self._write, write) else "abandoned"
        except Exception as exc:  # not retried: refused for good (tenacity re-raises what it does not retry)
            self._rejected(write, exc)
            return "rejected"

    def _rejected(self, write: PendingWrite, exc: Exception) -> None:
        with self._cond:
            self.last_error = f"{type(exc).__name__}: {exc}"
        # Looked up afresh next time: the run may be what was refused (its header, or it was deleted meanwhile).
        self._known.discard(write.run_id)
        log.warning("gateway: the store refused a step of run %s for good (%s); dropped", write.run_id, self.last_error)

    def _write(self, write: PendingWrite) -> bool:
        store, run_id = self.store, write.run_id
        if run_id not in self._known:
            # Only where no run is stored: a header written over one would erase an outcome posted before this first step.
            if not store.begin_trace_if_absent(write.header):
                store.fill_run_query(run_id, write.header.task.query)
            self._known.add(run_id)
        agents = self._agents.setdefault(run_id, [])
        if write.step.agent not in agents:
            agents.append(write.step.agent)
        store.add_steps(run_id, [write.step])
        if write.new_agent and len(agents) > 1:
            # The run's header names its agents (a trace read back lists every step's agent either way).
            store.set_run_agents(run_id, [AgentInfo(name=a) for a in agents])
        if self.on_stored is not None:
            self.on_stored(run_id)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted step is written or dropped; False if `timeout` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting up to `timeout`), then stop; steps still waiting are dropped and counted."""
        self.flush(timeout)
        with self._cond:
            self._stopping = True
            self.dropped += len(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)


# -- the gateway ----------------------------------------------------------------
