"""The attribution export follows what was saved, with the OTel trace id stored at ingest, in every set-up.

Each run is keyed by a conversation id of 32 hex digits that is no OTel trace
id, and spans two OTel traces (an earlier turn, then the team), so an export
that took the run's id, or a trace id from another process's memory, would be
caught: the evaluation span must be a child of the blamed span, in that span's
own OTel trace. On SQLite and PostgreSQL (the `store` fixture).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from faultlens.cli import cli
from faultlens.middleware.store import Store, open_store
from faultlens.wiring import build_app
from faultlens.server import EvaluationExporter, create_app, otlp_http_exporter

from .conftest import HTTP, blame_tool_step, run_team, sdk_provider, wait_for
from .otlp_stub import OtlpCollectorStub, ReceivedSpan

ROOT = Path(__file__).resolve().parents[3]
LAST_STEP = "baseline:last-step"  # a real, offline method: blames the run's final answer


@pytest.fixture
def collector():
    stub = OtlpCollectorStub().start()
    yield stub
    stub.stop()


def _failed_conversation(provider: TracerProvider) -> dict:
    """A failed run in conversation C: an earlier turn (its own OTel trace), then the team's run (another)."""
    conversation = uuid.uuid4().hex
    tracer = provider.get_tracer("tests.export")
    with tracer.start_as_current_span("chat planner", attributes={
        "gen_ai.operation.name": "chat", "gen_ai.agent.name": "planner", "gen_ai.conversation.id": conversation,
        "faultlens.content": "Hello; I will plan the multiplication.",
    }) as span:
        earlier = format(span.get_span_context().trace_id, "032x")
    provider.force_flush()
    ids = run_team(provider, fail=True, conversation=conversation)
    assert earlier != ids["trace_id"] != conversation
    return {**ids, "run": conversation, "earlier_trace_id": earlier}


def _exports(collector: OtlpCollectorStub, store: Store, ids: dict, n: int = 1) -> list[ReceivedSpan]:
    """The `n` evaluation spans the collector got once the run's job is done, each checked against the store."""
    wait_for(lambda: (job := store.get_job(ids["run"])) is not None and job.state == "done", timeout=60)
    spans = collector.received()
    assert len(spans) == n, spans
    trace = store.get_trace(ids["run"])
    saved = {a.id: a for a in store.attributions(ids["run"])}
    for span in spans:
        (event,) = span.events
        attribution = saved[event["attributes"]["faultlens.attribution.id"]]
        assert span.name == f"gen_ai.evaluation faultlens.{attribution.method}" and event["name"] == "gen_ai.evaluation.result"
        # A child of the blamed span, in that span's own OTel trace (not the conversation id, not the earlier turn's trace).
        assert span.parent_span_id == trace.steps[attribution.step].span_id
        assert span.trace_id == ids["trace_id"]
    return spans


def test_workers_0_leaves_the_job_and_its_export_to_a_faultlens_worker(store, store_target, serve, collector, monkeypatch):
    server = serve(build_app(store, method=LAST_STEP, workers=0, export_endpoint=collector.url))
    ids = _failed_conversation(sdk_provider(server.url + "/v1/traces"))
    assert wait_for(lambda: store.get_job(ids["run"])).state == "queued"
    assert HTTP.get(f"{server.url}/api/worker").json()["workers"] == 0 and collector.received() == []

    monkeypatch.setattr(signal, "signal", lambda *args: None)  # the worker's Ctrl-C handling is not for pytest's process
    result = CliRunner().invoke(cli, ["worker", "--db", store_target, "--method", LAST_STEP, "--poll", "0.05", "--exit-when-idle",
                                      "--export-otlp", collector.url])
    assert result.exit_code == 0, result.output
    (span,) = _exports(collector, store, ids)
    assert span.parent_span_id == ids["steps"]["answer"]
    assert span.events[0]["attributes"]["faultlens.attribution.method"] == LAST_STEP


def test_a_separate_worker_process_exports_what_it_attributes(store, store_target, serve, collector, tmp_path):
    # The server that saw the spans is gone before the worker starts: nothing but the store is shared.
    server = serve(create_app(store, on_failure=blame_tool_step(store), workers=0))
    ids = _failed_conversation(sdk_provider(server.url + "/v1/traces"))
    wait_for(lambda: store.get_job(ids["run"]))
    server.stop()

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    worker = subprocess.run(
        [sys.executable, "-m", "faultlens.cli", "worker", "--db", store_target, "--method", LAST_STEP, "--poll", "0.05",
         "--exit-when-idle", "--export-otlp", collector.url],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert worker.returncode == 0, worker.stderr
    assert "1 job(s) done" in worker.stderr
    (span,) = _exports(collector, store, ids)
    assert span.parent_span_id == ids["steps"]["answer"]


def test_after_a_restart_the_server_exports_under_the_stored_trace_id(store, store_target, serve, collector):
    before = open_store(store_target)
    first = serve(create_app(before, on_failure=blame_tool_step(before), workers=0))  # stops before attributing anything
    ids = _failed_conversation(sdk_provider(first.url + "/v1/traces"))
    wait_for(lambda: before.get_job(ids["run"]))
    first.stop()
    before.close()

    restarted = serve(create_app(store, on_failure=blame_tool_step(store), evaluation_exporter=EvaluationExporter(otlp_http_exporter(collector.url))))
    (span,) = _exports(collector, store, ids)  # the job left queued is attributed and exported by the new process
    assert span.parent_span_id == ids["steps"]["tool"]
    # Attributed again on purpose: a second attribution, exported the same way; the first is not sent twice.
    assert HTTP.post(f"{restarted.url}/api/runs/{ids['run']}/attribute").json()["queued"]
    spans = _exports(collector, store, ids, n=2)
    assert spans[0].events[0]["attributes"]["faultlens.attribution.id"] != spans[1].events[0]["attributes"]["faultlens.attribution.id"]
    assert [s.parent_span_id for s in spans] == [ids["steps"]["tool"]] * 2


class RoundRobin(SpanExporter):
    """Each export (one span: SimpleSpanProcessor) goes to the next endpoint."""

    def __init__(self, endpoints: Sequence[str]):
        self.exporters = [OTLPSpanExporter(endpoint=e, timeout=30) for e in endpoints]
        self.sent: list[tuple[str, int]] = []  # (span name, which endpoint)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        n = len(self.sent) % len(self.exporters)
        self.sent.extend((span.name, n) for span in spans)
        return self.exporters[n].export(spans)

    def shutdown(self) -> None:
        for exporter in self.exporters:
            exporter.shutdown()


def test_two_servers_on_one_store_the_one_that_attributes_exports(store, store_target, serve, collector):
    other = open_store(store_target)
    try:
        ingest_only = serve(create_app(other, on_failure=blame_tool_step(other), workers=0))
        attributing = serve(create_app(store, on_failure=blame_tool_step(store), evaluation_exporter=EvaluationExporter(otlp_http_exporter(collector.url))))
        spread = RoundRobin([ingest_only.url + "/v1/traces", attributing.url + "/v1/traces"])
        provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
        provider.add_span_processor(SimpleSpanProcessor(spread))
        ids = _failed_conversation(provider)
        # The blamed span reached only the server that does not attribute.
        assert ("execute_tool calculator", 0) in spread.sent and ("execute_tool calculator", 1) not in spread.sent
        (span,) = _exports(collector, store, ids)
        assert span.parent_span_id == ids["steps"]["tool"]
        assert span.events[0]["attributes"]["faultlens.attribution.method"] == "test-double"
    finally:
        other.close()
