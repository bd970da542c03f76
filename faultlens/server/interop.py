"""Send attributions back out over OTLP, so they show up next to the run in any OTel backend.

An OTLP span cannot be amended once exported, so each attribution becomes a
short child span of the blamed span (same trace id, parent = the blamed span's
id) named `gen_ai.evaluation faultlens`, carrying one span event
`gen_ai.evaluation.result` with the GenAI semantic-convention evaluation
attributes (`gen_ai.evaluation.name`, `.score.value`, `.score.label`,
`.explanation`) plus faultlens' own (`faultlens.attribution.*`). Langfuse,
Phoenix and Jaeger show it under the step that was blamed.
"""

from __future__ import annotations

import logging

import re
from collections.abc import Callable

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from faultlens.middleware.model.trace import Attribution, Trace
from faultlens.middleware.store import Store
from .failed_runs import FailureResult, HoldsAttributions

EVENT_NAME = "gen_ai.evaluation.result"
_HEX = re.compile(r"^[0-9a-f]+$")


log = logging.getLogger(__name__)

def _hex_id(value: str | None, length: int) -> int | None:
    if value and len(value) == length and _HEX.match(value.lower()):
        number = int(value, 16)
        return number or None
    return None


def trace_otel_id(trace: Trace) -> int | None:
    """The run's OpenTelemetry trace id when the run is keyed by it (a 32-hex-digit id).

    True of runs recorded by faultlens' tracer (its conversation id is the
    trace id) and of spans without `gen_ai.conversation.id`; the export
    prefers the trace id stored with the blamed span at ingest (`exporting`).
    """
    return _hex_id(trace.id, 32)


def blamed_span(trace: Trace, attribution: Attribution) -> str | None:
    """The span id of the step an attribution blames, if that step came from a span."""
    if attribution.step is None or not 0 <= attribution.step < len(trace.steps):
        return None
    return trace.steps[attribution.step].span_id


def evaluation_attributes(attribution: Attribution) -> dict[str, AttributeValue]:
    a = attribution
    attrs: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": f"faultlens.{a.method}",
        "gen_ai.evaluation.score.label": a.mode or a.status.value,
        "gen_ai.evaluation.explanation": a.reason or a.error or "",
        "faultlens.attribution.id": a.id,
        "faultlens.attribution.method": a.method,
        "faultlens.attribution.status": a.status.value,
    }
    if a.confidence is not None:
        attrs["gen_ai.evaluation.score.value"] = float(a.confidence)
    for key, value in (("agent", a.agent), ("step", a.step), ("mode", a.mode), ("model", a.model), ("backend", a.backend)):
        if value is not None:
            attrs[f"faultlens.attribution.{key}"] = value
    return attrs


class EvaluationExporter:
    """Exports attributions through any OTel `SpanExporter` (OTLP/HTTP, in-memory, ...)."""

    def __init__(self, span_exporter: SpanExporter, service_name: str = "faultlens"):
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        # Simple (synchronous) processor: we already run on the background worker.
        self.provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        self.tracer = self.provider.get_tracer("faultlens.server.interop")

    def export(self, trace: Trace, attribution: Attribution, *, otel_trace_id: str | None = None) -> bool:
        """Export one attribution; False when the run has no span to hang it on.

        otel_trace_id: the blamed span's OpenTelemetry trace id, when the run's
        id is not it (runs are keyed by `gen_ai.conversation.id` when present).
        """
        trace_id = _hex_id(otel_trace_id, 32) or trace_otel_id(trace)
        span_id = _hex_id(blamed_span(trace, attribution), 16)
        if trace_id is None or span_id is None:
            return False
        parent = NonRecordingSpan(SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)))
        attrs = evaluation_attributes(attribution)
        with self.tracer.start_span(
            f"gen_ai.evaluation faultlens.{attribution.method}", context=otel_trace.set_span_in_context(parent), attributes=attrs
        ) as span:
            span.add_event(EVENT_NAME, attributes=attrs)
        return True

    def shutdown(self) -> None:
        self.provider.shutdown()


def saved_attributions(saved: FailureResult) -> list[Attribution]:
    """The attributions in what an `on_failure` returned (`failed_runs.FailureResult`): what it saved
    (`feedback.loop.Saved`, `feedback.LoopResult`: `HoldsAttributions`), an `Attribution`, a list of them, or None."""
    if saved is None:
        return []
    if isinstance(saved, Attribution):
        return [saved]
    if isinstance(saved, HoldsAttributions):  # before the sequences: `Saved` is a named tuple
        return list(saved.attributions)
    if isinstance(saved, (list, tuple)) and all(isinstance(a, Attribution) for a in saved):
        return list(saved)
    raise TypeError(f"on_failure returned {type(saved).__name__}; return what it saved (feedback.loop.Saved, an Attribution, a list of them or None)")


def exporting(store: Store, exporter: EvaluationExporter) -> Callable[[str, FailureResult], int]:
    """export(trace_id, saved): export each attribution `saved` holds (what `on_failure` returned) onto
    the blamed span, under the OpenTelemetry trace id stored with that span at ingest. Returns how many went out.

    What was saved, not what the store holds since some moment, and ids from the store, not from this
    process's memory: the same in a `faultlens worker`, on another server, or after a restart.
    """

    def export(trace_id: str, saved: FailureResult) -> int:
        attributions = saved_attributions(saved)
        if not attributions:
            return 0
        trace = store.get_trace(trace_id)
        sent = 0
        for attribution in attributions:
            span = blamed_span(trace, attribution)
            went = exporter.export(trace, attribution, otel_trace_id=store.otel_trace_id(trace.id, span) if span else None)
            if not went:  # said, not skipped silently: e.g. a conversation run stored before span trace ids were kept
                log.warning("attribution %s of run %s not exported over OTLP: no OpenTelemetry trace id is stored for its "
                            "blamed step %s", attribution.id, trace.id, attribution.step)
            sent += went
        return sent

    return export


def otlp_http_exporter(endpoint: str, token: str | None = None) -> SpanExporter:
    """An OTLP/HTTP protobuf exporter to `endpoint` (a full URL ending in /v1/traces)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=10)
