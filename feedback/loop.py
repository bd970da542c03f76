"""The live feedback loop: a failed run becomes lessons, off the agent's thread.

    loop = FeedbackLoop(tracer, "blend", LessonMemory(store))   # offline defaults
    ...                                   # agents run under the tracer, with lessons (feedback.hooks)
    loop.record_outcome(trace_id, Outcome(success=False, detail="..."))
    loop.wait()                           # in tests and scripts: let the worker finish

When a run's outcome is recorded:

1. in the caller's thread, the outcome is saved and credited to the lessons the
   run was shown (`Step.lessons` → `helped`/`failed`, which may retire a lesson);
2. if the run failed, it becomes a job in the store's failed-run queue
   (`middleware.store.jobs`, the same queue `faultlens serve` and `faultlens worker`
   use). A worker thread claims it, attributes the trace (`attributor`,
   default ``blend``, `attributors.registry.DEFAULT_METHOD`), saves the attribution, reflects (`reflector`,
   default `OfflineReflector`) and adds the lessons to memory (merging
   near-duplicates). A job is retried if it raises, and claimed again if its
   worker died; the attribution and lessons of one job are keyed by the job
   (`Job.key`), so a second attempt replaces what a first one wrote.

`attribute_and_reflect(store, trace_id, attributor, reflector)` is step 2 on its
own, synchronously, for callers with their own scheduling (the HTTP server).

A person's label of a run (`faultlens traces label`, the run page's form)
overrules the attributor: `learn_from_label` retires the run's lessons drawn
from another step and, unless a kept lesson already names the labelled step,
reflects on the label instead.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from faultlens.attributors import Attributor, build
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Lesson, Outcome
from faultlens.middleware.store.jobs import Job, JobQueue, current_job
from faultlens.middleware.store import Store

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
    retired: list[Lesson] = field(default_factory=list)  # lessons a label overruled (`learn_from_label`)

    @property
    def attributions(self) -> list[Attribution]:
        """As `Saved.attributions` (what the server exports, `server.failed_runs.HoldsAttributions`)."""
        return [] if self.attribution is None else [self.attribution]


class Saved(NamedTuple):
    """What attributing and reflecting on one failed run stored: the attribution (None if there was no
    attributor) and the lessons, as stored. Unpacks as `attribution, lessons = ...`."""

    attribution: Attribution | None
    lessons: list[Lesson]

    @property
    def attributions(self) -> list[Attribution]:
        return [] if self.attribution is None else [self.attribution]


def resolve_attributor(attributor: str | Attributor | None, model: str | None = None, **options: Any) -> Attributor | None:
    """An attributor object from a method name (built by `attributors.build` with `model` and
    `options`), an object (used as it is), or None (no attribution)."""
    if attributor is None or not isinstance(attributor, str):
        return attributor
    return build(attributor, model, **options)


def _attribute(attributor: Attributor, trace) -> Attribution:
    try:
        return attributor.attribute(attributor_view(trace))  # never the gold label or an answer key the trace keeps
    except Exception as exc:  # reported as an attribution with status error, never hidden
        return Attribution(trace_id=trace.id, method=getattr(attributor, "name", type(attributor).__name__),
                           status=AttributionStatus.error, error=f"{type(exc).__name__}: {exc}")


def _stored(memory: BaseLessonMemory, lesson: Lesson) -> Lesson:
    """Add a lesson to memory unless an earlier attempt at the same job already stored it (same id)."""
    try:
        return memory.get(lesson.id)
    except KeyError:
        return memory.add(lesson)


def reflect_on(
    store: Store,
    trace_id: str,
    attributor: Attributor | None,
    reflector: Reflector,
    memory: BaseLessonMemory | None = None,
    *,
    min_confidence: float | None = None,
    key: str | None = None,
) -> LoopResult:
    """Attribute one stored failed run, save the attribution, reflect, and add the lessons to memory.

    With `min_confidence`, an attribution that states a lower confidence is
    saved but not reflected on (status ``skipped``): a guess is not a lesson.
    With `key` (a queue job's `Job.key`; by default the job this runs in, if
    any), the attribution gets id `key` and the lessons ids derived from it,
    so running the same job twice stores one attribution and one set of lessons.
    """
    started = time.perf_counter()
    if key is None and (job := current_job()) is not None and job.trace_id == trace_id:
        key = job.key
    trace = store.get_trace(trace_id)
    attribution = None
    if attributor is not None:
        attribution = _attribute(attributor, trace)
        if key is not None:
            attribution = attribution.model_copy(update={"id": key})
        store.save_attribution(attribution)
    confidence = attribution.confidence if attribution is not None else None
    if min_confidence is not None and confidence is not None and confidence < min_confidence:
        reflection = Reflection(status="skipped", method=getattr(reflector, "method", "?"),
                                error=f"attribution confidence {confidence:.2f} is below min_confidence {min_confidence:.2f}")
    else:
        reflection = reflector.reflect(trace, attribution)
    memory = memory if memory is not None else LessonMemory(store)
    new = reflection.lessons
    if key is not None:
        new = [l.model_copy(update={"id": uuid.uuid5(uuid.UUID(key), str(n)).hex}) for n, l in enumerate(new)]
    lessons = [_stored(memory, l) for l in new]
    error = reflection.error if reflection.status != "ok" else None
    return LoopResult(trace_id, attribution, reflection, lessons, error, time.perf_counter() - started)


def attribute_and_reflect(
    store: Store,
    trace_id: str,
    attributor: str | Attributor | None = DEFAULT_METHOD,
    reflector: str | Reflector | None = None,
    memory: BaseLessonMemory | None = None,
) -> Saved:
    """Attribute, reflect and store, synchronously. Returns what it stored: the attribution and the lessons.

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
    return Saved(result.attribution, result.lessons)


