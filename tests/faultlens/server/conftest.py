"""Fixtures for the server tests: a real uvicorn server on loopback, and runs sent with the OpenTelemetry SDK."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from faultlens.middleware.model.trace import Attribution, Candidate
from faultlens.server import ServerThread, create_app
from faultlens.middleware.store import Store, open_store


# One client for all tests: creating an httpx client builds an SSL context (~0.1 s).
HTTP = httpx.Client(timeout=30)


class JsonOTLPExporter(SpanExporter):
    """OTLP/HTTP with the JSON encoding, for tests.

    The installed OpenTelemetry SDK's `OTLPSpanExporter` (HTTP) sends protobuf
    only, and the JSON exporter on PyPI pins versions that conflict with it, so
    this one encodes spans with the SDK's own encoder (`encode_spans`) and
    writes the OTLP JSON form: lowerCamelCase keys, integer enums and — unlike
    protobuf's generic JSON mapping — hex trace and span ids.
    """

    def __init__(self, endpoint: str, headers: dict[str, str] | None = None):
        self.endpoint = endpoint
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.responses: list[httpx.Response] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = encode_spans(spans)
        payload = json_format.MessageToDict(request, use_integers_for_enums=True)
        for rs_dict, rs in zip(payload["resourceSpans"], request.resource_spans):
            for ss_dict, ss in zip(rs_dict["scopeSpans"], rs.scope_spans):
                for span_dict, span in zip(ss_dict["spans"], ss.spans):
                    span_dict["traceId"] = span.trace_id.hex()
                    span_dict["spanId"] = span.span_id.hex()
                    if span.parent_span_id:
                        span_dict["parentSpanId"] = span.parent_span_id.hex()
        response = HTTP.post(self.endpoint, content=json.dumps(payload), headers=self.headers, timeout=30)
        self.responses.append(response)
        return SpanExportResult.SUCCESS if response.status_code == 200 else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def sdk_provider(endpoint: str, encoding: str = "protobuf", token: str | None = None, service: str = "test-agent") -> TracerProvider:
    """A TracerProvider exporting every finished span to `endpoint` over OTLP/HTTP."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    exporter: SpanExporter
    if encoding == "protobuf":
        exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=30)
    else:
        exporter = JsonOTLPExporter(endpoint, headers)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def run_team(provider: TracerProvider, *, query: str = "What is 17 * 23?", fail: bool = False, root_error: bool | None = None, secret: str | None = None, image_png: str | None = None,
             conversation: str | None = None) -> dict:
    """A small planner→solver→calculator run recorded with GenAI-convention spans. Returns ids.

    fail: the solver calls the calculator with the wrong operands and answers 544;
    root_error: the root span ends with status ERROR (default: same as fail);
    conversation: every span carries this `gen_ai.conversation.id` (the run is keyed by it, not by its OTel trace id).
    """
    tracer = _in_conversation(provider.get_tracer("tests.server"), conversation)
    ids: dict = {"steps": {}}
    with tracer.start_as_current_span(
        "invoke_workflow math-team",
        attributes={"gen_ai.operation.name": "invoke_workflow", "faultlens.task": json.dumps({"query": query})},
    ) as root:
        ids["trace_id"] = format(root.get_span_context().trace_id, "032x")
        with tracer.start_as_current_span(
            "chat planner",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.agent.name": "planner",
                "gen_ai.request.model": "mock-model",
                "faultlens.content": "Plan: ask the solver to multiply 17 by 23.",
                **({"faultlens.media": json.dumps([{"mime_type": "image/png", "data": image_png, "caption": "the worksheet"}])} if image_png else {}),
            },
        ) as span:
            ids["steps"]["plan"] = format(span.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "execute_tool calculator",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.agent.name": "solver",
                "gen_ai.tool.name": "calculator",
                "gen_ai.tool.call.arguments": json.dumps({"expression": "17 * 32" if fail else "17 * 23"}),
                "gen_ai.tool.call.result": "544" if fail else "391",
                **({"api_key": secret, "faultlens.content": f"called with Authorization: Bearer {secret}"} if secret else {}),
            },
        ) as span:
            ids["steps"]["tool"] = format(span.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "chat solver",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.agent.name": "solver",
                "faultlens.content": "The answer is 544." if fail else "The answer is 391.",
                "faultlens.step.kind": "final_answer",
            },
        ) as span:
            ids["steps"]["answer"] = format(span.get_span_context().span_id, "016x")
        if fail if root_error is None else root_error:
            root.set_status(Status(StatusCode.ERROR, "wrong answer"))
    provider.force_flush()
    return ids


class _in_conversation:
    """A tracer whose spans all carry `gen_ai.conversation.id` (none when `conversation` is None)."""

    def __init__(self, tracer, conversation: str | None):
        self.tracer, self.conversation = tracer, conversation

    def start_as_current_span(self, name: str, attributes: dict | None = None, **kwargs):
        extra = {"gen_ai.conversation.id": self.conversation} if self.conversation else {}
        return self.tracer.start_as_current_span(name, attributes={**(attributes or {}), **extra}, **kwargs)


def blame_tool_step(store: Store) -> Callable[[str], Attribution]:
    """Test double for on_failure (stands in for attributors.get(...).attribute): blames the first tool step; returns what it saved."""

    def on_failure(trace_id: str) -> Attribution:
        trace = store.get_trace(trace_id)
        step = next(s for s in trace.steps if s.tool_name)
        attribution = Attribution(
            trace_id=trace_id,
            method="test-double",
            agent=step.agent,
            step=step.index,
            mode="A.2",
            reason="the calculator was called with 17 * 32 instead of 17 * 23",
            confidence=0.9,
            ranking=[Candidate(step=step.index, score=0.9, agent=step.agent), Candidate(step=len(trace.steps) - 1, score=0.1)],
        )
        store.save_attribution(attribution)
        return attribution

    return on_failure


@pytest.fixture
def store(store_target) -> Iterator[Store]:
    """Every server test runs on SQLite and on PostgreSQL (tests/conftest.py: store_target)."""
    s = open_store(store_target)
    yield s
    s.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """serve(app, host=..., token=...) → a started ServerThread; all are stopped at the end."""
    started: list[ServerThread] = []

    def start(app, **kwargs) -> ServerThread:
        server = ServerThread(app, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def live(store, serve) -> ServerThread:
    """The app over `store` with the test-double on_failure, on a free loopback port."""
    return serve(create_app(store, on_failure=blame_tool_step(store)))


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
