"""`faultlens phoenix sync`'s loop: pull a project's spans, judge which runs failed, attribute them, write verdicts back.

    sync = PhoenixSync(phoenix, store, "default", state=SyncState.load(path, url=..., project="default"))
    summary = sync.run_once()          # one pass; `watch` repeats it

One pass:

1. **pull**: the spans added since the state's cursor, a page at a time,
   through the span mapping OTLP ingest uses (`middleware.ingest`),
   saving the cursor after each page; a span that cannot be read is left
   out and reported (`SyncSummary.skipped`), the cursor moves past it all
   the same, and a cursor Phoenix gives twice stops the pass
   (`PhoenixPagingError`);
2. **judge** the runs whose root span has arrived (`failed.FailureRule`;
   with a `p_failed` condition, the failure detector scores each run's stored
   trace and its `p_failed` is written back on the run's root spans at once,
   `faultlens.p_failed`, failed or not):
   a failed run gets a failed outcome in the store and a row in the failed-run
   job queue (`middleware.jobs`, the queue `faultlens serve` and `faultlens
   worker` use), which attributes each run once;
3. **attribute**: worker threads of this process work the queue until our
   runs are done (a `faultlens worker` on the same store may take some);
4. **write back** each attributed run's verdict as span annotations
   (`annotations`), saving the state after each run.

A Phoenix that goes down stops the pass with `PhoenixUnavailable` after the
client's retries; the state says where it stopped and the next pass goes on
from there (docs/phoenix.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.errors import InputError
from faultlens.middleware.store.jobs import JobQueue
from faultlens.middleware.model.trace import Outcome
from faultlens.middleware.ingest.plan import plan_ingest
from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.spans.traces import group_by_trace
from faultlens.middleware.spans.tree import SpanLink

from .annotations import p_failed_annotation, verdict_annotations
from .client import CursorTrail, PhoenixClient, PhoenixUnavailable
from .failed import FailureRule
from .records import span_label, span_record
from .state import SyncState

# progress(stage, done, total): stage is "spans", "attribute" or "annotate"; total None while unknown
Progress = Callable[[str, int, "int | None"], None]


@dataclass
class SkippedSpan:
    """A span of Phoenix's answer that could not be read: left out, so one bad span does not stop every sync."""

    id: str | None  # its span id (or Phoenix's id); None when it has none
    reason: str


