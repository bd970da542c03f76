"""The live gateway, driven by the OpenAI Python SDK over HTTP: runs, the traceparent join, lessons, streaming, errors, a store that is down.

Upstreams are test doubles: a scripted function (`CallableUpstream`), litellm's
`mock_response`, or a local HTTP server that answers like a provider's API
(for errors). Everything else is real: the HTTP server, the OpenAI client,
SSE streaming, the SQLite store, OpenTelemetry spans and their ingest.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest

from faultlens.feedback.gateway_lessons import GatewayLessons
from faultlens.feedback.hooks import parse_lessons_block, record_trace_outcome
from faultlens.feedback.memory import LessonMemory
from faultlens.middleware.capture.live_gateway import Gateway, LESSONS_BEGIN, LESSONS_END, inject_lessons, parse_traceparent
from faultlens.middleware.capture.upstream import CallableUpstream, LiteLLMUpstream, UpstreamError
from faultlens.middleware.model.trace import Lesson, Outcome
from faultlens.middleware.store import open_store
from faultlens.server.gateway_routes import create_gateway_app
from faultlens.server.run import ServerThread

TOOLS = [{"type": "function", "function": {"name": "lookup_population", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
QUESTION = "How many people live in Rome?"


def scripted(agent: str, request: dict) -> dict:
    """A model double: a tool call when tools are offered on a user turn, else a sentence naming the agent."""
    last = request["messages"][-1]
    if request.get("tools") and last["role"] == "user":
        message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "lookup_population", "arguments": json.dumps({"city": "Rome"})}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": f"{agent}: Rome has 2761 thousand people."}
        finish = "stop"
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}


def client(base_url: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="not-used", max_retries=0, **kwargs)


def team(base: str) -> str:
    """Two agents on the OpenAI SDK, each with its own base URL: a researcher with a tool, then a writer."""
    researcher = client(f"{base}/agent/researcher/v1")
    messages = [{"role": "system", "content": "You are the researcher."}, {"role": "user", "content": QUESTION}]
    first = researcher.chat.completions.create(model="any", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"population_thousands": 2761}'}]
    found = researcher.chat.completions.create(model="any", messages=messages).choices[0].message.content
    writer = client(f"{base}/agent/writer/v1")
    return writer.chat.completions.create(model="any", messages=[{"role": "system", "content": "You are the writer."},
                                                                  {"role": "user", "content": found}]).choices[0].message.content


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "runs.db")
    yield s
    s.close()


def test_a_teams_calls_become_one_run_with_its_agents(store):
    gateway = Gateway(CallableUpstream(scripted), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        answer = team(f"{server.url}/run/run-1")
        status = httpx.get(server.url + "/gateway/status").json()
    assert answer == "writer: Rome has 2761 thousand people."
    assert gateway.flush(10)
    trace = store.get_trace("run-1")
    assert [s.agent for s in trace.steps] == ["researcher", "researcher", "writer"]
    assert {a.name for a in trace.agents} == {"researcher", "writer"}
    assert trace.task.query == QUESTION  # the run's first user message
    assert trace.source.framework == "gateway"
    first = trace.steps[0]
    assert first.kind.value == "llm_call" and first.tool_name == "lookup_population" and first.tool_arguments == {"city": "Rome"}
    assert first.usage is not None and (first.usage.input_tokens, first.usage.output_tokens) == (12, 7)
    assert first.metadata["latency_ms"] >= 0 and first.metadata["request"]["tools"] == TOOLS
    assert first.metadata["input_messages"][1] == {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    assert trace.steps[2].content == "writer: Rome has 2761 thousand people."
    assert trace.steps[0].started_at <= trace.steps[1].started_at <= trace.steps[2].started_at
    assert status["calls"] == 3 and status["dropped"] == 0


def test_runs_are_told_apart_by_header_and_by_default(store):
    gateway = Gateway(CallableUpstream(scripted), store, default_run="fallback")
    with ServerThread(create_gateway_app(gateway)) as server:
        for run in ("a", "b"):
            client(f"{server.url}/agent/x/v1", default_headers={"X-Faultlens-Run": run}).chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"task {run}"}])
        client(f"{server.url}/v1").chat.completions.create(model="m", messages=[{"role": "user", "content": "no run"}])
    assert gateway.flush(10)
    assert [len(store.get_trace(r).steps) for r in ("a", "b", "fallback")] == [1, 1, 1]
    assert store.get_trace("fallback").steps[0].agent == "model"  # no agent in the path or a header


def test_traceparent_joins_the_openinference_spans_of_the_same_trace(store):
    """The gateway's step lands in the run the OTLP ingest makes of the client's spans, under the span that made the call."""
    from opentelemetry import propagate
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from faultlens.middleware.ingest.write import ingest

    from faultlens.middleware.spans.record import record_from_readable_span

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = provider.get_tracer("test")
    gateway = Gateway(CallableUpstream(scripted), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        with otel.start_as_current_span("researcher", attributes={"openinference.span.kind": "AGENT", "agent.name": "researcher",
                                                                  "output.value": "I will look it up."}) as agent_span:
            with otel.start_as_current_span("ChatCompletion", attributes={"openinference.span.kind": "LLM",
                                                                         "llm.model_name": "any"}) as llm_span:
                headers: dict[str, str] = {}
                propagate.inject(headers)  # W3C traceparent of the LLM span, as an instrumented HTTP client sends it
                client(f"{server.url}/agent/researcher/v1", default_headers=headers).chat.completions.create(
                    model="any", messages=[{"role": "user", "content": QUESTION}])
    assert gateway.flush(10)
    trace_id = format(agent_span.get_span_context().trace_id, "032x")
    assert parse_traceparent(headers["traceparent"]) == (trace_id, format(llm_span.get_span_context().span_id, "016x"))
    ingest(store, [record_from_readable_span(s) for s in exporter.get_finished_spans()])
    trace = store.get_trace(trace_id)
    mine = [s for s in trace.steps if s.metadata.get("run_from") == "traceparent"]
    theirs = [s for s in trace.steps if s.metadata.get("run_from") != "traceparent"]
    assert len(mine) == 1 and theirs, [s.content for s in trace.steps]
    assert mine[0].parent_span_id == format(llm_span.get_span_context().span_id, "016x")
    assert mine[0].content == "researcher: Rome has 2761 thousand people."


@pytest.mark.parametrize("value", [None, "", "garbage", "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "00-" + "a" * 32 + "-" + "0" * 16 + "-01"])
def test_an_invalid_traceparent_names_no_run(value):
    assert parse_traceparent(value) is None


def lesson(agent: str, situation: str = "questions about how many people live in a city") -> Lesson:
    return Lesson(agent=agent, mode="R.3", situation=situation, mistake="stated a population wrongly",
                  advice="copy the figure the tool returned")


def test_lessons_are_shown_only_to_enabled_agents_and_recorded_on_the_step(store):
    memory = LessonMemory(store)
    for_researcher, for_writer = memory.add(lesson("researcher")), memory.add(lesson("writer"))
    seen: dict[str, dict] = {}

    def upstream(agent: str, request: dict) -> dict:
        seen.setdefault(agent, request)
        return scripted(agent, request)

    lessons = GatewayLessons(memory, enabled=["researcher"])
    gateway = Gateway(CallableUpstream(upstream), store, lessons)
    with ServerThread(create_gateway_app(gateway)) as server:
        team(f"{server.url}/run/r1")
    assert gateway.flush(10)
    system = seen["researcher"]["messages"][0]["content"]
    assert system.startswith("You are the researcher.\n\n" + LESSONS_BEGIN) and system.endswith(LESSONS_END)
    assert [x["id"] for x in parse_lessons_block(system)] == [for_researcher.id]
    assert seen["researcher"]["tools"] == TOOLS  # lessons never touch the tools
    assert LESSONS_BEGIN not in json.dumps(seen["writer"])  # not enabled: its prompt is as sent
    trace = store.get_trace("r1")
    assert [s.lessons for s in trace.steps] == [[for_researcher.id], [for_researcher.id], []]

    store.set_outcome("r1", Outcome(success=True))
    record_trace_outcome(memory, store.get_trace("r1"))  # lesson efficacy, as for the LangGraph team
    assert (memory.get(for_researcher.id).shown, memory.get(for_researcher.id).helped) == (1, 1)
    assert memory.get(for_writer.id).shown == 0

    lessons.enable("writer")
    gateway2 = Gateway(CallableUpstream(upstream), store, lessons)
    seen.clear()
    with ServerThread(create_gateway_app(gateway2)) as server:
        team(f"{server.url}/run/r2")
    assert [x["id"] for x in parse_lessons_block(seen["writer"]["messages"][0]["content"])] == [for_writer.id]


def test_a_lesson_block_changes_only_the_system_text():
    request = [{"role": "user", "content": "hi"}]
    assert inject_lessons(request, "L") == [{"role": "system", "content": f"{LESSONS_BEGIN}\nL\n{LESSONS_END}"}, *request]
    parts = [{"role": "system", "content": [{"type": "text", "text": "You are x."}]}, {"role": "user", "content": "hi"}]
    out = inject_lessons(parts, "L")
    assert out[0]["content"] == [{"type": "text", "text": "You are x."}, {"type": "text", "text": f"{LESSONS_BEGIN}\nL\n{LESSONS_END}"}]
    assert out[1] == parts[1] and parts[0]["content"] == [{"type": "text", "text": "You are x."}]  # input untouched


def test_a_task_no_lesson_matches_gets_no_block(store):
    memory = LessonMemory(store)
    memory.add(lesson("researcher", situation="refund requests for damaged parcels"))
    seen = []
    gateway = Gateway(CallableUpstream(lambda a, r: seen.append(r) or scripted(a, r)), store, GatewayLessons(memory, ["*"]))
    with ServerThread(create_gateway_app(gateway)) as server:
        team(f"{server.url}/run/r")
    assert all(LESSONS_BEGIN not in json.dumps(r) for r in seen) and gateway.status()["lessons_shown"] == 0


def test_streaming_is_passed_through_and_recorded_through_litellm(store):
    text = "Rome has 2761 thousand people, as the registry says."
    gateway = Gateway(LiteLLMUpstream("openai/gpt-4o-mini", mock_response=text), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        chunks = list(client(f"{server.url}/run/s/agent/researcher/v1").chat.completions.create(
            model="any", messages=[{"role": "user", "content": QUESTION}], stream=True))
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text and len(pieces) > 2  # arrived in pieces, not as one message
    assert gateway.flush(10)
    step = store.get_trace("s").steps[0]
    assert step.content == text and step.error is None and step.agent == "researcher"


def test_streamed_tool_calls_are_merged_into_the_step(store):
    gateway = Gateway(CallableUpstream(scripted), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        stream = client(f"{server.url}/run/t/agent/researcher/v1").chat.completions.create(
            model="any", messages=[{"role": "user", "content": QUESTION}], tools=TOOLS, stream=True,
            stream_options={"include_usage": True})
        chunks = list(stream)
    assert any(c.usage is not None for c in chunks)  # asked for: passed through
    assert gateway.flush(10)
    step = store.get_trace("t").steps[0]
    assert step.tool_name == "lookup_population" and step.tool_arguments == {"city": "Rome"}
    assert step.usage is not None and step.usage.output_tokens == 7


class _RefusingProvider(BaseHTTPRequestHandler):
    """A provider's API that answers every chat completion with 429 and its own error body."""

    BODY = json.dumps({"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "requests", "code": "rate_limit_exceeded",
                                 "param": None}}).encode()

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.BODY)))
        self.end_headers()
        self.wfile.write(self.BODY)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_reaches_the_client_unchanged_and_is_recorded(store, stream):
    provider = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingProvider)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    try:
        upstream = LiteLLMUpstream("openai/gpt-4o-mini", api_base=f"http://127.0.0.1:{provider.server_port}/v1", api_key="sk-test",
                                   max_retries=0)
        gateway = Gateway(upstream, store)
        with ServerThread(create_gateway_app(gateway)) as server:
            response = httpx.post(f"{server.url}/run/e/agent/researcher/v1/chat/completions", timeout=30,
                                  json={"model": "any", "stream": stream, "messages": [{"role": "user", "content": QUESTION}]})
    finally:
        provider.shutdown()
    assert response.status_code == 429
    assert response.content == _RefusingProvider.BODY
    assert gateway.flush(10)
    step = store.get_trace("e").steps[0]
    assert step.error is not None and step.error.startswith("upstream 429") and "rate_limit_exceeded" in step.error
    assert gateway.status()["upstream_errors"] == 1


