"""A protobuf export read straight into span records gives what the JSON path (decode, schema, records) gives.

The same records for good bodies; for bad ones the same refusal naming the
same field (the server answers both with 400 and that field).
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from faultlens.middleware.errors import InputError
from faultlens.middleware.otlp.convert import otlp_json_to_records
from faultlens.middleware.otlp.schema import SchemaError, validate_export
from faultlens.middleware.otlp.protobuf import protobuf_to_records
from tests.faultlens.server.otlp_oracle import protobuf_to_otlp_json


def _json_path(body: bytes):
    payload = protobuf_to_otlp_json(body)
    try:
        validate_export(payload)
        return ("ok", otlp_json_to_records(payload, source="t", checked=True))
    except SchemaError as exc:
        return ("refused", exc.field)
    except InputError as exc:
        return ("refused", exc.field)


def _fast_path(body: bytes):
    try:
        return ("ok", protobuf_to_records(body))
    except SchemaError as exc:
        return ("refused", exc.field)


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "refused":
        return a[1] == b[1]
    return [vars(r) for r in a[1]] == [vars(r) for r in b[1]]


ids = lambda n: st.one_of(st.binary(min_size=n, max_size=n), st.binary(max_size=20))  # noqa: E731
doubles = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(
    st.tuples(st.just("string_value"), st.text(max_size=8)),
    st.tuples(st.just("int_value"), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just("bool_value"), st.booleans()),
    st.tuples(st.just("double_value"), doubles),
    st.tuples(st.just("bytes_value"), st.binary(max_size=6)),
    st.tuples(st.just("string_value_strindex"), st.integers(1, 5)),
    st.just(("unset", None)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.tuples(st.just("array_value"), st.lists(inner, max_size=3)),
        st.tuples(st.just("kvlist_value"), st.lists(st.tuples(st.sampled_from(["a", "b", ""]), inner), max_size=3)),
    ),
    max_leaves=6,
)
attributes = st.lists(st.tuples(st.sampled_from(["gen_ai.agent.name", "gen_ai.operation.name", "x", "", "faultlens.content"]), values, st.booleans()), max_size=4)


def _set_value(target, value) -> None:
    kind, inner = value
    if kind == "unset":
        return
    if kind == "array_value":
        target.array_value.SetInParent()
        for item in inner:
            _set_value(target.array_value.values.add(), item)
    elif kind == "kvlist_value":
        target.kvlist_value.SetInParent()
        for key, item in inner:
            kv = target.kvlist_value.values.add()
            kv.key = key
            _set_value(kv.value, item)
    else:
        setattr(target, kind, inner)


def _set_attributes(target, items) -> None:
    for key, value, has_value in items:
        kv = target.add()
        kv.key = key
        if has_value:
            kv.value.SetInParent()
            _set_value(kv.value, value)


spans = st.fixed_dictionaries(
    {
        "trace_id": ids(16),
        "span_id": ids(8),
        "parent": st.one_of(st.just(b""), ids(8)),
        "name": st.sampled_from(["chat", "execute_tool search", "", "invoke_agent a"]),
        "kind": st.sampled_from([0, 1, 2, 3, 5, 6, 99]),
        "start": st.integers(0, 2**64 - 1),
        "end": st.integers(0, 2**64 - 1),
        "attributes": attributes,
        "events": st.lists(st.tuples(st.text(max_size=5), st.integers(0, 2**64 - 1), attributes), max_size=2),
        "links": st.lists(st.tuples(ids(16), ids(8), attributes), max_size=2),
        "status": st.sampled_from([None, (0, ""), (1, "fine"), (2, "boom"), (7, "")]),
    }
)


def _request(resource_attributes, scope_attributes, span_specs) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    _set_attributes(rs.resource.attributes, resource_attributes)
    ss = rs.scope_spans.add()
    ss.scope.name = "t"
    _set_attributes(ss.scope.attributes, scope_attributes)
    for spec in span_specs:
        span = ss.spans.add()
        span.trace_id, span.span_id, span.parent_span_id = spec["trace_id"], spec["span_id"], spec["parent"]
        span.name, span.kind = spec["name"], spec["kind"]
        span.start_time_unix_nano, span.end_time_unix_nano = spec["start"], spec["end"]
        _set_attributes(span.attributes, spec["attributes"])
        for name, time_ns, items in spec["events"]:
            event = span.events.add()
            event.name, event.time_unix_nano = name, time_ns
            _set_attributes(event.attributes, items)
        for trace_id, span_id, items in spec["links"]:
            link = span.links.add()
            link.trace_id, link.span_id = trace_id, span_id
            _set_attributes(link.attributes, items)
        if spec["status"] is not None:
            span.status.code, span.status.message = spec["status"]
    return request.SerializeToString()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attributes, attributes, st.lists(spans, max_size=3))
def test_the_protobuf_reader_agrees_with_the_json_path(resource_attributes, scope_attributes, span_specs):
    body = _request(resource_attributes, scope_attributes, span_specs)
    expected, got = _json_path(body), _fast_path(body)
    assert _same(expected, got), (expected, got)


def test_a_good_export_reads_the_same_both_ways():
    spec = {
        "trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent": b"\x03" * 8, "name": "chat", "kind": 3,
        "start": 5, "end": 0, "attributes": [("x", ("double_value", 1.5), True), ("gen_ai.agent.name", ("string_value", "a"), True)],
        "events": [("exception", 7, [("x", ("bytes_value", b"\x00\x01"), True)])], "links": [], "status": (2, "boom"),
    }
    body = _request([("service.name", ("string_value", "svc"), True)], [], [spec])
    kind, records = _fast_path(body)
    assert kind == "ok" and _same(_json_path(body), (kind, records))
    (record,) = records
    assert record.trace_id == "01" * 16 and record.parent_id == "03" * 8 and record.end_ns == 5
    assert record.status == "error" and record.kind == "client" and record.resource == {"service.name": "svc"}
    assert record.events[0]["attributes"] == {"x": "AAE="}


def test_bad_fields_are_named():
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "parent": b"", "name": "chat", "kind": 1, "start": 1, "end": 2,
            "attributes": [], "events": [], "links": [], "status": None}
    cases = {
        "resourceSpans[0].scopeSpans[0].spans[0].traceId": {"trace_id": b""},
        "resourceSpans[0].scopeSpans[0].spans[0].spanId": {"span_id": b"\x01" * 3},
        "resourceSpans[0].scopeSpans[0].spans[0].name": {"name": ""},
        "resourceSpans[0].scopeSpans[0].spans[0].kind": {"kind": 9},
        "resourceSpans[0].scopeSpans[0].spans[0].status.code": {"status": (5, "")},
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.doubleValue": {"attributes": [("x", ("double_value", math.nan), True)]},
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].key": {"attributes": [("", ("int_value", 1), True)]},
    }
    for field, change in cases.items():
        body = _request([], [], [{**base, **change}])
        assert _fast_path(body) == ("refused", field)
        assert _json_path(body) == ("refused", field)
