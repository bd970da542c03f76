"""The LangGraph adapter: spans named by the top-level graph node they run under; agent spans (the graph's state) are no steps."""

import json

from faultlens.middleware.spans.mapping import agent_of, span_to_step
from tests.middleware.spans.test_mapping import oi, sid


def meta(node, namespace=None):
    data = {"langgraph_step": 1, "langgraph_node": node}
    if namespace:
        data["checkpoint_ns"] = namespace
    return {"metadata": json.dumps(data)}


def test_spans_are_named_by_the_top_level_node_of_their_namespace():
    assert agent_of(oi(sid(1), "agent", "AGENT", **meta("agent", "researcher:1f0|agent:2a1"))) == "researcher"
    assert agent_of(oi(sid(2), "ChatOpenAI", "LLM", **meta("agent", "calculator:9c2"))) == "calculator"
    assert agent_of(oi(sid(3), "lookup_price", "TOOL", **meta("tools", "researcher:1f0"))) == "researcher"
    assert agent_of(oi(sid(4), "supervisor", "CHAIN", **meta("supervisor"))) == "supervisor"  # a top-level node itself
    assert agent_of(oi(sid(5), "LangGraph", "CHAIN")) is None  # the root: no LangGraph metadata
    assert agent_of(oi(sid(6), "x", "CHAIN", **meta("__start__"))) is None


def test_an_agent_span_holds_the_whole_history_and_is_no_step():
    state = json.dumps({"messages": [{"type": "ai", "data": {"content": "Result: 5"}}]})
    assert span_to_step(oi(sid(1), "call_agent", "AGENT", **meta("calculator"), **{"output.value": state})) is None
    llm = span_to_step(oi(sid(2), "ChatOpenAI", "LLM", **meta("agent", "calculator:9c2"), **{"output.value": "Result: 5"}))
    assert llm is not None and llm.agent == "calculator"


def test_a_routing_chain_that_ends_the_graph_is_no_step():
    routing = {"output.value": "__end__", "output.mime_type": "text/plain"}
    assert span_to_step(oi(sid(1), "should_continue", "CHAIN", **meta("agent", "researcher:1f0|agent:2a1"), **routing)) is None
    said = {"output.value": "Unit prices: valve $9.66.", "output.mime_type": "text/plain"}
    assert span_to_step(oi(sid(2), "should_continue", "CHAIN", **meta("agent", "researcher:1f0"), **said)) is not None
    assert span_to_step(oi(sid(3), "Step 1", "CHAIN", **routing)) is not None  # not LangGraph's: left to the core


def test_a_tool_message_is_read_as_its_content_and_a_command_is_left_alone():
    message = json.dumps({"type": "tool", "data": {"content": "valve: $9.66 per unit", "tool_call_id": "c1"}})
    step = span_to_step(oi(sid(1), "lookup_price", "TOOL", **meta("tools", "researcher:1f0"), **{"output.value": message}))
    assert step.content == "valve: $9.66 per unit" and step.tool_result == "valve: $9.66 per unit"
    command = json.dumps({"graph": "__parent__", "update": {"messages": []}})
    handoff = span_to_step(oi(sid(2), "transfer_to_researcher", "TOOL", **meta("supervisor"), **{"output.value": command}))
    assert handoff.tool_result == {"graph": "__parent__", "update": {"messages": []}}
