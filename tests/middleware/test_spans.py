"""The span → step mapping and incremental ingestion (what the live processor and the server use)."""

import json

import pytest

from faultlens.middleware import InputError, StepKind, open_store
from faultlens.middleware.spans import SpanRecord, ingest, span_to_step

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def record(span_id, name, parent=None, start=1, end=2, status="unset", message=None, **attributes):
    return SpanRecord(trace_id=TRACE, span_id=span_id, parent_id=parent, name=name, start_ns=start * 10**9, end_ns=end * 10**9, attributes=attributes, status=status, status_message=message)


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


def test_ingest_writes_children_before_their_root_and_is_idempotent(tmp_path):
    store = open_store(tmp_path / "i.db")
    tool = record("1" * 16, "execute_tool search", parent="2" * 16, start=2, end=3, status="error", message="timeout",
                  **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.agent.name": "finder", "gen_ai.conversation.id": "c1"})
    # children end (and arrive) first: the trace gets a placeholder header
    assert ingest(store, [tool]) == ["c1"]
    assert store.get_trace("c1").task.query == ""
    ingest(store, [tool])  # the same span again changes nothing
    root = record("2" * 16, "invoke_workflow w", start=1, end=4, **{"gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": "c1", "gen_ai.input.messages": json.dumps([{"role": "user", "content": "find it"}])})
    ingest(store, [root])
    trace = store.get_trace("c1")
    assert trace.task.query == "find it"
    assert [(s.agent, s.tool_name, s.error) for s in trace.steps] == [("finder", "search", "timeout")]


def test_ingest_of_a_bad_batch_writes_nothing(tmp_path):
    store = open_store(tmp_path / "i.db")
    good = record("1" * 16, "chat m", **{"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c2"})
    bad = record("2" * 16, "chat m", **{"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c2", "faultlens.step.kind": "dance"})
    with pytest.raises(InputError, match="faultlens.step.kind"):
        ingest(store, [good, bad])
    assert store.count_traces() == 0
