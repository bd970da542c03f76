"""What the routes share: the store, the failed-run worker, the ingestor and the caller's hooks.

`create_app` builds one `Services` and keeps it on `app.state.services`; the
routers reach it (and the store) through the FastAPI dependencies in `deps`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import HTTPException

from faultlens.feedback.memory import track_record
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.labels import label_for
from faultlens.middleware.model.trace import Lesson, Outcome, Trace
from faultlens.middleware.store.ids import stored_id
from faultlens.middleware.when import BadMoment, moment
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.store import Store
from .api_models import LabelOut, OutcomeOut
from .ingest import IngestResult, Ingestor
from .failed_runs import FailureWorker, JobStatus

log = logging.getLogger("faultlens.server")

LessonsFor = Callable[[str, str, int], list[Lesson]]
# What the hooks return is not used.
OnOutcome = Callable[[str, Outcome], object]
OnLabel = Callable[[str], object]


@dataclass
class Services:
    store: Store
    worker: FailureWorker
    ingestor: Ingestor
    lessons_for: LessonsFor
    on_outcome: OnOutcome | None
    on_label: OnLabel | None
    queue_root_errors: bool
    max_body_bytes: int
    token: str | None
    reports_dir: Path | None
    media_root: Path | None
    # OTLP exports being stored in worker threads (`routes_otlp`); read and written only on the event loop.
    threaded_ingests: int = field(default=0, init=False)

    def record_outcome(self, trace_id: str, outcome: Outcome) -> OutcomeOut:
        """Store a run's outcome; a failure is queued for attribution (or held until the run has steps)."""
        # Replies name runs by their stored id (hashed if it held a secret), as the pages do.
        trace_id = stored_id(trace_id)
        self.store.set_outcome(trace_id, outcome)
        # `worker` is set only for a failed run: the route answers without unset fields.
        if outcome.success:
            reply = OutcomeOut(trace_id=trace_id, success=True, queued=False)
        else:
            status = self._queue_failed(trace_id)
            reply = OutcomeOut(trace_id=trace_id, success=False, queued=status.state == "queued", worker=status.out())
        if self.on_outcome is not None:
            self.on_outcome(trace_id, outcome)
        return reply

    def _queue_failed(self, trace_id: str) -> JobStatus:
        # An agent may report its outcome before its span processor has
        # exported anything; attributing an empty run would blame nothing.
        if self.store.get_trace(trace_id).steps:
            return self.worker.submit(trace_id)
        status = self.worker.hold(trace_id)
        # A step stored since the look-up above found no job to wake; the run is not empty now.
        if self.store.get_trace(trace_id).steps:
            status = self.worker.submit(trace_id)
        return status

    def decide_suspicion(self, trace_id: str, failed: bool) -> OutcomeOut:
        """A person's decision on a suspected run: confirmed (a failed run from now on) or dismissed (a success)."""
        p_failed, suspected = self.store.detection(trace_id)
        if not suspected or self.store.get_outcome(trace_id) is not None:
            raise HTTPException(409, f"run {trace_id!r} is not a suspected run waiting for a decision")
        detail = (f"a person confirmed the detector's suspicion (p_failed {p_failed:.2f})" if failed
                  else f"a person dismissed the detector's suspicion (p_failed {p_failed:.2f})")
        return self.record_outcome(trace_id, Outcome(success=not failed, evaluator="person", detail=detail))

    def record_label(self, trace: Trace, step: int | None, *, agent: str | None = None, mode: str | None = None,
                     reason: str | None = None) -> LabelOut:
        """Store a person's label of a run (checked by `labels.label_for`: 422 naming the field), then call
        `on_label`; `step` None removes the label."""
        gold = None
        if step is not None:
            try:
                gold = label_for(trace, step, agent=agent, mode=mode, reason=reason)
            except InputError as exc:
                raise HTTPException(422, str(exc)) from None
        self.store.set_gold(trace.id, gold)
        if gold is not None and self.on_label is not None:
            self.on_label(trace.id)
        return LabelOut(trace_id=trace.id, label=gold)

    def ingest_payload(self, payload: dict[str, Any]) -> IngestResult:
        """Store an OTLP JSON export that passed `otlp_schema.validate_export`; wake the worker for runs it failed or completed."""
        return self._after_ingest(self.ingestor(payload, checked=True))

    def ingest_records(self, records: list[SpanRecord]) -> IngestResult:
        """Store the span records of a checked protobuf export (`otlp_records`); as `ingest_payload`."""
        return self._after_ingest(self.ingestor.records(records))

    def wake_waiting(self, trace_id: str) -> None:
        """Queue a failed run whose job was held for its steps: some are stored now (by ingest, or by the gateway's writer)."""
        trace_id = stored_id(trace_id)
        job = self.worker.status(trace_id)
        if job is not None and job.state == "waiting":
            self.worker.submit(trace_id)

    def _after_ingest(self, result: IngestResult) -> IngestResult:
        result.traces = [stored_id(trace_id) for trace_id in result.traces]
        result.outcomes = {stored_id(trace_id): outcome for trace_id, outcome in result.outcomes.items()}
        for trace_id in result.traces:
            self.wake_waiting(trace_id)
        for trace_id, outcome in result.outcomes.items():
            if self.queue_root_errors and not outcome.success:
                self.worker.submit(trace_id)
            if self.on_outcome is not None:
                try:
                    self.on_outcome(trace_id, outcome)
                except Exception:  # the spans are stored; failing the export would only make the client resend them
                    log.exception("on_outcome(%s) failed after ingest", trace_id)
        return result


def best_track_record_first(store: Store) -> LessonsFor:
    """Retrieval without task relevance: the agent's active lessons, best track record first."""

    def lessons_for(agent: str, task: str, k: int) -> list[Lesson]:
        return sorted(store.lessons(agent=agent), key=lambda l: (track_record(l), l.created_at), reverse=True)[:k]

    return lessons_for


def parse_since(value: str | None) -> float | None:
    """`since` (`middleware.when.moment`: 7d, 24h, ISO 8601, epoch seconds) as epoch seconds; 400 naming the forms."""
    try:
        return moment(value)
    except BadMoment as exc:
        raise HTTPException(400, f"since: {exc}") from None
