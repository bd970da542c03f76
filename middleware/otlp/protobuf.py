"""A protobuf OTLP export straight to span records, checked on the parsed message.

JSON bodies go through the pydantic schema (`middleware.otlp.schema`), which
has to check every field's *type*. A parsed protobuf message already
guarantees those: strings are valid UTF-8 (the parser refuses anything else),
times are uint64 (so inside what `datetime` shows), attribute integers int64,
counts uint32, an AnyValue holds one kind (a oneof). What protobuf leaves open,
and what is checked here with the same field paths and messages as the
schema: ids of the right length (required ones present), status codes and
span kinds among the known values (proto3 enums accept any integer), finite
doubles, nesting of attribute values, keys present, names present (protobuf
omits an empty string, which the schema reads as a missing field).

The records are the ones `middleware.otlp.convert.otlp_json_to_records` makes from the
same body decoded to OTLP JSON and checked by the schema
(tests/middleware/otlp/test_protobuf.py compares the two, and the errors),
without building that JSON, running the schema, and reading the JSON back,
which together cost more than mapping and storing the spans.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..spans.record import SpanRecord
from .convert import KIND_NAMES, STATUS_NAMES
from .schema import MAX_VALUE_DEPTH, SPAN_KINDS, STATUS_CODES, BodyError, SchemaError, not_one_of

_REQUIRED = "Field required"  # pydantic's words for a missing field, which the JSON path answers with


def _value(value: Any, path: str, rpath: str, level: int, read: list[str] | None) -> Any:
    # path: the field as the schema names it; rpath: as the JSON path's reading step names it
    # (they differ inside arrays and kvlists), used for a value that cannot be read.
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which is None:
        return None
    if which == "double_value":
        number = value.double_value
        if not math.isfinite(number):
            raise SchemaError(f"{path}.doubleValue", f"must be a finite number, not {number!r}")
        return number
    if which == "array_value" or which == "kvlist_value":
        if level >= MAX_VALUE_DEPTH:
            raise SchemaError(path, f"nests more than {MAX_VALUE_DEPTH} levels of arrayValue/kvlistValue")
        if which == "array_value":
            return [_value(v, f"{path}.arrayValue.values[{i}]", f"{rpath}[{i}]", level + 1, read) for i, v in enumerate(value.array_value.values)]
        return _attributes(value.kvlist_value.values, f"{path}.kvlistValue.values", level + 1, read, rpath)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    # string_value_strindex: an index into a string table that trace exports do not have. The schema
    # ignores it; reading it as a span's value is refused, but only once the whole body has been
    # checked (as the JSON path reads values after its schema pass), so it is noted, not raised here.
    if read is not None:
        read.append(rpath)
    return None


def _attributes(items: Any, path: str, level: int = 0, read: list[str] | None = None, rpath: str | None = None) -> dict[str, Any]:
    rbase = path if rpath is None else rpath
    out: dict[str, Any] = {}
    for i, kv in enumerate(items):
        key = kv.key
        if not key:
            raise SchemaError(f"{path}[{i}].key", _REQUIRED)
        # A KeyValue whose value is unset reads as None, as `{"key": k}` does in JSON.
        out[key] = _value(kv.value, f"{path}[{i}].value", f"{rbase}[{i}].value", level, read) if kv.HasField("value") else None
    return out


def _id(raw: bytes, nbytes: int, path: str) -> str:
    if len(raw) == nbytes:
        return raw.hex()
    if not raw:
        raise SchemaError(path, "is missing")
    raise SchemaError(path, f"{raw.hex()[:40]!r} is not a {nbytes}-byte id in hex or base64")


def _optional_id(raw: bytes, nbytes: int, path: str) -> str | None:
    return _id(raw, nbytes, path) if raw else None


def _span(span: Any, resource: dict[str, Any], label: str, unread: list[str]) -> SpanRecord:
    trace_id = _id(span.trace_id, 16, f"{label}.traceId")
    span_id = _id(span.span_id, 8, f"{label}.spanId")
    parent_id = _optional_id(span.parent_span_id, 8, f"{label}.parentSpanId")
    name = span.name
    if not name:
        raise SchemaError(f"{label}.name", _REQUIRED)
    kind = span.kind
    if kind not in SPAN_KINDS:
        raise SchemaError(f"{label}.kind", not_one_of(kind, SPAN_KINDS, "span kind"))
    # Checked in the schema's order (attributes, then events); values that cannot be read are noted
    # in the JSON path's reading order (events, then attributes), so both name the same first field.
    attribute_unread: list[str] = []
    attributes = _attributes(span.attributes, f"{label}.attributes", 0, attribute_unread) if span.attributes else {}
    events = []
    for i, event in enumerate(span.events):
        events.append(
            {
                "name": event.name,
                "time_ns": event.time_unix_nano,
                "attributes": _attributes(event.attributes, f"{label}.events[{i}].attributes", 0, unread),
            }
        )
    unread.extend(attribute_unread)
    for i, link in enumerate(span.links):
        # Links are not stored, but a body with a bad one is refused whole, as the schema refuses it.
        _id(link.trace_id, 16, f"{label}.links[{i}].traceId")
        _id(link.span_id, 8, f"{label}.links[{i}].spanId")
        _attributes(link.attributes, f"{label}.links[{i}].attributes", read=None)
    status = span.status
    code = status.code
    if code not in STATUS_CODES:
        raise SchemaError(f"{label}.status.code", not_one_of(code, STATUS_CODES, "status code"))
    start = span.start_time_unix_nano
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        start_ns=start,
        end_ns=span.end_time_unix_nano or start,
        attributes=attributes,
        status=STATUS_NAMES[code],
        status_message=status.message or None,
        events=events,
        resource=resource,
        # 0 (unspecified) is protobuf's default, which the JSON form omits and reads as internal.
        kind=KIND_NAMES[kind or 1],
    )


def request_to_records(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    """The span records of a parsed export; SchemaError names the first bad field as the JSON path would."""
    records: list[SpanRecord] = []
    unread: list[str] = []
    for r, rs in enumerate(request.resource_spans):
        resource = _attributes(rs.resource.attributes, f"resourceSpans[{r}].resource.attributes", 0, unread)
        for s, ss in enumerate(rs.scope_spans):
            _attributes(ss.scope.attributes, f"resourceSpans[{r}].scopeSpans[{s}].scope.attributes", read=None)
            for k, span in enumerate(ss.spans):
                records.append(_span(span, resource, f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}]", unread))
    if unread:
        raise SchemaError(unread[0], "unknown value type ['stringValueStrindex']")
    return records


def parse_request(body: bytes) -> ExportTraceServiceRequest:
    """The parsed protobuf `ExportTraceServiceRequest` of `body`; BodyError (400) when it is not one."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise BodyError(400, f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    return request


def protobuf_to_records(body: bytes) -> list[SpanRecord]:
    """Parse a protobuf `ExportTraceServiceRequest` body and return its span records (BodyError, SchemaError)."""
    return request_to_records(parse_request(body))
