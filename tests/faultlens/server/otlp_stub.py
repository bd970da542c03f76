"""A local OTLP/HTTP collector stub for tests: receives protobuf trace exports and keeps their spans."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


@dataclass
class ReceivedSpan:
    trace_id: str  # hex, as OTLP JSON writes it
    span_id: str
    parent_span_id: str
    name: str
    events: list[dict[str, Any]] = field(default_factory=list)  # {name, attributes: {key: python value}}


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    if which in ("string_value", "int_value", "double_value", "bool_value"):
        return getattr(any_value, which)
    return json_format.MessageToDict(any_value)  # arrays, key-value lists, bytes: as OTLP JSON


class OtlpCollectorStub:
    """POST /v1/traces on 127.0.0.1 (a free port); `spans` holds what arrived, in order."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                stub._received(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _received(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        events = [{"name": e.name, "attributes": {kv.key: _value(kv.value) for kv in e.attributes}} for e in span.events]
                        self.spans.append(ReceivedSpan(span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name, events))

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def start(self) -> OtlpCollectorStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
