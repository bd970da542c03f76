"""Incremental ingestion: spans written into a store as they arrive, children before parents, batch by batch."""

import json

import pytest

from faultlens.middleware import InputError, open_store
from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.store.redact import redact_id
from tests.middleware.spans.test_mapping import TRACE, oi, record, sid


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


def test_steps_get_their_agent_when_the_ancestor_arrives_later(tmp_path):
    store = open_store(tmp_path / "i.db")
    root = oi(sid(1), "Agent workflow", "AGENT", start=1, end=9)
    agent = oi(sid(2), "Triage", "AGENT", parent=sid(1), start=2, end=8, **{"agent.name": "Triage"})
    turn = oi(sid(3), "turn", "CHAIN", parent=sid(2), start=3, end=7)
    llm = oi(sid(4), "generation", "LLM", parent=sid(3), start=4, end=5, **{
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "Weather in Paris?",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Handing over."})
    tool = oi(sid(5), "get_weather", "TOOL", parent=sid(3), start=5, end=6, **{"tool.name": "get_weather", "input.value": '{"city": "Paris"}', "output.value": "Sunny"})
    trace_id = TRACE
    ingest(store, [llm])
    trace = store.get_trace(trace_id)
    assert [s.agent for s in trace.steps] == ["agent"]  # no service name on these records: the default
    assert trace.task.query == "Weather in Paris?"  # the first user message, until the root says otherwise
    ingest(store, [tool])
    ingest(store, [turn])  # still no agent above: both steps now wait on Triage
    assert [s.agent for s in store.get_trace(trace_id).steps] == ["agent", "agent"]
    ingest(store, [agent])
    trace = store.get_trace(trace_id)
    assert [(s.agent, s.tool_name, s.content) for s in trace.steps] == [("Triage", None, "Handing over."), ("Triage", "get_weather", "Sunny")]
    assert trace.steps[1].tool_arguments == {"city": "Paris"}
    assert store.list_traces(agent="Triage")[0].agents == ["Triage"]  # the stored columns, not only the read trace
    ingest(store, [root])
    trace = store.get_trace(trace_id)
    assert trace.agent_names == ["Triage"] and trace.task.query == "Weather in Paris?"
    # the same spans at once give the same run
    other = open_store(tmp_path / "j.db")
    ingest(other, [root, agent, turn, llm, tool])
    assert other.get_trace(trace_id).model_dump() == trace.model_dump()


def test_an_explicit_task_and_agent_list_are_kept(tmp_path):
    store = open_store(tmp_path / "i.db")
    llm = oi(sid(4), "generation", "LLM", parent=sid(1), start=2, end=3, **{"agent.name": "b", "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hint"})
    root = record(sid(1), "invoke_workflow w", start=1, end=4, **{"gen_ai.operation.name": "invoke_workflow", "faultlens.task": json.dumps({"query": "the task"}),
                                                               "faultlens.agents": json.dumps([{"name": "a"}, {"name": "b", "role": "solver"}])})
    ingest(store, [llm])
    ingest(store, [root])
    trace = store.get_trace(TRACE)
    assert trace.task.query == "the task"
    assert [(a.name, a.role) for a in trace.agents] == [("a", ""), ("b", "solver")]


def test_deleting_a_run_deletes_its_span_links(tmp_path):
    store = open_store(tmp_path / "i.db")
    ingest(store, [oi(sid(4), "generation", "LLM", parent=sid(3))])
    assert store.span_links(TRACE)
    store.delete_trace(TRACE)
    assert store.span_links(TRACE) == []


def test_an_explicit_agent_list_from_an_earlier_batch_is_kept(tmp_path):
    store = open_store(tmp_path / "i.db")
    root = record(sid(1), "invoke_workflow w", start=1, end=4, **{"gen_ai.operation.name": "invoke_workflow", "faultlens.agents": json.dumps([{"name": "a", "role": "lead"}])})
    late = oi(sid(2), "helper.run", "AGENT", parent=sid(1), start=2, end=3, **{"output.value": "done"})
    ingest(store, [root])
    ingest(store, [late])  # an agent span after the header: the given list stays as given
    assert [(a.name, a.role) for a in store.get_trace(TRACE).agents] == [("a", "lead"), ("helper", "")]  # (the step's agent is added on read)
    assert store.list_traces()[0].agents == ["a"]


def test_run_agents_follow_each_agents_first_span_whatever_the_batches(store_target):
    """Agents are listed by their first span, also when that span arrives after later spans of the same agent (both stores)."""

    def span(sid: str, agent: str, start: int, parent: str | None = "r0") -> SpanRecord:
        return SpanRecord(trace_id="t" * 32, span_id=sid, parent_id=parent, name="chat", start_ns=start, end_ns=start + 1,
                          attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": agent, "gen_ai.conversation.id": "run-order"})

    store = open_store(store_target)
    ingest(store, [span("s1", "late", 10)])
    ingest(store, [span("s2", "early", 20)])
    assert [a.name for a in store.get_trace("run-order").agents] == ["late", "early"]
    ingest(store, [span("s3", "late", 30)])  # not the first span of its agent: nothing to change
    assert [a.name for a in store.get_trace("run-order").agents] == ["late", "early"]
    ingest(store, [span("s0", "early", 5)])  # an earlier first span of a known agent reorders the list
    assert [a.name for a in store.get_trace("run-order").agents] == ["early", "late"]


# -- issue #33: the span tree (span_links) holds no secret, and is found under the run's stored id ----------
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def _chat(span_id: str, parent: str | None, start: int, conversation: str, **attributes) -> SpanRecord:
    return SpanRecord(trace_id=TRACE, span_id=span_id, parent_id=parent, name="chat", start_ns=start, end_ns=start + 1,
                      attributes={"gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation, **attributes})


def _agent(span_id: str, name: str, start: int, conversation: str) -> SpanRecord:
    return SpanRecord(trace_id=TRACE, span_id=span_id, parent_id=None, name=f"invoke_agent {name}", start_ns=start, end_ns=start + 100,
                      attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "gen_ai.conversation.id": conversation})


def _link_text(store) -> str:
    from tests.middleware.store.test_store import raw

    return "\n".join(map(str, raw(store, "SELECT * FROM span_links")))


def test_span_links_hold_no_secret_in_agent_or_task(store_target):
    store = open_store(store_target)
    agent = f"planner {AWS_KEY}"
    question = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"deploy with {AWS_KEY}"}]}])
    ingest(store, [_chat("c" * 16, "a" * 16, 5, "run-links", **{"gen_ai.input.messages": question}), _agent("a" * 16, agent, 1, "run-links")])
    assert _link_text(store).count("run-links") >= 2  # the links are there...
    assert AWS_KEY not in _link_text(store)  # ...without the key
    trace = store.get_trace("run-links")
    assert [s.agent for s in trace.steps] == [redact_id(agent)] and trace.agent_names == [redact_id(agent)]


