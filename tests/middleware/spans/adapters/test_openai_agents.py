"""The OpenAI Agents SDK adapter has no hooks: its spans are read by the conventions alone (pinned here, on a recorded run too)."""

import json
from pathlib import Path

from faultlens.middleware.otlp.convert import otlp_json_to_records
from faultlens.middleware.spans.adapters import adapters
from faultlens.middleware.spans.mapping import agent_of
from faultlens.middleware.spans.traces import traces_from_records
from tests.middleware.spans.test_mapping import oi, sid

FIXTURE = Path(__file__).resolve().parents[3] / "faultlens" / "server" / "fixtures" / "openai_agents_weather.otlp.json"


def test_the_root_and_its_turns_name_no_agent():
    assert agent_of(oi(sid(1), "Agent workflow", "AGENT")) is None  # openai-agents' root
    assert agent_of(oi(sid(1), "turn", "CHAIN")) is None


def test_a_recorded_run_gets_its_agents_from_the_agent_spans():
    (adapter,) = [a for a in adapters() if a.name == "openai_agents"]
    assert (adapter.helper_agents, dict(adapter.agent_names), adapter.whole_conversation, adapter.listed_agents, adapter.call_arguments) == (frozenset(), {}, None, None, None)
    (trace,) = traces_from_records(otlp_json_to_records(json.loads(FIXTURE.read_text()), source="fixture"))
    assert trace.agent_names == ["Triage", "Weather Specialist"]
    assert {s.agent for s in trace.steps} == {"Triage", "Weather Specialist"}
    assert [s.tool_name for s in trace.steps if s.tool_name] == ["handoff to Weather Specialist", "get_weather"]
