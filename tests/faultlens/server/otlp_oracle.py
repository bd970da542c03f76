"""Test oracle: a protobuf `ExportTraceServiceRequest` as its OTLP JSON dict (hex ids, integer enums).

The server reads protobuf bodies straight into span records
(`faultlens.middleware.otlp.protobuf`); the tests check that path against this one
(decode to OTLP JSON, check the schema, read records: what a JSON body goes
through), and scripts/bench_ingest_checks.py builds its JSON payloads with it.
Protobuf carries ids as raw bytes and the generic protobuf→JSON conversion
writes bytes as base64, so ids are re-encoded as hex; OTLP JSON is the one
place where the protobuf JSON mapping and the OTLP spec differ.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from faultlens.server import otlp_body
from faultlens.middleware.otlp.protobuf import parse_request
from faultlens.server.otlp_body import PROTOBUF, media_type

# Keys under which OTLP carries ids: a span's own, its parent's, and a link's.
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def decode_otlp(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The OTLP JSON dict of a (decompressed) /v1/traces body of either encoding: protobuf here, JSON by the server's reader."""
    if media_type(content_type) == PROTOBUF:
        return protobuf_to_otlp_json(body)
    return otlp_body.decode_otlp(body, content_type)


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _ids_to_hex(payload: dict[str, Any]) -> None:
    # Only where OTLP puts ids (spans, their parents, their links): walking
    # every attribute value would cost more than the decoding itself.
    for resource_spans in payload.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for node in (span, *span.get("links", [])):
                    for key in _ID_KEYS:
                        if node.get(key):
                            node[key] = _b64_to_hex(node[key])


def protobuf_to_otlp_json(body: bytes) -> dict[str, Any]:
    """Decode a protobuf `ExportTraceServiceRequest` into its OTLP JSON dict (BodyError as the server's reader)."""
    return request_to_otlp_json(parse_request(body))


# A direct walk of the OTLP messages, giving exactly what
# `json_format.MessageToDict(request, use_integers_for_enums=True)` gives with
# ids re-encoded as hex (tests/faultlens/server/test_otlp_body.py checks the two
# agree): the generic converter inspects every field's descriptor and costs
# more than parsing the protobuf and storing its spans together. Parts that
# occur once per request, or are rare, still go through the generic converter.
def _generic(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, use_integers_for_enums=True)


def _any_value(value: Any) -> dict[str, Any]:
    which = value.WhichOneof("value")
    if which == "string_value":
        return {"stringValue": value.string_value}
    if which == "int_value":
        return {"intValue": str(value.int_value)}
    if which == "bool_value":
        return {"boolValue": value.bool_value}
    if which == "array_value":
        values = value.array_value.values
        return {"arrayValue": {"values": [_any_value(v) for v in values]} if values else {}}
    if which == "kvlist_value":
        values = value.kvlist_value.values
        return {"kvlistValue": {"values": _key_values(values)} if values else {}}
    # doubles (NaN and infinities are strings in JSON), bytes (base64), string-table indexes, unset
    return _generic(value)


def _key_values(items: Any) -> list[dict[str, Any]]:
    out = []
    for kv in items:
        if kv.key_strindex:
            out.append(_generic(kv))
            continue
        item: dict[str, Any] = {}
        if kv.key:
            item["key"] = kv.key
        if kv.HasField("value"):
            item["value"] = _any_value(kv.value)
        out.append(item)
    return out


def _event_json(event: Any) -> dict[str, Any]:
    e: dict[str, Any] = {}
    if event.time_unix_nano:
        e["timeUnixNano"] = str(event.time_unix_nano)
    if event.name:
        e["name"] = event.name
    if event.attributes:
        e["attributes"] = _key_values(event.attributes)
    if event.dropped_attributes_count:
        e["droppedAttributesCount"] = event.dropped_attributes_count
    return e


def _link_json(link: Any) -> dict[str, Any]:
    item = _generic(link)
    for key in ("traceId", "spanId"):
        if item.get(key):
            item[key] = _b64_to_hex(item[key])
    return item


def _hex(value: bytes) -> str:
    return value.hex()


def _events_json(events: Any) -> list[dict[str, Any]]:
    return [_event_json(event) for event in events]


def _links_json(links: Any) -> list[dict[str, Any]]:
    return [_link_json(link) for link in links]


# (protobuf field, OTLP JSON key, conversion), in the order json_format writes them;
# a field left at its default is omitted, as json_format does.
_SPAN_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("trace_id", "traceId", _hex),
    ("span_id", "spanId", _hex),
    ("trace_state", "traceState", None),
    ("parent_span_id", "parentSpanId", _hex),
    ("flags", "flags", None),
    ("name", "name", None),
    ("kind", "kind", None),
    ("start_time_unix_nano", "startTimeUnixNano", str),
    ("end_time_unix_nano", "endTimeUnixNano", str),
    ("attributes", "attributes", _key_values),
    ("dropped_attributes_count", "droppedAttributesCount", None),
    ("events", "events", _events_json),
    ("dropped_events_count", "droppedEventsCount", None),
    ("links", "links", _links_json),
    ("dropped_links_count", "droppedLinksCount", None),
)


def _span_json(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, key, convert in _SPAN_FIELDS:
        value = getattr(span, field)
        if value:
            out[key] = convert(value) if convert is not None else value
    if span.HasField("status"):
        status: dict[str, Any] = {}
        if span.status.message:
            status["message"] = span.status.message
        if span.status.code:
            status["code"] = span.status.code
        out["status"] = status
    return out


def request_to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP JSON dict of a parsed `ExportTraceServiceRequest` (hex ids, integer enums)."""
    resource_spans = []
    for rs in request.resource_spans:
        item: dict[str, Any] = {}
        if rs.HasField("resource"):
            item["resource"] = _generic(rs.resource)
        if rs.scope_spans:
            scopes = []
            for ss in rs.scope_spans:
                scope: dict[str, Any] = {}
                if ss.HasField("scope"):
                    scope["scope"] = _generic(ss.scope)
                if ss.spans:
                    scope["spans"] = [_span_json(span) for span in ss.spans]
                if ss.schema_url:
                    scope["schemaUrl"] = ss.schema_url
                scopes.append(scope)
            item["scopeSpans"] = scopes
        if rs.schema_url:
            item["schemaUrl"] = rs.schema_url
        resource_spans.append(item)
    # Protobuf JSON omits empty repeated fields; an empty export is still an export.
    return {"resourceSpans": resource_spans}
