"""The span → step mapping and incremental ingestion (what the live processor and the server use)."""

import json

import pytest

from faultlens.middleware import InputError, StepKind, open_store
from faultlens.middleware.store.redact import redact_id
from faultlens.middleware.spans.mapping import SpanLink, SpanRecord, agent_of, ingest, link_of, maybe_json, resolve_agent, run_agents, span_to_step, traces_from_records

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
    # An infinite token count is a bad value too, not a crash (Hypothesis found it, issue #17).
    with pytest.raises(InputError) as info:
        span_to_step(record("e" * 16, "chat m", **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": float("inf")}), source="server", label="batch 4")
    assert str(info.value).startswith("server, record batch 4, field 'gen_ai.usage.input_tokens'")


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


# -- agent identity from the span tree (OpenInference) ------------------------
def oi(span_id, name, kind, parent=None, start=1, end=2, **attributes):
    return record(span_id, name, parent=parent, start=start, end=end, **{"openinference.span.kind": kind, **attributes})


def sid(n):
    return f"{n:016x}"


def test_resolve_agent_walks_up_and_says_where_it_stopped():
    links = {link.span_id: link for link in [
        link_of(oi(sid(1), "Agent workflow", "AGENT")),
        link_of(oi(sid(2), "Triage", "AGENT", parent=sid(1), **{"agent.name": "Triage"})),
        link_of(oi(sid(3), "turn", "CHAIN", parent=sid(2))),
        link_of(oi(sid(4), "generation", "LLM", parent=sid(3))),
        link_of(oi(sid(5), "generation", "LLM", parent=sid(9))),
    ]}
    assert resolve_agent(sid(4), links.get) == ("Triage", None)
    assert resolve_agent(sid(1), links.get) == (None, None)  # the root names no agent
    assert resolve_agent(sid(5), links.get) == (None, sid(9))  # parent not arrived yet
    looped = {sid(7): SpanLink(sid(7), sid(8), 0), sid(8): SpanLink(sid(8), sid(7), 0)}
    assert resolve_agent(sid(7), looped.get) == (None, None)


def test_framework_agent_names():
    assert agent_of(oi(sid(1), "weather_agent.run", "AGENT")) == "weather_agent"  # smolagents
    assert agent_of(oi(sid(1), "researcher.on_messages_stream", "AGENT", **{"graph.node.id": "researcher"})) == "researcher"  # AutoGen
    assert agent_of(oi(sid(1), "Agent workflow", "AGENT")) is None  # openai-agents' root
    assert agent_of(oi(sid(1), "turn", "CHAIN")) is None
    assert agent_of(oi(sid(1), "OpenAIModel.generate", "LLM")) is None  # only agent spans are named by their span name
    # AG2's speaker-selection helpers speak for the chat manager above them
    assert agent_of(oi(sid(1), "checking_agent.initiate_chat", "AGENT", **{"agent.name": "checking_agent"})) is None
    assert agent_of(oi(sid(1), "MagenticOneGroupChat.run_stream", "CHAIN", participant_names=["a", "b"])) == "MagenticOneOrchestrator"
    assert agent_of(oi(sid(1), "SelectorGroupChat.run_stream", "CHAIN", participant_names=["a"])) == "SelectorGroupChatManager"


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


def test_run_agents_order_and_descriptions():
    links = [
        link_of(oi(sid(2), "weather_agent.run", "AGENT", start=2)),
        link_of(oi(sid(1), "CodeAgent.run", "AGENT", start=1, **{"smolagents.managed_agents.0.name": "weather_agent", "smolagents.managed_agents.0.description": "Finds weather.",
                                                                 "smolagents.managed_agents.1.name": "idle_agent"})),
    ]
    assert [(a.name, a.description) for a in run_agents(links)] == [("CodeAgent", ""), ("weather_agent", "Finds weather."), ("idle_agent", "")]


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


def test_tool_arguments_from_each_instrumentation():
    smol = span_to_step(oi(sid(1), "FinalAnswerTool", "TOOL", **{"tool.name": "final_answer", "input.value": json.dumps({"args": ["5"], "sanitize_inputs_outputs": False, "kwargs": {}}),
                                                                 "tool.parameters": json.dumps({"answer": {"type": "any"}}), "output.value": "5"}))
    assert smol.tool_arguments == {"answer": "5"} and smol.content == "5" and smol.tool_result == 5
    autogen = span_to_step(oi(sid(1), "researcher.lookup", "TOOL", **{"tool.name": "lookup", "tool.parameters": '{"city": "Paris"}', "input.value": '{"city": "Paris"}'}))
    assert autogen.tool_arguments == {"city": "Paris"} and "tool_parameters" not in autogen.metadata


def test_task_from_a_root_input_value():
    for value, query in [('{"task": "Do it", "stream": false}', "Do it"), ('{"message": "Hi", "sender": "a"}', "Hi"), ("plain words", "plain words"),
                         ('[{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"}]', "Q?")]:
        (trace,) = traces_from_records([oi(sid(1), "CodeAgent.run", "AGENT", **{"input.value": value})])
        assert trace.task.query == query, value


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


# -- maybe_json reads exactly what json.loads reads (issue #17: it skips json.loads' whitespace scans) --
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _maybe_json_with_loads(value):
    import re

    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text or "x"):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value
    return value


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(max_size=20),
    st.lists(st.sampled_from(['{', '}', '[', ']', '"', ':', ',', ' ', '\t', '\n', '\xa0', '1', '-', 'e', '.', 'a', 'null', 'true', 'NaN', '\\', '\ufeff']), max_size=16).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3)).map(json.dumps),
))
def test_maybe_json_reads_what_json_loads_reads(text):
    import math

    new, old = maybe_json(text), _maybe_json_with_loads(text)
    assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True) or (isinstance(old, float) and math.isnan(old) and math.isnan(new))


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
