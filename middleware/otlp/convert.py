"""OTLP JSON in and out: traces from an OpenTelemetry Collector file, and back.

Reads ExportTraceServiceRequest JSON (`resourceSpans` → `scopeSpans` →
`spans`) in both encodings found in the wild: the OTLP/JSON spec's (hex ids,
integer enums, as the Collector's file exporter writes) and protobuf's
`MessageToJson` (base64 ids, enum names). A file holds one JSON document or
one per line. Spans may follow the GenAI semantic conventions or OpenInference
(see `middleware.spans`). `trace_to_otlp` writes a `Trace` back so that
`read_otlp_file` returns it unchanged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from faultlens.middleware.spans import conventions as S
from ..errors import FieldError, InputError
from ..jsonl import read_utf8
from ..model.trace import Step, StepKind, Trace
from .schema import SchemaError, validate_export
from ..spans.messages import messages_text
from ..spans.record import SpanRecord
from ..spans.traces import traces_from_records

_STATUS = {0: "unset", 1: "ok", 2: "error", "STATUS_CODE_UNSET": "unset", "STATUS_CODE_OK": "ok", "STATUS_CODE_ERROR": "error"}
_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
# What a span record calls each OTLP status code and span kind (integers, as protobuf carries them).
STATUS_NAMES = {code: name for code, name in _STATUS.items() if isinstance(code, int)}
KIND_NAMES = dict(_KINDS)


def _hex_id(value: Any, nbytes: int, field: str) -> str | None:
    """An id as lowercase hex: OTLP/JSON writes hex, protobuf's MessageToJson base64."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise FieldError(field, f"must be a string id, got {type(value).__name__}")
    if len(value) == nbytes * 2:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == nbytes:
        return raw.hex()
    raise FieldError(field, f"{value!r} is not a {nbytes}-byte id in hex or base64")


def _value(value: Any, field: str) -> Any:
    """Decode an OTLP AnyValue union."""
    if not isinstance(value, dict):
        raise FieldError(field, "must be an AnyValue object such as {\"stringValue\": ...}")
    if not value:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            raise FieldError(field, f"intValue {value['intValue']!r} is not an integer") from None
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            raise FieldError(field, f"doubleValue {value['doubleValue']!r} is not a number") from None
    if "arrayValue" in value:
        return [_value(v, f"{field}[{i}]") for i, v in enumerate((value["arrayValue"] or {}).get("values", []))]
    if "kvlistValue" in value:
        return _attributes((value["kvlistValue"] or {}).get("values", []), field)
    if "bytesValue" in value:
        return value["bytesValue"]
    raise FieldError(field, f"unknown value type {sorted(value)}")


def _attributes(items: Any, field: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise FieldError(field, "must be a list of {key, value}")
    out = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "key" not in item:
            raise FieldError(f"{field}[{i}]", "must be an object with a key")
        out[item["key"]] = _value(item.get("value", {}), f"{field}[{i}].value")
    return out


def _time(value: Any, field: str) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise FieldError(field, f"{value!r} is not a time in nanoseconds") from None


def _span(span: Any, resource: dict[str, Any], field: str) -> SpanRecord:
    if not isinstance(span, dict):
        raise FieldError(field, "must be an object")
    trace_id = _hex_id(span.get("traceId"), 16, f"{field}.traceId")
    span_id = _hex_id(span.get("spanId"), 8, f"{field}.spanId")
    if trace_id is None:
        raise FieldError(f"{field}.traceId", "missing")
    if span_id is None:
        raise FieldError(f"{field}.spanId", "missing")
    if not isinstance(span.get("name"), str):
        raise FieldError(f"{field}.name", "missing or not a string")
    status = span.get("status") or {}
    code = status.get("code", 0)
    if code not in _STATUS:
        raise FieldError(f"{field}.status.code", f"unknown status code {code!r}")
    start = _time(span.get("startTimeUnixNano"), f"{field}.startTimeUnixNano")
    end = _time(span.get("endTimeUnixNano"), f"{field}.endTimeUnixNano") or start
    kind = span.get("kind", 1)
    events = []
    for i, event in enumerate(span.get("events") or []):
        events.append(
            {
                "name": event.get("name", ""),
                "time_ns": _time(event.get("timeUnixNano"), f"{field}.events[{i}].timeUnixNano"),
                "attributes": _attributes(event.get("attributes"), f"{field}.events[{i}].attributes"),
            }
        )
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_hex_id(span.get("parentSpanId"), 8, f"{field}.parentSpanId"),
        name=span["name"],
        start_ns=start,
        end_ns=end,
        attributes=_attributes(span.get("attributes"), f"{field}.attributes"),
        status=_STATUS[code],
        status_message=status.get("message") or None,
        events=events,
        resource=resource,
        kind=_KINDS.get(kind, str(kind).removeprefix("SPAN_KIND_").lower()),
    )