@dataclass
class SyncSummary:
    """What one pass did (`runs_seen`: runs with spans in this pass; the rest: runs that reached that point in it)."""

    spans: int = 0
    runs_seen: int = 0
    failed: int = 0
    attributed: int = 0
    annotations: int = 0
    unattributed: int = 0
    detected: int = 0  # runs the detector scored (a `p_failed` rule)
    pending: int = 0  # failed runs whose job another worker still holds
    notes: list[str] = field(default_factory=list)
    skipped: list[SkippedSpan] = field(default_factory=list)  # malformed spans left out

    def add(self, other: SyncSummary) -> None:
        for name in ("spans", "runs_seen", "failed", "attributed", "annotations", "unattributed", "detected"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.pending = other.pending
        self.notes += other.notes
        self.skipped += other.skipped


class PhoenixSync:
    """Syncs one Phoenix project into a faultlens store and its verdicts back (see the module docstring).

    method/model/method_options/reflector: how failed runs are attributed and reflected on (as `faultlens worker`).
    workers: attribution threads in this process. page_size: spans per request.
    since/until: only spans that started in [since, until).
    recheck: judge again runs found not failed (an evaluation may annotate them later; `--watch` does).
    """

    def __init__(self, phoenix: PhoenixClient, store: Any, project: str, *, state: SyncState, rule: FailureRule | None = None,
                 method: str = DEFAULT_METHOD, model: str | None = None, method_options: dict[str, Any] | None = None,
                 reflector: str | None = None, workers: int = 1, page_size: int = 100, since: datetime | None = None,
                 until: datetime | None = None, recheck: bool = False, progress: Progress | None = None, job_timeout: float | None = None):
        self.phoenix, self.store, self.project, self.state = phoenix, store, project, state
        self.rule = rule or FailureRule()
        self.method, self.model, self.method_options, self.reflector = method, model, method_options or {}, reflector
        self.workers, self.page_size, self.since, self.until, self.recheck = workers, page_size, since, until, recheck
        self.progress = progress or (lambda stage, done, total: None)
        self.job_timeout = job_timeout
        self._handler: Callable[[str], Any] | None = None
        self._detector: Any = None

    # -- the pass -----------------------------------------------------------------
    def run_once(self) -> SyncSummary:
        summary = SyncSummary()
        self.phoenix.project(self.project)  # a wrong project fails here, before anything is stored
        seen = self.pull(summary)
        summary.runs_seen = len(seen)
        self.judge(summary)
        self.attribute(summary)
        self.write_back(summary)
        return summary

    def pull(self, summary: SyncSummary) -> set[str]:
        """Store the spans after the cursor; returns the runs they belong to."""
        state, seen = self.state, set()
        trail = CursorTrail(self.phoenix.url, "the span list", start=state.cursor or state.last_span)
        while True:
            resume_after = state.last_span if state.cursor is None else None
            page = self.phoenix.span_page(self.project, cursor=state.cursor or state.last_span, limit=self.page_size,
                                          start=self.since, end=self.until)
            # Without a next cursor Phoenix pages from the last span stored, inclusive: that one is not new.
            spans = [s for s in page.spans if resume_after is None or _global_id(s) != resume_after]
            records = self._store(self._records(spans, summary), summary)
            for run_id, group in group_by_trace(records).items():
                seen.add(run_id)
                self._note_run(run_id, group)
            if page.next_cursor is None:
                # (a skipped span with an id counts too: the next pass starts after it, not on it again)
                state.last_span = next((i for i in map(_global_id, reversed(spans)) if i), state.last_span)
            state.spans += len(records)
            summary.spans += len(records)
            try:
                state.cursor = trail.follow(page.next_cursor)
            finally:
                state.save()  # on a repeated cursor: what was stored counts, the cursor stays where paging last advanced
            self.progress("spans", summary.spans, None)
            if page.next_cursor is None:
                return seen

    def _records(self, spans: list[Any], summary: SyncSummary) -> list[SpanRecord]:
        """The page's spans as records; one that cannot be read is skipped and reported."""
        records = []
        for span in spans:
            try:
                records.append(span_record(span, source=self._source, project=self.project))
            except InputError as exc:
                summary.skipped.append(SkippedSpan(span_label(span), str(exc)))
        return records

    def _store(self, records: list[SpanRecord], summary: SyncSummary) -> list[SpanRecord]:
        """Ingest the page; if one span's attributes cannot be mapped (the batch then writes nothing), skip that one, store the rest."""
        if not records:
            return records
        try:
            ingest(self.store, records, source=self._source)
            return records
        except InputError:
            pass
        # (the rare path: each span is mapped alone to find the bad ones)
        good = []
        for record in records:
            try:
                plan_ingest([record], source=self._source)
            except InputError as exc:
                summary.skipped.append(SkippedSpan(record.span_id, str(exc)))
            else:
                good.append(record)
        if good:
            ingest(self.store, good, source=self._source)
        return good

    def _note_run(self, run_id: str, group: list[SpanRecord]) -> None:
        """Record the run's traces and root spans in the state; a new root makes it `complete` (to judge) again."""
        run = self.state.run(run_id)
        run.traces = sorted(set(run.traces) | {r.trace_id for r in group})
        for r in group:
            if r.parent_id is None:
                new_root = r.span_id not in run.roots
                run.roots[r.span_id] = r.status
                if run.phase == "open" or (new_root and run.phase in ("ok", "annotated", "unattributed")):
                    # a session's next trace: the run is judged (and, if it was, attributed) again
                    run.again = run.again or run.phase in ("annotated", "unattributed")
                    run.phase = "complete"

    @property
    def _source(self) -> str:
        return f"phoenix:{self.phoenix.url}"

    def judge(self, summary: SyncSummary) -> None:
        """Sort the runs whose root arrived into failed (outcome stored, job queued) and not failed."""
        phases = ("complete", "ok") if self.recheck else ("complete",)
        pending = {run_id: self.state.runs[run_id] for run_id in self.state.in_phase(*phases)}
        if not pending:
            return
        # A run judged ok before is rechecked for late annotations only: its trace, and so its p_failed, did not change.
        fresh = {run_id: run for run_id, run in pending.items() if run.phase == "complete"}
        p_failed = self.detect(fresh, summary) if self.rule.uses_detector and fresh else None
        verdicts = self.rule.judge(self.phoenix, self.project, pending, p_failed)
        if p_failed:
            self.write_p_failed(fresh, p_failed, summary)
        queue = self._queue()
        for run_id, run in pending.items():
            why = verdicts.get(run_id)
            if why is None:
                run.phase = "ok"
                continue
            self.store.set_outcome(run_id, Outcome(success=False, evaluator="phoenix", detail=why))
            queue.submit(run_id, again=run.again)  # a run already attributed is not queued again, unless it grew
            run.phase, run.why, run.again = "failed", why, False
            summary.failed += 1
        self.state.save()

    def detect(self, runs: dict[str, Any], summary: SyncSummary) -> dict[str, float]:
        """{run id: p_failed} of the failure detector for `runs`; a run it cannot judge gets a note saying why."""
        if self._detector is None:
            from faultlens.attributors.detect import Detector

            self._detector = Detector()
        found: dict[str, float] = {}
        for detection in self._detector.score(self.store.get_trace(run_id) for run_id in runs):
            if detection.p_failed is None:
                summary.notes.append(f"run {detection.trace_id}: no p_failed ({detection.reason})")
            else:
                found[detection.trace_id] = detection.p_failed
        summary.detected += len(found)
        return found

    def write_p_failed(self, runs: dict[str, Any], p_failed: dict[str, float], summary: SyncSummary) -> None:
        """Each scored run's `p_failed` on its root span(s), labelled by whether it met the rule's bound."""
        rule = " or ".join(str(c) for c in self.rule.conditions if c.detector)
        annotations = [p_failed_annotation(run_id, root, p, self.rule.detector_passes(p) is not None, rule)
                       for run_id, p in p_failed.items() for root in sorted(runs[run_id].roots)]
        if annotations:
            self.phoenix.annotate_spans(annotations)  # counted as `detected`: they are the run's score, not its verdict

    def _queue(self) -> JobQueue:
        if self._handler is None:
            from faultlens.wiring import failure_handler

            self._handler = failure_handler(self.store, method=self.method, model=self.model, reflector=self.reflector,
                                            method_options=self.method_options)
        handler = self._handler
        return JobQueue(self.store, lambda job: handler(job.trace_id), workers=self.workers, poll=0.1)

    def attribute(self, summary: SyncSummary) -> None:
        """Work the queue until every failed run of ours has finished its job (done or error)."""
        failed = self.state.in_phase("failed")
        if not failed:
            return
        queue = self._queue()
        for run_id in failed:
            if self.store.get_job(run_id) is None:  # (a state from before its job row was written)
                queue.submit(run_id)
        queue.start()
        deadline = None if self.job_timeout is None else time.monotonic() + self.job_timeout
        try:
            while True:
                jobs = {run_id: self.store.get_job(run_id) for run_id in failed}
                finished = [r for r, job in jobs.items() if job is not None and job.state in ("done", "error")]
                self.progress("attribute", len(finished), len(failed))
                if len(finished) == len(failed) or (deadline is not None and time.monotonic() > deadline):
                    break
                threading.Event().wait(0.1)
        finally:
            queue.stop()
        summary.pending = len(failed) - len(finished)

    def write_back(self, summary: SyncSummary) -> None:
        """Annotate each attributed run in Phoenix, saving the state after each."""
        failed = self.state.in_phase("failed")
        for done, run_id in enumerate(failed, 1):
            run = self.state.runs[run_id]
            job = self.store.get_job(run_id)
            if job is None or job.state not in ("done", "error"):
                continue
            if job.state == "error":
                run.phase, run.why = "unattributed", f"{run.why}; attribution failed: {job.error}"
                summary.unattributed += 1
                self.state.save()
                continue
            attributions = sorted(self.store.attributions(run_id), key=lambda a: a.created_at)
            trace = self.store.get_trace(run_id)
            annotations = []
            if attributions and attributions[-1].step is not None:
                attribution = attributions[-1]
                summary.attributed += 1
                root = self._root_of(run_id, trace.steps[attribution.step].span_id if 0 <= attribution.step < len(trace.steps) else None, run.roots)
                annotations = verdict_annotations(trace, attribution, root) if root else []
            if not annotations:
                run.phase = "unattributed"
                summary.unattributed += 1
                summary.notes.append(f"run {run_id}: the attribution blames no step with a span; nothing written")
            else:
                run.annotations = self.phoenix.annotate_spans(annotations)
                run.phase = "annotated"
                summary.annotations += len(run.annotations)
            self.state.save()
            self.progress("annotate", done, len(failed))

    def _root_of(self, run_id: str, span_id: str | None, roots: dict[str, str]) -> str | None:
        """The root span above `span_id` (the root of the Phoenix trace the blamed step is in)."""
        if span_id is None:
            return None
        links = {row["span_id"]: SpanLink.from_row(row) for row in self.store.span_links(run_id)}
        current, hops = span_id, 0
        while current in links and links[current].parent_id and hops < len(links):
            current, hops = links[current].parent_id or current, hops + 1
        if current in roots:
            return current
        return next(iter(sorted(roots)), None)


def _global_id(span: Any) -> str | None:
    """Phoenix's own id of a span (its paging cursor), None for a span without one."""
    value = span.get("id") if isinstance(span, dict) else None
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) else None


def watch(sync: PhoenixSync, *, interval: float, stop: threading.Event, on_pass: Callable[[SyncSummary | None, Exception | None], None]) -> SyncSummary:
    """Run passes every `interval` seconds until `stop` is set; a Phoenix that is down is waited for, not fatal."""
    total = SyncSummary()
    while not stop.is_set():
        try:
            summary = sync.run_once()
        except PhoenixUnavailable as exc:
            on_pass(None, exc)
        else:
            total.add(summary)
            on_pass(summary, None)
        stop.wait(interval)
    return total
