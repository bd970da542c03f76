"""A real Phoenix server for the tests: `phoenix serve` (SQLite, loopback, offline) in a temporary folder.

The server is `arize-phoenix`, installed in its own venv (`.venv-phoenix`,
`make phoenix`) because its dependencies pin versions our framework extras
exclude (openai>=3 against ag2's openai<3). It is found as
$FAULTLENS_PHOENIX_BIN, else `.venv-phoenix/bin/phoenix` in the repository,
else `phoenix` on PATH. Missing, the tests skip, unless
FAULTLENS_REQUIRE_PHOENIX=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


def phoenix_bin() -> str | None:
    explicit = os.environ.get("FAULTLENS_PHOENIX_BIN")
    if explicit:
        return explicit
    bundled = REPO / ".venv-phoenix" / "bin" / "phoenix"
    if bundled.exists():
        return str(bundled)
    return shutil.which("phoenix")


def require_phoenix() -> str:
    found = phoenix_bin()
    if found is None:
        message = "the Phoenix tests need the Phoenix server: `make phoenix` (installs arize-phoenix into .venv-phoenix)"
        if os.environ.get("FAULTLENS_REQUIRE_PHOENIX") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PhoenixServer:
    """`phoenix serve` on free loopback ports, its data in `workdir`; `stop` and `start` again keep the data."""

    def __init__(self, executable: str, workdir: Path):
        self.executable, self.workdir = executable, workdir
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> PhoenixServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
        env.update(PHOENIX_WORKING_DIR=str(self.workdir), PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(self.grpc_port),
                   PHOENIX_HOST="127.0.0.1", PHOENIX_TELEMETRY_ENABLED="false", PHOENIX_ENABLE_AUTH="false")
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "phoenix.log", "ab")
        self.process = subprocess.Popen([self.executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix serve exited with {self.process.returncode}; see {self.workdir / 'phoenix.log'}")
            try:
                if httpx.get(f"{self.url}/v1/projects", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"phoenix serve did not answer within {timeout:g} s; see {self.workdir / 'phoenix.log'}")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

    # -- what a user's agents and evaluations would do -------------------------------------
    def send_otlp_json(self, document: dict[str, Any], project: str) -> None:
        """Send an OTLP JSON document to Phoenix's collector endpoint (OTLP/HTTP protobuf), into `project`."""
        from google.protobuf.json_format import ParseDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ParseDict(document, ExportTraceServiceRequest())
        for resource_spans in request.resource_spans:
            # (the resource attribute OpenInference's `register(project_name=...)` sets)
            attribute = resource_spans.resource.attributes.add()
            attribute.key, attribute.value.string_value = "openinference.project.name", project
        response = httpx.post(f"{self.url}/v1/traces", content=request.SerializeToString(),
                              headers={"content-type": "application/x-protobuf"}, timeout=30)
        response.raise_for_status()

    def wait_for_spans(self, project: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Phoenix inserts spans in the background: wait until `count` of them are readable."""
        deadline = time.monotonic() + timeout
        while True:
            spans, cursor = [], None
            while True:
                params: dict[str, Any] = {"limit": 1000, "sort": "id", "order": "asc"} | ({"cursor": cursor} if cursor else {})
                response = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params, timeout=30)
                if response.status_code == 404:
                    break
                response.raise_for_status()
                spans += response.json()["data"]
                cursor = response.json().get("next_cursor")
                if not cursor:
                    break
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.3)

    def annotate_trace(self, trace_id: str, name: str, label: str) -> None:
        """A trace annotation, as an evaluation writes one."""
        body = {"data": [{"trace_id": trace_id, "name": name, "annotator_kind": "CODE", "result": {"label": label}}]}
        httpx.post(f"{self.url}/v1/trace_annotations", params={"sync": "true"}, json=body, timeout=30).raise_for_status()

    def span_annotations(self, project: str, span_ids: list[str]) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/v1/projects/{project}/span_annotations", params={"span_ids": span_ids, "limit": 1000}, timeout=30)
        response.raise_for_status()
        return response.json()["data"]


def otlp_spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def with_new_ids(document: dict[str, Any], salt: int) -> tuple[dict[str, Any], str]:
    """The same spans under other trace and span ids (Phoenix keeps a span id once, across projects), and the new trace id (hex)."""
    import base64
    import copy

    def remap(value: str) -> str:
        raw = bytearray(base64.b64decode(value))
        raw[0] ^= salt & 0xFF
        return base64.b64encode(bytes(raw)).decode()

    document = copy.deepcopy(document)
    for span in otlp_spans(document):
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = remap(span[key])
    return document, base64.b64decode(otlp_spans(document)[0]["traceId"]).hex()
