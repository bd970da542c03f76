"""The tracer's span processor and exporter: which run and agent a span belongs to, and finished spans into the store."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans import conventions as S
from faultlens.middleware.spans.record import SpanRecord, record_from_readable_span
from ..errors import InputError

if TYPE_CHECKING:
    from ..store.protocol import Store

log = logging.getLogger("faultlens.tracer")


class RunContextProcessor(SpanProcessor):
    """Tracks, as spans start, which faultlens run and which agent each span belongs to.

    A span belongs to a run when it carries `gen_ai.conversation.id` or was
    started inside a run's OTel trace (spans of other instrumentations sharing
    the provider). Such a span is stamped with the run's id and, when it names
    no agent, with the agent of its nearest ancestor: an exporter sees only
    finished spans, so what the context knew at start travels on the span.
    """

    def __init__(self) -> None:
        self._runs: dict[int, str] = {}
        self._agents: dict[int, str | None] = {}

    def watch(self, workflow_span: otel_trace.Span, trace_id: str) -> None:
        self._runs[workflow_span.get_span_context().trace_id] = trace_id

    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        ctx = span.get_span_context()
        run_id = self._runs.get(ctx.trace_id)
        if run_id is None:
            return
        attributes = span.attributes or {}
        agent = attributes.get(S.AGENT_NAME)
        if agent is None and span.parent is not None:
            agent = self._agents.get(span.parent.span_id)
            if agent is not None:
                span.set_attribute(S.AGENT_NAME, agent)
        if S.CONVERSATION_ID not in attributes:
            span.set_attribute(S.CONVERSATION_ID, run_id)
        # Single dict operations are atomic (GIL, or the dict's own lock in free-threaded
        # builds); no lock on the path every span takes.
        self._agents[ctx.span_id] = agent

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        if ctx is None:
            return
        self._agents.pop(ctx.span_id, None)
        if span.parent is None:
            self._runs.pop(ctx.trace_id, None)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class StoreSpanExporter(SpanExporter):
    """Writes finished spans of faultlens runs to the store as steps: one transaction per export.

    Spans that belong to no run (no `gen_ai.conversation.id`) are skipped. A
    failing write is logged and kept in `errors`; it never breaks the agent. A
    batch holding a bad span (InputError) is written span by span so that the
    good ones are kept, and each bad one is logged.
    """

    def __init__(self, store: Store):
        self.store = store
        self.errors: list[BaseException] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        records = [r for r in map(record_from_readable_span, spans) if r.conversation_id is not None]
        if not records:
            return SpanExportResult.SUCCESS
        try:
            ingest(self.store, records, source="tracer")
            return SpanExportResult.SUCCESS
        except InputError:
            if len(records) == 1:
                self._failed(records[0])
                return SpanExportResult.FAILURE
        except Exception as exc:  # noqa: BLE001 - a storage problem must not crash the traced agent
            # Not one bad span but the store (locked, disk full, ...): retrying span by span would only repeat it.
            log.exception("faultlens could not store a batch of %d spans", len(records))
            self.errors.append(exc)
            return SpanExportResult.FAILURE
        result = SpanExportResult.SUCCESS
        for record in records:
            try:
                ingest(self.store, [record], source="tracer")
            except Exception:  # noqa: BLE001
                self._failed(record)
                result = SpanExportResult.FAILURE
        return result

    def _failed(self, record: SpanRecord) -> None:
        log.exception("faultlens could not store span %s (%s)", record.span_id, record.name)
        exc = sys.exc_info()[1]
        if exc is not None:
            self.errors.append(exc)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