def test_an_upstream_error_of_a_callable_upstream_keeps_its_status_and_body(store):
    def down(agent, request):
        raise UpstreamError(503, b'{"error": "overloaded"}')

    gateway = Gateway(CallableUpstream(down), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        response = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert (response.status_code, response.content) == (503, b'{"error": "overloaded"}')


def test_a_bad_body_is_refused_with_a_reason(store):
    gateway = Gateway(CallableUpstream(scripted), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        assert httpx.post(f"{server.url}/v1/chat/completions", content=b"{not json").status_code == 400
        refused = httpx.post(f"{server.url}/v1/chat/completions", json={"prompt": "x"})
    assert refused.status_code == 400 and "messages" in refused.json()["error"]["message"]
    assert gateway.status()["calls"] == 0


class FlakyStore:
    """A store that refuses every write while `down` (the database unreachable), then recovers."""

    def __init__(self, store):
        self.store = store
        self.down = True

    def __getattr__(self, name):
        attribute = getattr(self.store, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            if self.down:
                raise OSError("database is unreachable")
            return attribute(*args, **kwargs)

        return call


def test_a_store_that_is_down_never_fails_a_call_and_the_step_waits(store):
    flaky = FlakyStore(store)
    gateway = Gateway(CallableUpstream(scripted), flaky)
    with ServerThread(create_gateway_app(gateway)) as server:
        answer = team(f"{server.url}/run/down")
        assert answer == "writer: Rome has 2761 thousand people."
        assert not gateway.flush(0.3)  # the store refuses: the steps wait
        status = httpx.get(server.url + "/gateway/status").json()
        assert status["queued"] == 3 and status["recorded"] == 0 and status["store_errors"] >= 1
        assert "unreachable" in status["last_store_error"]
        flaky.down = False
        assert gateway.flush(10)
    assert len(store.get_trace("down").steps) == 3 and gateway.status()["recorded"] == 3


def test_steps_beyond_the_queue_bound_are_dropped_and_counted(store):
    flaky = FlakyStore(store)
    gateway = Gateway(CallableUpstream(scripted), flaky, max_pending=1)
    with ServerThread(create_gateway_app(gateway)) as server:
        team(f"{server.url}/run/full")
    status = gateway.status()
    assert status["calls"] == 3 and status["dropped"] >= 1 and status["queued"] + status["dropped"] == 3
    gateway.close(0.2)  # shut down with the store still down: what waited is dropped too, and counted
    assert gateway.status()["dropped"] == 3 and gateway.status()["recorded"] == 0


def test_secrets_in_messages_are_redacted_before_the_step_is_stored(store, tmp_path):
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    gateway = Gateway(CallableUpstream(scripted), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        client(f"{server.url}/run/sec/agent/x/v1").chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"my key is {secret}, how many people live in Rome?"}])
    assert gateway.flush(10)
    assert secret not in store.get_trace("sec").model_dump_json()
    assert secret.encode() not in (tmp_path / "runs.db").read_bytes()


def test_lessons_never_change_tools_schema_or_any_other_field(store):
    memory = LessonMemory(store)
    shown = memory.add(lesson("x"))
    seen = []
    gateway = Gateway(CallableUpstream(lambda a, r: seen.append(r) or scripted(a, r)), store, GatewayLessons(memory, ["x"]))
    schema = {"type": "json_schema", "json_schema": {"name": "Answer", "strict": True,
                                                    "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    body = {"model": "m", "messages": [{"role": "system", "content": "You are x."}, {"role": "user", "content": QUESTION}],
            "tools": TOOLS, "tool_choice": "auto", "response_format": schema, "temperature": 0.3, "seed": 7}
    with ServerThread(create_gateway_app(gateway)) as server:
        assert httpx.post(f"{server.url}/run/f/agent/x/v1/chat/completions", json=body).status_code == 200
    sent = seen[0]
    assert {k: v for k, v in sent.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
    assert sent["messages"][1:] == body["messages"][1:]
    assert sent["messages"][0]["content"].startswith("You are x.") and shown.id in sent["messages"][0]["content"]