def test_a_step_finds_its_agent_in_an_earlier_batch_when_the_run_id_holds_a_secret(store_target):
    """The links are written under the run's stored (hashed) id and must be read under it too."""
    store = open_store(store_target)
    run = f"conv {AWS_KEY}"
    ingest(store, [_agent("a" * 16, "Planner", 1, run)])
    ingest(store, [_chat("c" * 16, "a" * 16, 5, run)])  # its agent span came in the batch before
    trace = store.get_trace(run)
    assert trace.id == redact_id(run)
    assert [s.agent for s in trace.steps] == ["Planner"] and trace.agent_names == ["Planner"]


def test_a_step_given_its_agent_later_gets_the_agents_hashed_name(store_target):
    """A step stored before its agent span is given the agent when it arrives: hashed like every stored agent name."""
    from tests.middleware.store.test_store import raw

    store = open_store(store_target)
    agent = f"planner {AWS_KEY}"
    ingest(store, [_chat("c" * 16, "a" * 16, 5, "run-late")])
    ingest(store, [_agent("a" * 16, agent, 1, "run-late")])
    assert [s.agent for s in store.get_trace("run-late").steps] == [redact_id(agent)]
    assert AWS_KEY not in "\n".join(map(str, raw(store, "SELECT * FROM steps")))


# -- the writer returns what it found, writes inside the caller's transaction, and leaves the plan as planned ------
def test_write_ingest_returns_each_runs_outcome_before(tmp_path):
    from faultlens.middleware.ingest.plan import plan_ingest
    from faultlens.middleware.ingest.write import write_ingest

    store = open_store(tmp_path / "i.db")
    failed = record(sid(1), "invoke_workflow w", start=1, end=4, status="error", message="boom", **{"gen_ai.operation.name": "invoke_workflow"})
    plan = plan_ingest([failed])
    with store.batch(plan.trace_ids):
        first = write_ingest(store, plan)
    assert first.trace_ids == [TRACE] and first.outcomes_before == {TRACE: None}
    later = plan_ingest([oi(sid(2), "generation", "LLM", parent=sid(1))])
    with store.batch(later.trace_ids):
        second = write_ingest(store, later)
    assert second.outcomes_before[TRACE].success is False


def test_write_ingest_opens_no_transaction_of_its_own(tmp_path):
    from faultlens.middleware.ingest.plan import plan_ingest
    from faultlens.middleware.ingest.write import write_ingest

    store = open_store(tmp_path / "i.db")
    opened = []
    real = store.batch
    store.batch = lambda trace_ids=(): opened.append(list(trace_ids)) or real(trace_ids)
    plan = plan_ingest([oi(sid(2), "generation", "LLM", parent=sid(1))])
    with real(plan.trace_ids):
        write_ingest(store, plan)
    assert opened == []
    ingest(store, [oi(sid(3), "generation", "LLM", parent=sid(1))])  # ingest opens the one transaction itself
    assert opened == [[TRACE]]


def test_writing_leaves_the_plan_as_planned(tmp_path):
    from faultlens.middleware.ingest.plan import plan_ingest
    from faultlens.middleware.ingest.write import write_ingest

    store = open_store(tmp_path / "i.db")
    ingest(store, [oi(sid(1), "Triage", "AGENT", start=1, end=9, **{"agent.name": "Triage"}),
                   record(sid(9), "invoke_workflow w", start=0, end=10, status="error", **{"gen_ai.operation.name": "invoke_workflow"})])
    plan = plan_ingest([oi(sid(2), "generation", "LLM", parent=sid(1)), record(sid(9), "invoke_workflow w", start=0, end=10, **{"gen_ai.operation.name": "invoke_workflow"})])
    (run,) = plan.runs
    assert [step["agent"] for _, step, _, _ in run.steps] == ["agent"] and run.header.outcome is None
    with store.batch(plan.trace_ids):
        write_ingest(store, plan)
    assert [step["agent"] for _, step, _, _ in run.steps] == ["agent"] and run.header.outcome is None
    assert [s.agent for s in store.get_trace(TRACE).steps] == ["Triage"] and store.get_outcome(TRACE).success is False
