"""Fixtures of the Phoenix tests: real smolagents runs as OpenInference spans, and a way to load them into a Phoenix."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from .server import PhoenixServer, otlp_spans, read_json

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
PROJECT = "agents"


@dataclass
class FrameworkRun:
    """One smol_analyst run as smolagents' own OpenInference spans (OTLP JSON), and whether the task failed."""

    name: str
    path: Path
    trace_id: str  # hex, as Phoenix shows it
    root_span: str
    spans: int
    failed: bool


@pytest.fixture(scope="session")
def framework_runs(tmp_path_factory) -> list[FrameworkRun]:
    """Two seed runs of the bundled `smol_analyst` environment (smolagents, offline) and the injected runs that failed."""
    pytest.importorskip("smolagents", reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")
    pytest.importorskip("openinference.instrumentation.smolagents")
    from faultlens.injectors.pipeline import InjectConfig, inject

    folder = tmp_path_factory.mktemp("otlp")
    result = inject(InjectConfig(envs=["smol_analyst"], seeds=2, per_seed=2, seed=0, workers=1, otlp_dir=str(folder)))
    kept = {trace.id for trace in result.traces}
    runs = []
    for path in sorted(folder.glob("*.json")):
        spans = otlp_spans(read_json(path))
        (root,) = [s for s in spans if not s.get("parentSpanId")]
        runs.append(FrameworkRun(path.stem, path, base64.b64decode(root["traceId"]).hex(), base64.b64decode(root["spanId"]).hex(),
                                 len(spans), failed=path.stem in kept))
    assert kept and any(not r.failed for r in runs), "the injection made no failed run, or no successful one"
    return runs


def load_phoenix(server: PhoenixServer, runs: list[FrameworkRun]) -> dict[str, str]:
    """Send the runs to Phoenix, mark each as an evaluation would (correctness), and add one run whose root span is ERROR.

    Returns {Phoenix trace id: why it failed} for the failed ones."""
    for run in runs:
        server.send_otlp_json(read_json(run.path), PROJECT)
    error_trace = send_error_run(server)
    spans = server.wait_for_spans(PROJECT, sum(r.spans for r in runs) + 3)
    assert len(spans) == sum(r.spans for r in runs) + 3
    for run in runs:
        server.annotate_trace(run.trace_id, "correctness", "incorrect" if run.failed else "correct")
    return {run.trace_id: "correctness=incorrect" for run in runs if run.failed} | {error_trace: "status ERROR"}


def send_error_run(server: PhoenixServer, project: str = PROJECT) -> str:
    """A small OpenInference-instrumented run whose tool fails and whose root span ends with status ERROR, over OTLP/HTTP."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": "calculator", "openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{server.url}/v1/traces")))
    tracer = provider.get_tracer("faultlens-tests")
    with tracer.start_as_current_span("planner.run", attributes={"openinference.span.kind": "AGENT", "agent.name": "planner",
                                                                 "input.value": "What is 2 + 3?"}) as root:
        with tracer.start_as_current_span("chat", attributes={"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                                                              "llm.input_messages.0.message.content": "What is 2 + 3?",
                                                              "llm.output_messages.0.message.role": "assistant",
                                                              "llm.output_messages.0.message.content": "I will call add(2, 3)."}):
            pass
        with tracer.start_as_current_span("add", attributes={"openinference.span.kind": "TOOL", "tool.name": "add",
                                                             "input.value": '{"a": 2, "b": "3"}'}) as tool:
            tool.set_status(Status(StatusCode.ERROR, "TypeError: unsupported operand type(s) for +: 'int' and 'str'"))
        root.set_status(Status(StatusCode.ERROR, "the add tool failed"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id
