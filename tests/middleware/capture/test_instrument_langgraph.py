"""LangGraph: nodes become agents, tools become tool steps, under invoke and ainvoke.

The model call inside the planner node goes to litellm's `mock_response`.
"""

from typing import TypedDict

import litellm
import pytest
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from faultlens.middleware import StepKind, Tracer


@tool
def search(query: str) -> str:
    """Search the archive."""
    return f"3 documents about {query}"


@tool
def broken_search(query: str) -> dict:
    """A search that reports its failure in its return value."""
    return {"error": "index offline"}


class State(TypedDict, total=False):
    task: str
    plan: str
    facts: str
    answer: str


def planner(state: State) -> State:
    reply = litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": state["task"]}], mock_response="search the archive")
    return {"plan": reply.choices[0].message.content}


def researcher(state: State) -> State:
    return {"facts": search.invoke({"query": state["task"]})}


async def async_researcher(state: State) -> State:
    return {"facts": await search.ainvoke({"query": state["task"]})}


def writer(state: State) -> State:
    return {"answer": "Answer: " + state["facts"]}


def graph(research=researcher, write=writer):
    g = StateGraph(State)
    g.add_node("planner", planner)
    g.add_node("researcher", research)
    g.add_node("writer", write)
    g.add_edge(START, "planner")
    g.add_edge("planner", "researcher")
    g.add_edge("researcher", "writer")
    g.add_edge("writer", END)
    return g


@pytest.fixture
def tracer(tmp_path):
    t = Tracer(db=tmp_path / "g.db")
    t.instrument_litellm()
    yield t
    t.shutdown()


EXPECTED = [
    ("planner", StepKind.llm_call, None),
    ("planner", StepKind.message, None),
    ("researcher", StepKind.tool_call, "search"),
    ("researcher", StepKind.message, None),
    ("writer", StepKind.message, None),
]


def check(trace, task):
    assert [(s.agent, s.kind, s.tool_name) for s in trace.steps] == EXPECTED
    assert trace.steps[0].content == "search the archive"
    assert trace.steps[2].tool_result == f"3 documents about {task}" and trace.steps[2].tool_arguments == {"query": task}
    assert '"answer": "Answer: 3 documents about' in trace.steps[4].content
    node_spans = {s.agent: s.span_id for s in trace.steps if s.kind is StepKind.message}
    # explicit parents: the tool and the model call hang under their node's span
    assert trace.steps[2].parent_span_id == node_spans["researcher"]
    assert trace.steps[0].parent_span_id == node_spans["planner"]
    assert not any(s.failed for s in trace.steps)


def test_invoke_inside_a_run(tracer):
    with tracer.run(task="tides") as run:
        graph().compile().invoke({"task": "tides"}, config={"callbacks": [tracer.langgraph_handler()]})
    check(tracer.store.get_trace(run.id), "tides")


async def test_ainvoke_inside_a_run(tracer):
    async with tracer.run(task="moons") as run:
        await graph(async_researcher).compile().ainvoke({"task": "moons"}, config={"callbacks": [tracer.langgraph_handler()]})
    check(tracer.store.get_trace(run.id), "moons")


def test_a_graph_without_a_run_gets_its_own(tracer):
    handler = tracer.langgraph_handler(task="own run")
    graph().compile().invoke({"task": "x"}, config={"callbacks": [handler]})
    [summary] = tracer.store.list_traces()
    trace = tracer.store.get_trace(summary.id)
    assert trace.task.query == "own run" and trace.source.framework == "langgraph"
    assert [(s.agent, s.kind, s.tool_name) for s in trace.steps] == EXPECTED


def test_tool_returning_an_error_is_flagged(tracer):
    def bad_researcher(state: State) -> State:
        return {"facts": str(broken_search.invoke({"query": state["task"]}))}

    with tracer.run(task="t") as run:
        graph(bad_researcher).compile().invoke({"task": "t"}, config={"callbacks": [tracer.langgraph_handler()]})
    [failed] = [s for s in tracer.store.get_trace(run.id).steps if s.failed]
    assert failed.tool_name == "broken_search" and failed.agent == "researcher" and "index offline" in failed.error


def test_interrupt_is_control_flow_not_failure(tracer):
    from langgraph.checkpoint.memory import InMemorySaver

    def asking_writer(state: State) -> State:
        approved = interrupt("approve?")
        return {"answer": f"approved={approved}"}

    app = graph(write=asking_writer).compile(checkpointer=InMemorySaver())
    with tracer.run(task="t") as run:
        app.invoke({"task": "t"}, config={"callbacks": [tracer.langgraph_handler()], "configurable": {"thread_id": "1"}})
    trace = tracer.store.get_trace(run.id)
    assert not any(s.failed for s in trace.steps)
    assert trace.steps[-1].agent == "writer" and "interrupted" in trace.steps[-1].content
    assert trace.outcome is None


def test_decorated_agents_and_tools_inside_nodes_join_the_graphs_run(tracer):
    @tracer.tool(name="lookup")
    def lookup(key: str) -> str:
        return key * 2

    @tracer.agent(name="helper")
    def helper(key: str) -> str:
        return lookup(key)

    def researcher_with_tools(state: State) -> State:
        return {"facts": lookup("a") + helper("b")}

    handler = tracer.langgraph_handler(task="no outer run")
    graph(researcher_with_tools).compile().invoke({"task": "t"}, config={"callbacks": [handler]})
    [summary] = tracer.store.list_traces()
    steps = tracer.store.get_trace(summary.id).steps
    tools = [(s.agent, s.tool_result) for s in steps if s.tool_name == "lookup"]
    assert tools == [("researcher", "aa"), ("helper", "bb")]
