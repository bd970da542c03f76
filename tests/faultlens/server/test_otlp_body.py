"""Reading OTLP/HTTP bodies: protobuf → OTLP JSON with hex ids, compression limits, bad bodies."""

from __future__ import annotations

import gzip
import zlib

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from faultlens.server.otlp_body import BodyError, decompress

from .otlp_oracle import decode_otlp, protobuf_to_otlp_json


def _spans():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent") as parent:
        link = Link(parent.get_span_context())
        with tracer.start_as_current_span("child", attributes={"gen_ai.agent.name": "a", "n": 3}, links=[link]) as child:
            child.set_status(Status(StatusCode.ERROR, "boom"))
    return memory.get_finished_spans()


def test_protobuf_becomes_otlp_json_with_hex_ids_and_integer_enums():
    spans = _spans()
    body = encode_spans(spans).SerializeToString()
    payload = protobuf_to_otlp_json(body)
    out = [s for rs in payload["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    by_name = {s["name"]: s for s in out}
    child = next(s for s in spans if s.name == "child")
    parent = next(s for s in spans if s.name == "parent")
    assert by_name["child"]["traceId"] == format(child.context.trace_id, "032x")
    assert by_name["child"]["spanId"] == format(child.context.span_id, "016x")
    assert by_name["child"]["parentSpanId"] == format(parent.context.span_id, "016x")
    assert "parentSpanId" not in by_name["parent"]
    assert by_name["child"]["links"][0]["spanId"] == format(parent.context.span_id, "016x")
    assert by_name["child"]["links"][0]["traceId"] == format(parent.context.trace_id, "032x")
    assert by_name["child"]["status"]["code"] == 2  # STATUS_CODE_ERROR as an integer, per OTLP JSON
    attrs = {a["key"]: a["value"] for a in by_name["child"]["attributes"]}
    assert attrs["gen_ai.agent.name"] == {"stringValue": "a"}
    assert attrs["n"] == {"intValue": "3"}


def test_garbage_protobuf_is_a_400():
    with pytest.raises(BodyError) as err:
        decode_otlp(b"\xff\xff\xff not protobuf", "application/x-protobuf")
    assert err.value.status == 400 and "protobuf" in err.value.reason


@pytest.mark.parametrize("body, reason", [(b"{not json", "not valid JSON"), (b"[1, 2]", "JSON object")])
def test_bad_json_is_a_400(body, reason):
    with pytest.raises(BodyError) as err:
        decode_otlp(body, "application/json; charset=utf-8")
    assert err.value.status == 400 and reason in err.value.reason


def test_unknown_content_type_is_a_415():
    with pytest.raises(BodyError) as err:
        decode_otlp(b"{}", "text/plain")
    assert err.value.status == 415


def test_gzip_and_deflate_round_trip():
    raw = b'{"resourceSpans": []}'
    assert decompress(gzip.compress(raw), "gzip", 1000) == raw
    assert decompress(zlib.compress(raw), "deflate", 1000) == raw
    assert decompress(raw, None, 1000) == raw


def test_a_small_gzip_that_inflates_past_the_limit_is_a_413():
    bomb = gzip.compress(b"0" * 5_000_000)
    assert len(bomb) < 10_000
    with pytest.raises(BodyError) as err:
        decompress(bomb, "gzip", 1_000_000)
    assert err.value.status == 413


def test_truncated_gzip_is_a_400():
    with pytest.raises(BodyError) as err:
        decompress(gzip.compress(b"x" * 1000)[:-12], "gzip", 10_000)
    assert err.value.status == 400


def test_the_direct_protobuf_walk_gives_what_the_generic_converter_gives():
    # Every field kind OTLP spans carry, defaults and empties included.
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from .otlp_oracle import _ids_to_hex, request_to_otlp_json

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t", "1.0")
    attributes = {"s": "x", "empty": "", "i": -7, "zero": 0, "f": 1.5, "nan": float("nan"), "b": False, "list": ["a", "b"], "ints": [1, 2], "no": []}
    with tracer.start_as_current_span("root", attributes=attributes) as root:
        root.add_event("exception", {"exception.type": "ValueError", "exception.message": "boom"})
        root.add_event("bare")
        with tracer.start_as_current_span("child", links=[Link(root.get_span_context(), {"why": "cause"})]) as child:
            child.set_status(Status(StatusCode.OK))
        tracer.start_span("unnamed").end()
    request = ExportTraceServiceRequest()
    request.ParseFromString(encode_spans(memory.get_finished_spans()).SerializeToString())
    # Values the SDK never writes but other senders may.
    extra = request.resource_spans[0].scope_spans[0].spans[0].attributes.add()
    extra.key, extra.value.bytes_value = "bytes", b"\x00\x01"
    kv = request.resource_spans[0].scope_spans[0].spans[0].attributes.add()
    kv.key = "kv"
    inner = kv.value.kvlist_value.values.add()
    inner.key, inner.value.string_value = "k", "v"
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add().key = "unset"
    request.resource_spans.add()  # an empty resource block
    expected = json_format.MessageToDict(request, use_integers_for_enums=True)
    _ids_to_hex(expected)
    assert request_to_otlp_json(request) == expected
