"""OTLP/HTTP ingest on a real server: both encodings, idempotency, redaction, bad and oversized bodies, concurrency."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from faultlens.middleware.store.postgres import PostgresStore
from faultlens.server import create_app, routes_otlp

from .conftest import HTTP, run_team, sdk_provider, wait_for


def _step_count(store, trace_id):
    return len(store.get_trace(trace_id).steps)


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_sdk_exporter_spans_become_a_stored_run(live, store, encoding):
    provider = sdk_provider(live.url + "/v1/traces", encoding)
    ids = run_team(provider, query=f"multiply ({encoding})")
    provider.shutdown()

    runs = HTTP.get(live.url + "/api/runs").json()
    assert [r["id"] for r in runs] == [ids["trace_id"]]
    assert runs[0]["n_steps"] == 3 and runs[0]["success"] is None

    trace = HTTP.get(f"{live.url}/api/runs/{ids['trace_id']}").json()
    assert trace["task"]["query"] == f"multiply ({encoding})"
    assert [s["agent"] for s in trace["steps"]] == ["planner", "solver", "solver"]
    assert [s["span_id"] for s in trace["steps"]] == [ids["steps"]["plan"], ids["steps"]["tool"], ids["steps"]["answer"]]
    tool = trace["steps"][1]
    assert tool["tool_name"] == "calculator" and tool["tool_arguments"] == {"expression": "17 * 23"}
    assert trace["steps"][2]["kind"] == "final_answer"


def test_protobuf_response_is_an_export_trace_service_response(live):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

    r = HTTP.post(live.url + "/v1/traces", content=ExportTraceServiceRequest().SerializeToString(), headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    ExportTraceServiceResponse().ParseFromString(r.content)  # parses
    r = HTTP.post(live.url + "/v1/traces", json={"resourceSpans": []})
    assert r.status_code == 200 and r.json() == {}


def test_gzip_compressed_export(live, store):
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=live.url + "/v1/traces", compression=Compression.Gzip)))
    ids = run_team(provider)
    provider.shutdown()
    assert _step_count(store, ids["trace_id"]) == 3


def test_sending_the_same_spans_twice_stores_them_once(live, store):
    captured = []

    class Capture(OTLPSpanExporter):
        def export(self, spans):
            captured.append(list(spans))
            return super().export(spans)

    provider = TracerProvider()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider.add_span_processor(SimpleSpanProcessor(Capture(endpoint=live.url + "/v1/traces")))
    ids = run_team(provider)
    assert _step_count(store, ids["trace_id"]) == 3
    again = OTLPSpanExporter(endpoint=live.url + "/v1/traces")
    for batch in captured:  # a retrying exporter or collector resends whole batches
        assert again.export(batch).name == "SUCCESS"
    assert _step_count(store, ids["trace_id"]) == 3
    assert store.count_traces() == 1


def test_secrets_in_span_attributes_are_redacted_before_storage(live, store, tmp_path):
    secret = "sk-proj-abcdefghijklmnopqrstuvwx1234"
    provider = sdk_provider(live.url + "/v1/traces")
    ids = run_team(provider, secret=secret)
    provider.shutdown()
    trace = HTTP.get(f"{live.url}/api/runs/{ids['trace_id']}").json()
    assert secret not in json.dumps(trace)
    assert "[REDACTED]" in trace["steps"][1]["content"]
    # Not only what the API shows: the bytes on disk hold no secret either.
    if isinstance(store, PostgresStore):
        with store._pool.connection() as conn:
            raw = repr(conn.execute("SELECT * FROM steps").fetchall() + conn.execute("SELECT * FROM traces").fetchall()).encode()
    else:
        store.close()
        db = Path(store.location)
        raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob(db.name + "-wal"))
    assert secret.encode() not in raw


def _otlp_json(trace_id: str, spans: list[dict]) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def _span(trace_id: str, span_id: str, **attrs) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "chat",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in {"gen_ai.operation.name": "chat", "gen_ai.agent.name": "a", **attrs}.items()],
    }


def test_a_bad_span_rejects_the_whole_batch_with_a_reason(live, store):
    trace_id = "ab" * 16
    good = _span(trace_id, "01" * 8, **{"faultlens.content": "fine"})
    bad = _span(trace_id, "02" * 8, **{"faultlens.media": "{not json"})
    r = HTTP.post(live.url + "/v1/traces", json=_otlp_json(trace_id, [good, bad]))
    assert r.status_code == 400
    assert "faultlens.media" in r.json()["detail"]
    assert store.count_traces() == 0  # the good span in the same batch was not stored either


@pytest.mark.parametrize(
    "body, content_type, status",
    [
        (b"\x0a\xff\xff\xff\xff garbage", "application/x-protobuf", 400),
        (b'{"resourceSpans": [', "application/json", 400),
        (b'"just a string"', "application/json", 400),
        (b"{}", "text/plain", 415),
    ],
)
def test_malformed_bodies_are_rejected_and_store_nothing(live, store, body, content_type, status):
    r = HTTP.post(live.url + "/v1/traces", content=body, headers={"Content-Type": content_type})
    assert r.status_code == status, r.text
    assert r.json()["detail"]
    assert store.count_traces() == 0


def test_oversized_bodies_get_413_and_store_nothing(store, serve):
    server = serve(create_app(store, max_body_bytes=2000))
    trace_id = "cd" * 16
    big = json.dumps(_otlp_json(trace_id, [_span(trace_id, "03" * 8, **{"faultlens.content": "x" * 5000})])).encode()
    # Declared length over the limit: refused before reading.
    r = HTTP.post(server.url + "/v1/traces", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    # Chunked (no Content-Length): refused while streaming.
    def chunks():
        for i in range(0, len(big), 500):
            yield big[i : i + 500]

    r = HTTP.post(server.url + "/v1/traces", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    # Small on the wire, big once inflated.
    r = HTTP.post(server.url + "/v1/traces", content=gzip.compress(big), headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 413 and "decompressed" in r.json()["detail"]
    assert store.count_traces() == 0
    # The same spans under the limit are fine.
    small = json.dumps(_otlp_json(trace_id, [_span(trace_id, "03" * 8, **{"faultlens.content": "x" * 50})])).encode()
    assert HTTP.post(server.url + "/v1/traces", content=small, headers={"Content-Type": "application/json"}).status_code == 200
    assert store.count_traces() == 1


def test_concurrent_clients_lose_no_span(live, store):
    clients, runs_each = 6, 5
    results: dict[int, list[dict]] = {}
    errors = []

    def client(n: int) -> None:
        try:
            provider = sdk_provider(live.url + "/v1/traces", "protobuf" if n % 2 else "json", service=f"client-{n}")
            results[n] = [run_team(provider, query=f"client {n} run {i}") for i in range(runs_each)]
            provider.shutdown()
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    expected = {r["trace_id"]: set(r["steps"].values()) for runs in results.values() for r in runs}
    assert len(expected) == clients * runs_each
    assert store.count_traces() == clients * runs_each
    for trace_id, span_ids in expected.items():
        trace = store.get_trace(trace_id)
        assert {s.span_id for s in trace.steps} == span_ids
        assert trace.task.query.startswith("client ")


def test_a_root_span_with_status_error_fails_the_run_and_queues_attribution(live, store):
    provider = sdk_provider(live.url + "/v1/traces")
    ids = run_team(provider, fail=True)
    provider.shutdown()
    trace_id = ids["trace_id"]
    run = HTTP.get(f"{live.url}/api/runs/{trace_id}").json()
    assert run["outcome"]["success"] is False
    body = wait_for(lambda: (b := HTTP.get(f"{live.url}/api/runs/{trace_id}/attribution").json())["latest"] and b["job"]["state"] == "done" and b)
    assert body["latest"]["step"] == 1 and body["job"]["state"] == "done"


@pytest.mark.parametrize(
    "spoil, field",
    [
        (lambda span: span.attributes.add(key="x").value.__setattr__("double_value", float("nan")), "attributes[0].value.doubleValue"),
        (lambda span: setattr(span, "span_id", b"\x01\x02\x03"), "spanId"),
        (lambda span: setattr(span.status, "code", 9), "status.code"),
        (lambda span: setattr(span, "name", ""), "name"),
    ],
)
def test_a_bad_protobuf_span_rejects_the_whole_batch_naming_the_field(live, store, spoil, field):
    # Protobuf bodies are checked on the parsed message (middleware/otlp/protobuf.py), not by the JSON schema:
    # the same all-or-nothing answer, naming the field.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in (1, 2):
        span = spans.add()
        span.trace_id, span.span_id, span.name = b"\xab" * 16, bytes([n]) * 8, "chat"
        span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000 * 10**9, 1_700_000_001 * 10**9
    spoil(spans[1])
    r = HTTP.post(live.url + "/v1/traces", content=request.SerializeToString(), headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == f"resourceSpans[0].scopeSpans[0].spans[1].{field}"
    assert store.count_traces() == 0  # the good span of the same body was not stored either
    del spans[1]
    r = HTTP.post(live.url + "/v1/traces", content=request.SerializeToString(), headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200, r.text
    assert store.count_traces() == 1


def test_a_small_export_is_answered_while_a_big_one_is_being_stored(store, serve):
    # Small bodies are stored on the event loop, big ones in a thread (`routes_otlp.INLINE_BYTES`). The big ingest
    # below waits until the small export has been answered: if it blocked the loop, the small one never would be.
    app = create_app(store)
    services = app.state.services
    real_ingest, small_answered, big_started = services.ingest_payload, threading.Event(), threading.Event()

    def ingest_payload(payload):
        if len(json.dumps(payload)) > routes_otlp.INLINE_BYTES:
            big_started.set()
            assert small_answered.wait(10), "the small export was not answered while the big one was being stored"
        return real_ingest(payload)

    services.ingest_payload = ingest_payload
    server = serve(app)
    big_id, small_id = "a1" * 16, "b2" * 16
    big = _otlp_json(big_id, [_span(big_id, f"{i:016x}", **{"faultlens.content": "x" * 2000}) for i in range(1, 60)])
    answers: dict[str, int] = {}
    sender = threading.Thread(target=lambda: answers.update(big=HTTP.post(server.url + "/v1/traces", json=big).status_code))
    sender.start()
    assert big_started.wait(10)
    small = HTTP.post(server.url + "/v1/traces", json=_otlp_json(small_id, [_span(small_id, "0f" * 8)]))
    small_answered.set()
    sender.join(20)
    assert small.status_code == 200 and answers == {"big": 200}
    assert _step_count(store, small_id) == 1 and _step_count(store, big_id) == 59
