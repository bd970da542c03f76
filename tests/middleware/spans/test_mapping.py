"""The span → step mapping (what the live processor, the OTLP importer and the server share)."""

import json

import pytest

from faultlens.middleware import InputError, StepKind
from faultlens.middleware.spans.mapping import span_to_step
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.spans.traces import traces_from_records

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def record(span_id, name, parent=None, start=1, end=2, status="unset", message=None, **attributes):
    return SpanRecord(trace_id=TRACE, span_id=span_id, parent_id=parent, name=name, start_ns=start * 10**9, end_ns=end * 10**9, attributes=attributes, status=status, status_message=message)


def oi(span_id, name, kind, parent=None, start=1, end=2, **attributes):
    return record(span_id, name, parent=parent, start=start, end=end, **{"openinference.span.kind": kind, **attributes})


def sid(n):
    return f"{n:016x}"


def test_workflow_and_silent_agent_spans_are_not_steps():
    assert span_to_step(record("a" * 16, "invoke_workflow w", **{"gen_ai.operation.name": "invoke_workflow"})) is None
    assert span_to_step(record("b" * 16, "invoke_agent x", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"})) is None
    assert span_to_step(record("c" * 16, "GET /health")) is None


def test_agent_output_is_placed_at_the_end_of_its_span():
    step = span_to_step(record("b" * 16, "invoke_agent x", start=1, end=5, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}])}))
    assert step.kind is StepKind.message and step.content == "done" and step.started_at == 5.0 and step.metadata["span_started_at"] == 1.0


def test_bad_attribute_names_span_and_field():
    with pytest.raises(InputError) as info:
        span_to_step(record("d" * 16, "chat m", **{"gen_ai.operation.name": "chat", "gen_ai.output.messages": "{not json"}), source="server", label="batch 3")
    assert str(info.value).startswith("server, record batch 3, field 'gen_ai.output.messages'")
    # An infinite token count is a bad value too, not a crash (Hypothesis found it, issue #17).
    with pytest.raises(InputError) as info:
        span_to_step(record("e" * 16, "chat m", **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": float("inf")}), source="server", label="batch 4")
    assert str(info.value).startswith("server, record batch 4, field 'gen_ai.usage.input_tokens'")


def test_grouping_chains_are_no_steps_but_observations_are():
    assert span_to_step(oi(sid(1), "turn", "CHAIN")) is None
    assert span_to_step(oi(sid(1), "run_stream", "CHAIN", **{"output.value": '{"messages": []}', "output.mime_type": "application/json"})) is None
    step = span_to_step(oi(sid(1), "Step 1", "CHAIN", start=1, end=3, **{"output.value": "Execution logs:\n5"}))
    assert step.kind is StepKind.tool_result and step.content == "Execution logs:\n5" and step.started_at == 3.0  # said when the step ends
    # a chain that only repeats its tool's output (smolagents' ToolCallingAgent steps) is none
    chain = oi(sid(1), "Step 1", "CHAIN", start=1, end=3, **{"output.value": "Sunny"})
    tool = oi(sid(2), "SimpleTool", "TOOL", parent=sid(1), **{"tool.name": "get_weather", "output.value": "Sunny"})
    (trace,) = traces_from_records([chain, tool])
    assert [s.tool_name for s in trace.steps] == ["get_weather"]


def test_tool_arguments_are_read_from_input_value_before_tool_parameters():
    autogen = span_to_step(oi(sid(1), "researcher.lookup", "TOOL", **{"tool.name": "lookup", "tool.parameters": '{"city": "Paris"}', "input.value": '{"city": "Paris"}'}))
    assert autogen.tool_arguments == {"city": "Paris"} and "tool_parameters" not in autogen.metadata