def _records(payload: Any, source: str, line: int | None, checked: bool = False) -> tuple[list[SpanRecord], dict[int, str]]:
    where = f"line {line}" if line is not None else None
    if not isinstance(payload, dict):
        raise InputError(source, where, None, f"expected a JSON object with resourceSpans, got {type(payload).__name__}")
    if not checked:
        try:
            # The one schema every OTLP export must fit (the server checks the same); the reading below relies on it.
            validate_export(payload)
        except SchemaError as exc:
            raise InputError(source, where, exc.field, exc.message) from None
    resource_spans = payload.get("resourceSpans", payload.get("resource_spans"))
    if not isinstance(resource_spans, list):
        raise InputError(source, where, "resourceSpans", "missing or not a list (is this an OTLP trace export?)")
    records: list[SpanRecord] = []
    labels: dict[int, str] = {}
    for r, rs in enumerate(resource_spans):
        try:
            resource = _attributes(((rs or {}).get("resource") or {}).get("attributes"), f"resourceSpans[{r}].resource.attributes")
        except FieldError as exc:
            raise InputError(source, where, exc.field, str(exc)) from None
        for s, ss in enumerate((rs or {}).get("scopeSpans", (rs or {}).get("scope_spans", [])) or []):
            for k, span in enumerate((ss or {}).get("spans", []) or []):
                label = f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}]"
                try:
                    record = _span(span, resource, label)
                except FieldError as exc:
                    raise InputError(source, f"{where}, span {label}" if where else f"span {label}", exc.field, str(exc)) from None
                records.append(record)
                labels[id(record)] = f"{where}, span {label}" if where else f"span {label}"
    return records, labels


def otlp_json_to_records(payload: dict, source: str = "otlp", *, checked: bool = False) -> list[SpanRecord]:
    """The spans of one ExportTraceServiceRequest (as JSON) as `SpanRecord`s.

    Raises InputError naming the span (resourceSpans[i].scopeSpans[j].spans[k]) and field.
    checked: the caller has already passed `payload` through `schema.validate_export`.
    """
    return _records(payload, source, None, checked)[0]


def read_otlp_file(path: str | Path) -> Iterator[Trace]:
    """Traces from an OTLP JSON file (one document, or one per line as the Collector writes).

    Every span of the file is read and checked before the first trace is
    returned, so a bad record fails the whole file.
    """
    path = Path(path)
    source = str(path)
    text = read_utf8(path)
    payloads: list[tuple[Any, int | None]]
    try:
        payloads = [(json.loads(text), None)]
    except (json.JSONDecodeError, RecursionError):
        payloads = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                payloads.append((json.loads(line), number))
            except json.JSONDecodeError as exc:
                raise InputError(source, f"line {number}", None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
            except RecursionError:
                raise InputError(source, f"line {number}", None, "JSON nested too deeply") from None
    records: list[SpanRecord] = []
    labels: dict[int, str] = {}
    for payload, line_number in payloads:
        found, found_labels = _records(payload, source, line_number)
        records += found
        labels.update(found_labels)
    if not records:
        raise InputError(source, None, "resourceSpans", "the file holds no spans")
    yield from traces_from_records(records, source=source, labels=labels)


# -- Trace → OTLP -------------------------------------------------------------
def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"stringValue": str(value)}


def _attrs(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in attributes.items() if v is not None]


