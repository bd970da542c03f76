"""Phoenix's span shape back to what the instrumentation wrote, and on through the OTLP span mapping."""

from __future__ import annotations

import pytest

from faultlens.middleware.errors import InputError
from faultlens.middleware.spans.traces import traces_from_records
from faultlens.phoenix.records import span_record, unflatten_lists

TRACE = "0af7651916cd43dd8448eb211c80319c"


def phoenix_span(span_id: str, parent: str | None, kind: str, name: str, attributes: dict, status: str = "OK", start: str = "2026-12-03T05:00:00.000100+00:00") -> dict:
    return {"id": f"U3Bhbjo{span_id[-1]}", "name": name, "context": {"trace_id": TRACE, "span_id": span_id}, "span_kind": kind,
            "parent_id": parent, "start_time": start, "end_time": "2026-12-03T05:00:01+00:00", "status_code": status,
            "status_message": "boom" if status == "ERROR" else "", "attributes": attributes, "events": []}


def test_flattened_lists_come_back_as_lists_and_message_keys_stay():
    attrs = unflatten_lists({"participant_names.0": "researcher", "participant_names.1": "writer",
                             "llm.input_messages.0.message.role": "user", "gap.0": "a", "gap.2": "c", "x": 1})
    assert attrs["participant_names"] == ["researcher", "writer"]
    assert attrs["llm.input_messages.0.message.role"] == "user"
    assert attrs["gap.0"] == "a" and attrs["gap.2"] == "c" and "gap" not in attrs  # not a list: kept as given
    assert attrs["x"] == 1


def test_a_span_record_restores_the_span_kind_times_and_status():
    record = span_record(phoenix_span("00f067aa0ba902b7", None, "AGENT", "planner", {"input.value": "What is 2+3?"}, status="ERROR"), project="agents")
    assert record.attributes["openinference.span.kind"] == "AGENT" and record.operation == "invoke_agent"
    assert record.status == "error" and record.status_message == "boom"
    assert record.start_ns == 1796274000000100000  # microseconds kept exactly, no float rounding
    assert record.resource == {"openinference.project.name": "agents"}
    unknown = span_record(phoenix_span("00f067aa0ba902b8", None, "UNKNOWN", "x", {}))
    assert "openinference.span.kind" not in unknown.attributes


def test_phoenix_spans_map_to_steps_and_agents_by_ancestry():
    spans = [
        phoenix_span("00000000000000a1", None, "AGENT", "planner.run", {"agent.name": "planner", "input.value": "Add 2 and 3"}),
        phoenix_span("00000000000000a2", "00000000000000a1", "LLM", "chat", {"llm.output_messages.0.message.role": "assistant",
                     "llm.output_messages.0.message.content": "call add"}, start="2026-12-03T05:00:00.2+00:00"),
        phoenix_span("00000000000000a3", "00000000000000a1", "TOOL", "add", {"tool.name": "add", "input.value": '{"a": 2, "b": 3}',
                     "output.value": "6"}, start="2026-12-03T05:00:00.3+00:00"),
    ]
    (trace,) = traces_from_records([span_record(s) for s in spans], source="phoenix:test")
    assert trace.id == TRACE and trace.task.query == "Add 2 and 3"
    assert [(s.agent, s.kind.value, s.span_id) for s in trace.steps][-2:] == [("planner", "llm_call", "00000000000000a2"), ("planner", "tool_call", "00000000000000a3")]
    assert [a.name for a in trace.agents] == ["planner"]


def test_bad_spans_name_the_span_and_field():
    with pytest.raises(InputError, match=r"span U3Bhbjo1, field 'context'"):
        span_record({"id": "U3Bhbjo1", "context": {}})
    with pytest.raises(InputError, match=r"field 'start_time': not an ISO 8601 time"):
        span_record(phoenix_span("00000000000000a1", None, "AGENT", "x", {}, start="yesterday"))
    with pytest.raises(InputError, match="field 'status_code'"):
        span_record(phoenix_span("00000000000000a1", None, "AGENT", "x", {}, status="MAYBE"))
