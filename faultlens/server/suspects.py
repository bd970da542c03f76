"""Suspected failures: finished runs with no outcome, scored by the failure detector; above a threshold, attributed like failed runs.

Most failed agent runs raise nothing: the agent answers, politely and wrongly.
The sweep looks, every `every` seconds, at the runs that have steps, no
outcome, no score yet, and no new step for `idle` seconds (finished). Each gets
`p_failed` from `score(trace)` (`attributors.detect`); one at or above
`threshold` is marked *suspected* and queued for attribution. A suspected run
is not a failed run: it is listed apart (`status=suspected`), its lessons'
counters are not touched, and a person confirms it (then it is a failed run,
an outcome the detector and `learned` train on) or dismisses it (a success).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from faultlens.middleware.model.trace import Trace
from faultlens.middleware.store import Store

from .failed_runs import FailureWorker

__all__ = ["SUSPECT_ABOVE", "SuspectSweep"]

# The default threshold: above the failure rate of the detector's training mix (0.85, docs/detect.md), so a
# suspected run looks more failed than the typical run it learned from, not merely like one.
SUSPECT_ABOVE = 0.9

log = logging.getLogger(__name__)

Score = Callable[[Trace], "float | None"]  # p_failed, or None when the run cannot be judged


@dataclass
class SuspectSweep:
    store: Store
    worker: FailureWorker
    score: Score
    threshold: float = SUSPECT_ABOVE
    idle: float = 60.0  # seconds without a new step before a run counts as finished
    every: float = 15.0
    scored: int = 0
    suspected: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def sweep_once(self, now: float | None = None) -> list[str]:
        """Score the finished runs with no outcome and no score; queue those at or above the threshold. Returns them."""
        now = time.time() if now is None else now
        found = []
        for summary in self.store.list_traces(status="unknown", limit=None):
            if summary.p_failed is not None or summary.n_steps == 0 or now - summary.updated_at < self.idle:
                continue
            try:
                p_failed = self.score(self.store.get_trace(summary.id))
            except Exception as exc:  # one run the detector cannot read must not stop the sweep
                log.warning("suspects: could not score run %s (%s: %s)", summary.id, type(exc).__name__, exc)
                continue
            if p_failed is None:
                continue
            suspected = p_failed >= self.threshold
            self.store.set_detection(summary.id, round(p_failed, 4), suspected)
            self.scored += 1
            if suspected:
                self.suspected += 1
                self.worker.submit(summary.id)
                found.append(summary.id)
        return found

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.sweep_once()
            except Exception:  # a store that is down: the next sweep tries again
                log.exception("suspects: the sweep failed")

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="faultlens-suspects", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