def _derived_id(seed: str, nbytes: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[: nbytes * 2]


def _is_hex(value: str | None, nbytes: int) -> bool:
    if not value:
        return False
    return len(value) == nbytes * 2 and all(c in "0123456789abcdef" for c in value) and int(value, 16) != 0


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _span_name(step: Step, agent_span: bool) -> tuple[str, str | None]:
    """The span name and `gen_ai.operation.name` (None: no operation) a step exports as."""
    if agent_span:
        return f"{S.AGENT} {step.agent}", S.AGENT
    if step.kind is StepKind.llm_call:
        return f"{S.CHAT} {step.model or 'model'}", S.CHAT
    if step.kind in (StepKind.tool_call, StepKind.tool_result) or step.tool_name is not None:
        return f"{S.TOOL} {step.tool_name}", S.TOOL
    return f"{step.kind.value} {step.agent}", None


def _optional_attrs(step: Step) -> dict[str, Any]:
    """The attributes of the step's fields that are set (tool, model, usage, lessons, media, native id)."""
    attrs: dict[str, Any] = {}
    if step.tool_name is not None:
        attrs[S.TOOL_NAME] = step.tool_name
    if step.tool_arguments is not None:
        attrs[S.TOOL_ARGUMENTS] = _json(step.tool_arguments)
    if step.tool_result is not None:
        attrs[S.TOOL_RESULT] = _json(step.tool_result)
    if step.model:
        attrs[S.RESPONSE_MODEL] = step.model
    if step.usage is not None:
        attrs.update({S.INPUT_TOKENS: step.usage.input_tokens, S.OUTPUT_TOKENS: step.usage.output_tokens,
                      S.COST_USD: step.usage.cost_usd})
    if step.lessons:
        attrs[S.LESSONS] = list(step.lessons)
    if step.media:
        attrs[S.MEDIA] = _json([m.model_dump(mode="json") for m in step.media])
    if step.native_id is not None:
        attrs[S.NATIVE_ID] = step.native_id
    return attrs


def _step_span(trace: Trace, step: Step, trace_hex: str, root_id: str, base_ns: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {S.CONVERSATION_ID: trace.id, S.AGENT_NAME: step.agent, S.STEP_KIND: step.kind.value, S.STEP_INDEX: step.index,
                             S.STEP_ROLE: step.role.value}
    metadata = dict(step.metadata)
    inputs = metadata.pop("input_messages", None)
    outputs = metadata.pop("output_messages", None)
    span_started = metadata.get("span_started_at", "absent")
    name, operation = _span_name(step, agent_span=span_started != "absent")
    if operation is not None:
        attrs[S.OPERATION] = operation
    if inputs is not None:
        attrs[S.INPUT_MESSAGES] = _json(inputs)
    if outputs is not None:
        attrs[S.OUTPUT_MESSAGES] = _json(outputs)
    if outputs is None or messages_text(outputs) != step.content:
        attrs[S.CONTENT] = step.content
    if metadata:
        attrs[S.STEP_METADATA] = _json(metadata)
    attrs.update(_optional_attrs(step))
    span_id = step.span_id if _is_hex(step.span_id, 8) else _derived_id(f"{trace.id}/{step.index}/{step.span_id}", 8)
    if span_id != step.span_id:
        attrs[S.ORIGINAL_SPAN_ID] = step.span_id or ""
    parent = step.parent_span_id if _is_hex(step.parent_span_id, 8) else root_id
    if parent != step.parent_span_id:
        attrs[S.ORIGINAL_PARENT_ID] = step.parent_span_id or ""
    # Steps without a clock get one (spans need times); the markers say so.
    synthetic = base_ns + step.index * 1000
    end = step.ended_at
    start_s = span_started if span_started != "absent" else step.started_at
    if start_s is None:
        attrs[S.NO_START] = True
    if end is None:
        attrs[S.NO_END] = True
    start_ns = _to_ns(start_s) if start_s is not None else synthetic
    end_ns = _to_ns(end) if end is not None else max(start_ns, synthetic)
    status = {"code": 2, "message": step.error} if step.error is not None else {"code": 0}
    return {
        "traceId": trace_hex,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": _attrs(attrs),
        "status": status,
    }


def _to_ns(seconds: float) -> int:
    return round(seconds * 1e9)


def trace_to_otlp(trace: Trace, service_name: str = "faultlens") -> dict[str, Any]:
    """A `Trace` as OTLP JSON (ExportTraceServiceRequest) with GenAI-convention spans.

    The workflow span carries the header (task, agents, outcome, source, gold)
    as `faultlens.*` attributes; each step is one span. `read_otlp_file` turns
    the result back into an equal `Trace`.
    """
    trace_hex = trace.id if _is_hex(trace.id, 16) else _derived_id(f"trace/{trace.id}", 16)
    root_id = _derived_id(f"root/{trace.id}", 8)
    base_ns = _to_ns(trace.created_at)
    header = {
        S.OPERATION: S.WORKFLOW,
        S.CONVERSATION_ID: trace.id,
        S.INPUT_MESSAGES: _json([{"role": "user", "parts": [{"type": "text", "content": trace.task.query}]}]),
        S.TRACE_TASK: trace.task.model_dump_json(),
        S.TRACE_AGENTS: _json([a.model_dump(mode="json") for a in trace.agents]),
        S.TRACE_SOURCE: trace.source.model_dump_json(),
        S.SCHEMA_VERSION_ATTR: trace.schema_version,
        S.TRACE_OUTCOME: trace.outcome.model_dump_json() if trace.outcome is not None else None,
        S.TRACE_GOLD: trace.gold.model_dump_json() if trace.gold is not None else None,
        S.TRACE_METADATA: _json(trace.metadata) if trace.metadata else None,
    }
    steps = [_step_span(trace, step, trace_hex, root_id, base_ns) for step in trace.steps]
    end_ns = max([base_ns] + [int(s["endTimeUnixNano"]) for s in steps])
    root = {
        "traceId": trace_hex,
        "spanId": root_id,
        "parentSpanId": "",
        "name": f"{S.WORKFLOW} {trace.source.benchmark or trace.source.framework}",
        "kind": 1,
        "startTimeUnixNano": str(base_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": _attrs(header),
        "status": {"code": 0} if trace.outcome is None or trace.outcome.success else {"code": 2, "message": trace.outcome.detail or "the run failed"},
    }
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attrs({"service.name": service_name})},
                "scopeSpans": [{"scope": {"name": "faultlens"}, "spans": [root, *steps]}],
            }
        ]
    }
