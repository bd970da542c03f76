"""The one SQL store on both backends (the `store` fixture runs each test on SQLite and on PostgreSQL)."""

import json

import pytest

from faultlens.middleware import Attribution, GoldLabel, Outcome, Step, Task, Trace
from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.store.ids import stored_id
from faultlens.middleware.store.migrations import MIGRATIONS, statements
from faultlens.middleware.store import STORE_SCHEMA_VERSION, TraceNotFound
from tests.middleware.store.test_store import raw

# A run id as a client may send one: its conversation id with an API key pasted into it.
SECRET_RUN = "support chat AKIAIOSFODNN7EXAMPLE"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _span(span_id: str, parent: str | None, operation: str, start: int, **attributes) -> SpanRecord:
    return SpanRecord(trace_id=TRACE, span_id=span_id, parent_id=parent, name=operation, start_ns=start, end_ns=start + 1,
                      attributes={"gen_ai.conversation.id": SECRET_RUN, "gen_ai.operation.name": operation, **attributes})


def test_a_run_whose_id_holds_a_secret_keeps_its_steps_agents(store):
    """Issue #30: the span tree is written and looked up under the same stored id, so steps that arrive
    before their agent's span are given that agent when it comes (in a later batch)."""
    agent = _span("a" * 16, None, "invoke_agent", 1, **{"gen_ai.agent.name": "planner"})
    chat = _span("c" * 16, "a" * 16, "chat", 2, **{
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "book a room"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}])})
    tool = _span("d" * 16, "a" * 16, "execute_tool", 4, **{"gen_ai.tool.name": "book", "gen_ai.tool.call.arguments": "{}"})
    ingest(store, [chat, tool])
    assert store.span_links(SECRET_RUN, span_ids=["c" * 16, "d" * 16])  # found by the id the client knows
    ingest(store, [agent])

    stored = store.get_trace(SECRET_RUN)
    assert [step.agent for step in stored.steps] == ["planner", "planner"]
    assert [a.name for a in stored.agents] == ["planner"]
    assert store.first_agent_spans(SECRET_RUN, ["planner", "nobody"]) == {"planner": "a" * 16}
    assert store.steps_waiting_on(SECRET_RUN, ["a" * 16]) == []  # nothing left waiting for its agent
    # ...and the secret is in no table: every row is under the stored id.
    assert stored.id == stored_id(SECRET_RUN) != SECRET_RUN
    for table, column in (("traces", "id"), ("steps", "trace_id"), ("span_links", "trace_id")):
        assert {value for (value,) in raw(store, f"SELECT {column} FROM {table}")} == {stored.id}, table


def test_every_look_up_by_a_secret_id_finds_what_was_written_under_it(store):
    store.begin_trace(Trace(id=SECRET_RUN, task=Task(query="")))
    store.add_steps(SECRET_RUN, [Step(index=0, agent="a", span_id="1" * 16, started_at=1.0)])
    store.add_steps(SECRET_RUN, [Step(index=0, agent="b", span_id="2" * 16, started_at=2.0)])
    store.fill_run_query(SECRET_RUN, "the task")
    store.set_outcome(SECRET_RUN, Outcome(success=False))
    store.set_gold(SECRET_RUN, GoldLabel(agent="b", step=1, reason="wrong"))
    store.save_attribution(Attribution(trace_id=SECRET_RUN, method="heuristic", agent="b", step=1))
    store.submit_job(SECRET_RUN)
    assert store.has_trace(SECRET_RUN) and store.get_outcome(SECRET_RUN).success is False
    trace = store.get_trace(SECRET_RUN)
    assert trace.task.query == "the task" and [s.agent for s in trace.steps] == ["a", "b"] and trace.gold.agent == "b"
    assert [a.step for a in store.attributions(SECRET_RUN)] == [1]
    assert store.get_job(SECRET_RUN).state == "queued" and store.claim_job("w", lease=30, max_attempts=3).trace_id == trace.id
    store.set_gold(SECRET_RUN, None)
    store.delete_step(SECRET_RUN, "1" * 16)
    assert [s.agent for s in store.get_trace(SECRET_RUN).steps] == ["b"]
    store.delete_trace(SECRET_RUN)
    assert not store.has_trace(SECRET_RUN)
    with pytest.raises(TraceNotFound):
        store.set_outcome(SECRET_RUN, Outcome(success=True))


def test_migrations_are_declared_once_and_each_backend_runs_its_own_words(store):
    assert sorted(MIGRATIONS) == list(range(1, STORE_SCHEMA_VERSION + 1))
    sql = " ".join(statements(1, store._d) + statements(5, store._d))
    assert "{" not in sql  # every field filled in
    if store._d.name == "postgresql":
        assert "DOUBLE PRECISION" in sql and "traces_created" in sql and "IF NOT EXISTS lost" in sql
    else:
        assert "DOUBLE PRECISION" not in sql and "traces_created" not in sql and "ADD COLUMN lost" in sql
