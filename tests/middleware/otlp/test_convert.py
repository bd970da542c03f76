"""OTLP JSON import/export: SDK-written files, OpenInference spans, round trips, bad input."""

import json

import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from faultlens.middleware import InputError, StepKind, Trace, open_store, write_jsonl
from faultlens.middleware.otlp.convert import otlp_json_to_records, read_otlp_file, trace_to_otlp
from faultlens.middleware.sources import load_traces
from tests.middleware.model.test_trace import sample_trace


def genai_program_spans():
    """Spans of a program instrumented with the plain OTel SDK and GenAI conventions (not faultlens)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("someone-else")
    with tracer.start_as_current_span("invoke_workflow trip", attributes={"gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": "conv-42", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Book Rome"}]}])}):
        with tracer.start_as_current_span("invoke_agent booker", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booker"}):
            with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5, "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "calling the API"}]}])}):
                pass
            with tracer.start_as_current_span("execute_tool book_flight", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book_flight", "gen_ai.tool.call.arguments": '{"to": "Rome"}'}) as tool:
                tool.set_attribute("gen_ai.tool.call.result", '{"error": "sold out"}')
                tool.set_status(Status(StatusCode.ERROR, "sold out"))
    return exporter.get_finished_spans()


def test_import_of_a_file_written_with_the_sdks_own_encoder(tmp_path):
    request = encode_spans(genai_program_spans())
    path = tmp_path / "sdk.json"
    path.write_text(MessageToJson(request))  # protobuf JSON: base64 ids, enum names
    [trace] = list(read_otlp_file(path))
    assert trace.id == "conv-42" and trace.task.query == "Book Rome"
    assert trace.source.framework == "travel-bot" and trace.source.format == "otlp"
    assert [(s.agent, s.kind, s.tool_name) for s in trace.steps] == [("booker", StepKind.llm_call, None), ("booker", StepKind.tool_call, "book_flight")]
    chat, tool = trace.steps
    assert chat.content == "calling the API" and chat.model == "gpt-4o" and chat.usage.input_tokens == 12
    assert tool.error == "sold out" and tool.tool_arguments == {"to": "Rome"} and tool.tool_result == {"error": "sold out"}
    assert len(tool.span_id) == 16 and tool.parent_span_id is not None


def collector_lines(trace: Trace) -> str:
    """A Collector file-exporter file: one ExportTraceServiceRequest per line, spans split over lines."""
    payload = trace_to_otlp(trace)
    spans = payload["resourceSpans"][0]["scopeSpans"][0]["spans"]
    lines = []
    for chunk in (spans[:2], spans[2:]):
        lines.append(json.dumps({"resourceSpans": [{"resource": payload["resourceSpans"][0]["resource"], "scopeSpans": [{"scope": {"name": "faultlens"}, "spans": chunk}]}]}))
    return "\n".join(lines) + "\n"


def test_trace_to_otlp_round_trips_exactly(tmp_path):
    trace = sample_trace()  # no span ids and no clocks: the export has to invent and mark them
    path = tmp_path / "one.json"
    path.write_text(json.dumps(trace_to_otlp(trace)))
    assert list(read_otlp_file(path)) == [trace]
    lines = tmp_path / "lines.json"
    lines.write_text(collector_lines(trace))
    assert list(read_otlp_file(lines)) == [trace]


def test_live_trace_round_trips(tmp_path):
    from faultlens.middleware import Tracer

    tracer = Tracer(db=tmp_path / "live.db")

    @tracer.tool(name="t")
    def t(x: int) -> dict:
        return {"error": "no"} if x else {"ok": True}

    @tracer.agent(name="a")
    def a() -> str:
        t(0)
        t(1)
        return "said"

    with tracer.run(task="live") as run:
        a()
        run.record_outcome(success=False)
    trace = tracer.store.get_trace(run.id)
    path = tmp_path / "live.json"
    path.write_text(json.dumps(trace_to_otlp(trace)))
    assert list(read_otlp_file(path)) == [trace]


def test_openinference_spans(tmp_path):
    def attr(key, value):
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}

    trace_id = "0af7651916cd43dd8448eb211c80319c"
    spans = [
        {"traceId": trace_id, "spanId": "00f067aa0ba902b7", "name": "AgentExecutor", "startTimeUnixNano": "1000", "endTimeUnixNano": "9000",
         "attributes": [attr("openinference.span.kind", "CHAIN"), attr("input.value", "What is 2+2?"), attr("output.value", "4"), attr("session.id", "sess-1")]},
        {"traceId": trace_id, "spanId": "00f067aa0ba902b8", "parentSpanId": "00f067aa0ba902b7", "name": "math_agent", "startTimeUnixNano": "2000", "endTimeUnixNano": "8000",
         "attributes": [attr("openinference.span.kind", "AGENT"), attr("agent.name", "math_agent"), attr("output.value", "4")]},
        {"traceId": trace_id, "spanId": "00f067aa0ba902b9", "parentSpanId": "00f067aa0ba902b8", "name": "ChatOpenAI", "startTimeUnixNano": "3000", "endTimeUnixNano": "4000",
         "attributes": [attr("openinference.span.kind", "LLM"), attr("llm.model_name", "gpt-4o-mini"),
                        attr("llm.input_messages.0.message.role", "user"), attr("llm.input_messages.0.message.content", "What is 2+2?"),
                        attr("llm.output_messages.0.message.role", "assistant"),
                        attr("llm.output_messages.0.message.tool_calls.0.tool_call.function.name", "calculator"),
                        attr("llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", '{"expr": "2+2"}'),
                        attr("llm.token_count.prompt", 9), attr("llm.token_count.completion", 4)]},
        {"traceId": trace_id, "spanId": "00f067aa0ba902ba", "parentSpanId": "00f067aa0ba902b8", "name": "calculator", "startTimeUnixNano": "5000", "endTimeUnixNano": "6000",
         "attributes": [attr("openinference.span.kind", "TOOL"), attr("tool.name", "calculator"), attr("input.value", '{"expr": "2+2"}'), attr("output.value", "4")]},
    ]
    path = tmp_path / "oi.json"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}))
    [trace] = list(read_otlp_file(path))
    assert trace.id == "sess-1" and trace.task.query == "What is 2+2?" and trace.source.format == "openinference"
    assert [(s.agent, s.kind.value) for s in trace.steps] == [("math_agent", "llm_call"), ("math_agent", "tool_call"), ("math_agent", "message")]
    llm, tool, final = trace.steps
    assert llm.content == '[tool_call] calculator({"expr": "2+2"})' and llm.usage.input_tokens == 9 and llm.model == "gpt-4o-mini"
    assert tool.tool_name == "calculator" and tool.tool_arguments == {"expr": "2+2"} and tool.tool_result == 4
    assert final.content == "4"


@pytest.mark.parametrize(
    "mutate, record, field",
    [
        (lambda s: s.update(spanId="xyz"), "spans[1]", "spanId"),
        (lambda s: s.pop("name"), "spans[1]", "name"),
        (lambda s: s["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}}), "spans[1]", "attributes"),
        (lambda s: s["attributes"].append({"key": "faultlens.media", "value": {"stringValue": "[{\"mime_type\": \"image/png\"}]"}}), "spans[1]", "faultlens.media"),
    ],
)
def test_malformed_otlp_names_record_and_field_and_stores_nothing(tmp_path, mutate, record, field):
    good, bad = sample_trace(), sample_trace()
    payload = trace_to_otlp(bad)
    mutate(payload["resourceSpans"][0]["scopeSpans"][0]["spans"][1])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trace_to_otlp(good)) + "\n" + json.dumps(payload) + "\n")
    store = open_store(tmp_path / "s.db")
    with pytest.raises(InputError) as info:
        store.save_traces(load_traces(f"otlp:{path}"))
    message = str(info.value)
    assert "line 2" in message and record in message and field in message
    assert store.count_traces() == 0


def test_not_otlp_at_all(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="resourceSpans"):
        list(read_otlp_file(path))
    with pytest.raises(InputError, match="resourceSpans"):
        otlp_json_to_records({"resourceSpans": {}})


def test_malformed_jsonl_stores_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    write_jsonl([sample_trace()], path)
    with path.open("a") as handle:
        handle.write('{"task": {"query": "q"}, "steps": [{"index": 0}]}\n')
    store = open_store(tmp_path / "s.db")
    with pytest.raises(InputError) as info:
        store.save_traces(load_traces(str(path)))
    assert "line 2" in str(info.value) and "steps.0.agent" in str(info.value)
    assert store.count_traces() == 0
