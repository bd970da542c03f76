"""The smolagents adapter: agents named by `<name>.run` spans, managed agents listed on the manager, wrapped tool arguments."""

import json

from faultlens.middleware.spans.mapping import agent_of, span_to_step
from faultlens.middleware.spans.tree import link_of, run_agents
from tests.middleware.spans.test_mapping import oi, sid


def test_agent_spans_are_named_by_their_span_name():
    assert agent_of(oi(sid(1), "weather_agent.run", "AGENT")) == "weather_agent"  # smolagents
    assert agent_of(oi(sid(1), "OpenAIModel.generate", "LLM")) is None  # only agent spans are named by their span name


def test_run_agents_order_and_descriptions():
    links = [
        link_of(oi(sid(2), "weather_agent.run", "AGENT", start=2)),
        link_of(oi(sid(1), "CodeAgent.run", "AGENT", start=1, **{"smolagents.managed_agents.0.name": "weather_agent", "smolagents.managed_agents.0.description": "Finds weather.",
                                                                 "smolagents.managed_agents.1.name": "idle_agent"})),
    ]
    assert [(a.name, a.description) for a in run_agents(links)] == [("CodeAgent", ""), ("weather_agent", "Finds weather."), ("idle_agent", "")]


def test_a_wrapped_call_is_read_as_named_arguments():
    smol = span_to_step(oi(sid(1), "FinalAnswerTool", "TOOL", **{"tool.name": "final_answer", "input.value": json.dumps({"args": ["5"], "sanitize_inputs_outputs": False, "kwargs": {}}),
                                                                 "tool.parameters": json.dumps({"answer": {"type": "any"}}), "output.value": "5"}))
    assert smol.tool_arguments == {"answer": "5"} and smol.content == "5" and smol.tool_result == 5