LABEL_METHOD = "label"  # the `method` of an attribution that is a person's label, not an attributor's verdict


def learn_from_label(store: Store, trace_id: str, reflector: str | Reflector | None = None,
                     memory: BaseLessonMemory | None = None) -> LoopResult:
    """Lessons from a person's label of a failed run, which overrules the attributor's verdict.

    The run's active lessons drawn from another step are retired, so agents are not kept being told what a person
    found wrong; a lesson that near-duplicates of other runs were merged into stays (those runs back it). If no
    kept lesson names the labelled step, the label is saved as an attribution (method `label`, confidence 1) and
    reflected on. Raises `FaultlensError` if the run has no label."""
    started = time.perf_counter()
    trace = store.get_trace(trace_id)
    gold = trace.gold
    if gold is None:
        raise FaultlensError(f"run {trace.id} has no label; label it first (`faultlens traces label {trace.id} --step N`)")
    memory = memory if memory is not None else LessonMemory(store)
    kept, retired = [], []
    for lesson in memory.lessons(include_retired=False):
        if lesson.trace_id != trace.id or lesson.step is None:
            continue
        if lesson.step == gold.step:
            kept.append(lesson)
        elif lesson.merged == 0:
            retired.append(memory.retire(lesson.id))
    if kept:
        return LoopResult(trace.id, None, None, kept, None, time.perf_counter() - started, retired)
    attribution = Attribution(trace_id=trace.id, method=LABEL_METHOD, agent=gold.agent, step=gold.step, mode=gold.mode,
                              reason=gold.reason or "labelled by a person", confidence=1.0)
    store.save_attribution(attribution)
    reflector = reflector if isinstance(reflector, Reflector) else get_reflector(reflector)
    reflection = reflector.reflect(trace, attribution)
    lessons = [_stored(memory, lesson) for lesson in reflection.lessons]
    error = reflection.error if reflection.status != "ok" else None
    return LoopResult(trace.id, attribution, reflection, lessons, error, time.perf_counter() - started, retired)


class FeedbackLoop:
    """Attribute failed runs in the background, reflect, and keep the lessons.

    tracer: the faultlens tracer the agents run under (its `store` is used) or
        None with `store=` given.
    attributor: a name for `attributors.get` (default ``blend``, offline: `DEFAULT_METHOD`),
        an attributor object, or None to reflect on the outcome alone.
    memory: where lessons go (default: `LessonMemory` over the store).
    reflector: a `Reflector` or a `get_reflector` spec (default: offline).
    model: passed to the attributor as `model=` when it is given by name.
    min_confidence: learn only from attributions at least this confident
        (those that state no confidence always count); default: learn from all.
    workers: threads attributing queued runs; lease: seconds a claimed job is
        held without a heartbeat (see `middleware.store.jobs.JobQueue`).
    """

    def __init__(
        self,
        tracer: Any = None,
        attributor: str | Attributor | None = DEFAULT_METHOD,
        memory: BaseLessonMemory | None = None,
        reflector: str | Reflector | None = None,
        *,
        store: Store | None = None,
        model: str | None = None,
        attributor_options: dict[str, Any] | None = None,
        min_confidence: float | None = None,
        workers: int = 1,
        lease: float = 60.0,
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
        # The one failed-run queue, in the store: a `faultlens serve` or
        # `faultlens worker` on the same store shares it with this loop.
        self.queue = JobQueue(store, self._handle, workers=workers, lease=lease, poll=0.05, name="faultlens-feedback")
        self._results_lock = threading.Lock()
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
            self.submit(trace_id, again=False)
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
    def submit(self, trace_id: str, *, again: bool = True) -> Job:
        """Queue a stored failed run for attribution and reflection (again, if it was handled before;
        outcomes the loop sees queue a run once: `again=False`)."""
        if self._closed:
            raise RuntimeError("this FeedbackLoop is closed")
        self.queue.start()
        return self.queue.submit(trace_id, again=again)

    def _handle(self, job: Job) -> None:
        try:
            result = reflect_on(self.store, job.trace_id, self.attributor, self.reflector, self.memory,
                                min_confidence=self.min_confidence, key=job.key)
        except Exception as exc:  # recorded here once the queue gives up on it; the queue retries before that
            log.exception("feedback loop failed on trace %s", job.trace_id)
            if job.failures >= self.queue.max_attempts:
                with self._results_lock:
                    self.results.append(LoopResult(job.trace_id, None, None, error=f"{type(exc).__name__}: {exc}"))
            raise
        with self._results_lock:
            self.results.append(result)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no run is queued or being handled. False if `timeout` (seconds) ran out first."""
        return self.queue.wait_idle(timeout)

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
        if self.queue.alive:
            self.queue.wait_idle(None)
            self.queue.stop()

    def __enter__(self) -> FeedbackLoop:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
