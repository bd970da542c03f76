"""OTLP payload → store, through the shared span→step mapping (`middleware.spans`) and ingest (`middleware.ingest`).

The server adds only what a live service needs on top of `ingest.write.ingest`:
one batch at a time, in one store transaction (so two clients, or two
servers on one PostgreSQL store, racing on the same new trace cannot
overwrite its header with a placeholder), noticing which runs *became* failed
with this batch (a root span with status ERROR fails the run, see
`spans.mapping.header_from_record`), and storing each span's OpenTelemetry trace id
with its run (a run is keyed by `gen_ai.conversation.id` when there is one;
`Store.save_otel_trace_ids`) so attributions can be exported back onto the
right span by whichever process makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.ingest.plan import plan_ingest
from faultlens.middleware.ingest.write import write_ingest
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.model.trace import Outcome
from faultlens.middleware.store import Store, TraceNotFound

SOURCE = "POST /v1/traces"


@dataclass
class IngestResult:
    spans: int
    traces: list[str]
    # Runs whose outcome this batch set or changed (from span status or a faultlens.outcome attribute).
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    @property
    def newly_failed(self) -> list[str]:
        return [trace_id for trace_id, outcome in self.outcomes.items() if not outcome.success]


class Ingestor:
    def __init__(self, store: Store):
        self.store = store

    def _outcome(self, trace_id: str) -> Outcome | None:
        try:
            return self.store.get_outcome(trace_id)
        except TraceNotFound:
            return None

    def __call__(self, payload: dict[str, Any], *, checked: bool = False) -> IngestResult:
        """Store one OTLP JSON payload. Raises InputError (and stores nothing) if any span is bad.

        checked: `payload` already passed `middleware.otlp.schema.validate_export` (the route does it first).
        """
        from faultlens.middleware.otlp.convert import otlp_json_to_records

        return self.records(otlp_json_to_records(payload, source=SOURCE, checked=checked))

    def records(self, records: list[SpanRecord]) -> IngestResult:
        """Store span records of one export (a protobuf body is read straight into them, `middleware.otlp.protobuf`)."""
        # Mapping and serialising spans is most of the work; done before the transaction,
        # a big request does not hold up small ones for its whole length.
        plan = plan_ingest(records, source=SOURCE)
        # One transaction per request. The store makes other writers of the same runs wait
        # (SQLite: its one writer; PostgreSQL: a lock per run, across servers).
        with self.store.batch(plan.trace_ids):
            written = write_ingest(self.store, plan)
            before = written.outcomes_before
            for run in plan.runs:
                # In the same transaction as the steps: whichever process attributes the run later
                # (a `faultlens worker`, another server, this one restarted) finds each span's OTel trace.
                # A span in the OTel trace the run is keyed by needs no row (the export falls back to the
                # run's id), so runs without a conversation id, most of them, cost no extra write.
                elsewhere = {record.span_id: record.trace_id for record in run.group if record.trace_id != run.trace_id}
                if elsewhere:
                    self.store.save_otel_trace_ids(run.trace_id, elsewhere)
            # Only a run whose header this request brings can have a new outcome.
            after = {run.trace_id: self._outcome(run.trace_id) if run.header is not None else before[run.trace_id] for run in plan.runs}
        changed = {run.trace_id: outcome for run in plan.runs if (outcome := after[run.trace_id]) is not None and outcome != before[run.trace_id]}
        return IngestResult(spans=len(records), traces=written.trace_ids, outcomes=changed)
