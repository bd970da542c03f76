"""The live feedback loop: a failed run becomes lessons, off the agent's thread.

    loop = FeedbackLoop(tracer, "heuristic", LessonMemory(store))   # offline defaults
    ...                                   # agents run under the tracer, with lessons (feedback.hooks)
    loop.record_outcome(trace_id, Outcome(success=False, detail="..."))
    loop.wait()                           # in tests and scripts: let the worker finish

When a run's outcome is recorded:

1. in the caller's thread, the outcome is saved and credited to the lessons the
   run was shown (`Step.lessons` → `helped`/`failed`, which may retire a lesson);
2. if the run failed, its id goes on a queue. A worker thread takes it,
   attributes the trace (`attributor`, default ``heuristic``), saves the
   attribution, reflects (`reflector`, default `OfflineReflector`) and adds the
   lessons to memory (merging near-duplicates).

`attribute_and_reflect(store, trace_id, attributor, reflector)` is step 2 on its
own, synchronously, for callers with their own scheduling (the HTTP server).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from faultlens.attributors import Attributor, build
from faultlens.middleware.model import Attribution, AttributionStatus, Lesson, Outcome
from faultlens.middleware.store import SQLiteStore

from .hooks import record_trace_outcome
from .memory import BaseLessonMemory, LessonMemory
from .reflect import Reflection, Reflector, get_reflector

log = logging.getLogger(__name__)


@dataclass
class LoopResult:
    """What the loop did with one failed run."""

    trace_id: str
    attribution: Attribution | None
    reflection: Reflection | None
    lessons: list[Lesson] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


def resolve_attributor(attributor: str | Attributor | None, model: str | None = None, **options: Any) -> Attributor | None:
    """An attributor object from a method name (built by `attributors.build` with `model` and
    `options`), an object (used as it is), or None (no attribution)."""
    if attributor is None or not isinstance(attributor, str):
        return attributor
    return build(attributor, model, **options)


def _attribute(attributor: Attributor, trace) -> Attribution:
    try:
        return attributor.attribute(trace)
    except Exception as exc:  # reported as an attribution with status error, never hidden
        return Attribution(trace_id=trace.id, method=getattr(attributor, "name", type(attributor).__name__),
                           status=AttributionStatus.error, error=f"{type(exc).__name__}: {exc}")


def reflect_on(
    store: SQLiteStore,
    trace_id: str,
    attributor: Attributor | None,
    reflector: Reflector,
    memory: BaseLessonMemory | None = None,
    *,
    min_confidence: float | None = None,
) -> LoopResult:
    """Attribute one stored failed run, save the attribution, reflect, and add the lessons to memory.

    With `min_confidence`, an attribution that states a lower confidence is
    saved but not reflected on (status ``skipped``): a guess is not a lesson.
    """
    started = time.perf_counter()
    trace = store.get_trace(trace_id)
    attribution = None
    if attributor is not None:
        attribution = _attribute(attributor, trace)
        store.save_attribution(attribution)
    confidence = attribution.confidence if attribution is not None else None
    if min_confidence is not None and confidence is not None and confidence < min_confidence:
        reflection = Reflection(status="skipped", method=getattr(reflector, "method", "?"),
                                error=f"attribution confidence {confidence:.2f} is below min_confidence {min_confidence:.2f}")
    else:
        reflection = reflector.reflect(trace, attribution)
    memory = memory if memory is not None else LessonMemory(store)
    lessons = memory.add_all(reflection.lessons)
    error = reflection.error if reflection.status != "ok" else None
    return LoopResult(trace_id, attribution, reflection, lessons, error, time.perf_counter() - started)


def attribute_and_reflect(
    store: SQLiteStore,
    trace_id: str,
    attributor: str | Attributor | None = "heuristic",
    reflector: str | Reflector | None = None,
    memory: BaseLessonMemory | None = None,
) -> tuple[Attribution | None, list[Lesson]]:
    """Attribute, reflect and store, synchronously. Returns the attribution and the lessons as stored.

    `reflector` is a `Reflector`, or a spec for `get_reflector` (``offline``,
    ``terminal`` or a litellm model). An attribution that failed or a reflection
    that could not be parsed gives no lessons; the attribution (with its status)
    is saved either way.
    """
    result = reflect_on(
        store,
        trace_id,
        resolve_attributor(attributor),
        reflector if isinstance(reflector, Reflector) else get_reflector(reflector),
        memory,
    )
    return result.attribution, result.lessons


class FeedbackLoop:
    """Attribute failed runs in the background, reflect, and keep the lessons.

    tracer: the faultlens tracer the agents run under (its `store` is used) or
        None with `store=` given.
    attributor: a name for `attributors.get` (default ``heuristic``, offline),
        an attributor object, or None to reflect on the outcome alone.
    memory: where lessons go (default: `LessonMemory` over the store).
    reflector: a `Reflector` or a `get_reflector` spec (default: offline).
    model: passed to the attributor as `model=` when it is given by name.
    min_confidence: learn only from attributions at least this confident
        (those that state no confidence always count); default: learn from all.
    """

    def __init__(
        self,
        tracer: Any = None,
        attributor: str | Attributor | None = "heuristic",
        memory: BaseLessonMemory | None = None,
        reflector: str | Reflector | None = None,
        *,
        store: SQLiteStore | None = None,
        model: str | None = None,
        attributor_options: dict[str, Any] | None = None,
        min_confidence: float | None = None,
    ):
        self.tracer = tracer
        store = store if store is not None else getattr(tracer, "store", None)
        if store is None and isinstance(memory, LessonMemory):
            store = memory.store
        if store is None:
            raise ValueError("FeedbackLoop needs a store: pass a tracer with a .store, store=, or a LessonMemory")
        self.store = store
        options = dict(attributor_options or {})
        if model is not None and isinstance(attributor, str):
            options["model"] = model
        self.attributor = resolve_attributor(attributor, **options)
        self.memory = memory if memory is not None else LessonMemory(store)
        self.reflector: Reflector = reflector if isinstance(reflector, Reflector) else get_reflector(reflector)
        self.min_confidence = min_confidence
        self.results: list[LoopResult] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._results_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False
        if tracer is not None:
            # Every run of the tracer that ends with an outcome is handled, whether or not it went through `run`.
            tracer.on_run_end(self._run_ended)

    def _run_ended(self, run: Any) -> None:
        if run.outcome is not None and not self._closed:
            self.on_outcome(run.id, run.outcome)

    # -- outcomes -------------------------------------------------------------
    def record_outcome(self, trace_id: str, outcome: Outcome | bool, *, detail: str | None = None) -> list[Lesson]:
        """Save a run's outcome and handle it (`on_outcome`). `outcome` may be a bare success flag."""
        if isinstance(outcome, bool):
            outcome = Outcome(success=outcome, detail=detail)
        self.store.set_outcome(trace_id, outcome)
        return self.on_outcome(trace_id, outcome)

    def on_outcome(self, trace_id: str, outcome: Outcome) -> list[Lesson]:
        """Handle an outcome already saved: credit the lessons shown; queue a failure for attribution.

        Returns the lessons whose counters changed. A loop built with a tracer
        calls it for every run of that tracer (`Tracer.on_run_end`); otherwise
        call it yourself, or use `record_outcome`.
        """
        trace = self.store.get_trace(trace_id)
        if trace.outcome is None:
            trace = trace.model_copy(update={"outcome": outcome})
        updated = record_trace_outcome(self.memory, trace)
        if not outcome.success:
            self.submit(trace_id)
        return updated

    def run(self, task: Any, **options: Any) -> Any:
        """`tracer.run(task, ...)`: the loop handles the outcome of every run of its tracer once it has ended.

            with loop.run("How much larger ...?") as run:
                ...                                   # agents, with lessons (feedback.hooks)
                run.record_outcome(success=False)
            # the run's steps are stored; its failure is queued for attribution

        A run that raises is recorded by the tracer as failed, and handled as such.
        """
        if self.tracer is None:
            raise ValueError("FeedbackLoop.run needs the loop to be built with a tracer")
        return self.tracer.run(task, **options)

    # -- the worker -----------------------------------------------------------
    def submit(self, trace_id: str) -> None:
        """Queue a stored failed run for attribution and reflection."""
        if self._closed:
            raise RuntimeError("this FeedbackLoop is closed")
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, name="faultlens-feedback", daemon=True)
            self._worker.start()
        self._queue.put(trace_id)

    def _run(self) -> None:
        while True:
            trace_id = self._queue.get()
            try:
                if trace_id is None:
                    return
                try:
                    result = reflect_on(self.store, trace_id, self.attributor, self.reflector, self.memory,
                                        min_confidence=self.min_confidence)
                except Exception as exc:  # the worker must survive one bad trace; the failure is recorded
                    log.exception("feedback loop failed on trace %s", trace_id)
                    result = LoopResult(trace_id, None, None, error=f"{type(exc).__name__}: {exc}")
                with self._results_lock:
                    self.results.append(result)
            finally:
                self._queue.task_done()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued run is handled. False if `timeout` (seconds) ran out first."""
        if timeout is None:
            self._queue.join()
            return True
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def drain(self, timeout: float | None = None) -> list[LoopResult]:
        """Wait for the queue, then return and forget the results gathered so far."""
        self.wait(timeout)
        with self._results_lock:
            out, self.results = self.results, []
        return out

    def close(self) -> None:
        """Finish queued work and stop the worker."""
        if self._closed:
            return
        self._closed = True
        if self.tracer is not None:
            self.tracer.remove_run_listener(self._run_ended)
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()

    def __enter__(self) -> FeedbackLoop:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
