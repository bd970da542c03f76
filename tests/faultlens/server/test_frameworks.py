"""OpenInference spans from real agent frameworks, sent to a real server as exporters send them.

The fixtures are genuine span trees: recorded offline by
scripts/capture_framework_spans.py from openai-agents, smolagents, AG2 and
AutoGen AgentChat (Magentic-One) runs against a scripted stub endpoint (see
that script), with the spans in the order they ended, which is the order a
span processor exports them. The tests need none of those packages.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from faultlens.middleware.store import open_store
from faultlens.server import create_app

from .conftest import HTTP

FIXTURES = Path(__file__).parent / "fixtures"
SERVICES = {"weather-desk", "math-desk", "facts-desk"}  # the fixtures' service.name: never an agent
ALL = ["openai_agents_weather", "smolagents_weather", "ag2_math", "autogen_agentchat_facts"]


def _payload(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.otlp.json").read_text())


def _spans(payload: dict) -> list[dict]:
    return payload["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _one_span(payload: dict, span: dict) -> dict:
    single = copy.deepcopy(payload)
    single["resourceSpans"][0]["scopeSpans"][0]["spans"] = [span]
    return single


def _post(url: str, payload: dict) -> None:
    response = HTTP.post(url + "/v1/traces", json=payload)
    assert response.status_code == 200, response.text


def _stored(url: str) -> dict:
    runs = HTTP.get(url + "/api/runs").json()
    assert len(runs) == 1, runs
    return HTTP.get(f"{url}/api/runs/{runs[0]['id']}").json()


@pytest.fixture
def two_servers(tmp_path, serve):
    """Two servers over two stores: one gets the spans one by one, the other all at once."""
    stores = [open_store(tmp_path / "one-by-one.db"), open_store(tmp_path / "all-at-once.db")]
    servers = [serve(create_app(s)) for s in stores]
    yield [s.url for s in servers]
    for s in stores:
        s.close()


def _send_both_ways(name: str, urls: list[str], order=None) -> tuple[dict, dict]:
    payload = _payload(name)
    spans = _spans(payload)
    for span in order(spans) if order else spans:
        _post(urls[0], _one_span(payload, span))
    _post(urls[1], payload)
    return _stored(urls[0]), _stored(urls[1])


def _rows(run: dict) -> list[tuple]:
    return [(s["agent"], s["kind"], s["tool_name"]) for s in run["steps"]]


def test_openai_agents_handoff_team_sent_span_by_span(two_servers):
    one_by_one, all_at_once = _send_both_ways("openai_agents_weather", two_servers)
    assert one_by_one == all_at_once

    run = one_by_one
    assert run["task"]["query"] == "What is the weather in Paris?"
    assert [a["name"] for a in run["agents"]] == ["Triage", "Weather Specialist"]
    assert _rows(run) == [
        ("Triage", "llm_call", None),
        ("Triage", "tool_call", "handoff to Weather Specialist"),
        ("Weather Specialist", "llm_call", None),
        ("Weather Specialist", "tool_call", "get_weather"),
        ("Weather Specialist", "llm_call", None),
    ]
    tool = run["steps"][3]
    assert tool["tool_arguments"] == {"city": "Paris"}
    assert tool["tool_result"] == "Sunny in Paris, 21C" and tool["content"] == "Sunny in Paris, 21C"
    # the function tool's schema is kept beside its arguments
    assert tool["metadata"]["tool_parameters"]["required"] == ["city"]
    assert run["steps"][1]["content"] == "Weather Specialist"
    assert run["steps"][4]["content"] == "It is sunny in Paris, 21C."


def test_smolagents_manager_and_managed_agent_sent_span_by_span(two_servers):
    one_by_one, all_at_once = _send_both_ways("smolagents_weather", two_servers)
    assert one_by_one == all_at_once

    run = one_by_one
    assert run["task"]["query"] == "What is the weather in Paris?"
    assert [(a["name"], a["description"]) for a in run["agents"]] == [("CodeAgent", ""), ("weather_agent", "Finds the weather in a city.")]
    assert _rows(run) == [
        ("CodeAgent", "llm_call", None),
        ("weather_agent", "llm_call", None),
        ("weather_agent", "tool_call", "get_weather"),
        ("weather_agent", "llm_call", None),
        ("weather_agent", "tool_call", "final_answer"),
        ("weather_agent", "message", None),  # the report it hands back to the manager
        ("CodeAgent", "tool_result", None),  # Step 1's observation: the code's execution logs
        ("CodeAgent", "llm_call", None),
        ("CodeAgent", "tool_call", "final_answer"),
        ("CodeAgent", "tool_result", None),
        ("CodeAgent", "message", None),
    ]
    steps = run["steps"]
    # smolagents' {"args": [...], "kwargs": {...}} becomes named arguments
    assert steps[2]["tool_arguments"] == {"city": "Paris"} and steps[2]["content"] == "Sunny in Paris, 21C"
    assert steps[8]["tool_arguments"] == {"answer": "It is sunny in Paris, 21C."}
    assert steps[6]["content"].startswith("Execution logs:\nHere is the final answer from your managed agent 'weather_agent'")
    # the ToolCallingAgent's `Step N` chains only repeat their tool's output: no steps of their own
    assert sum(s["content"] == "Sunny in Paris, 21C" for s in steps) == 3


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("order", ["parents first", "shuffled"])
def test_the_stored_run_does_not_depend_on_arrival_order(two_servers, name, order):
    arrange = (lambda spans: list(reversed(spans))) if order == "parents first" else (lambda spans: random.Random(7).sample(spans, len(spans)))
    one_by_one, all_at_once = _send_both_ways(name, two_servers, arrange)
    assert one_by_one == all_at_once
    assert not SERVICES & {s["agent"] for s in one_by_one["steps"]}


def test_ag2_group_chat_sent_span_by_span(two_servers):
    one_by_one, all_at_once = _send_both_ways("ag2_math", two_servers)
    assert one_by_one == all_at_once

    run = one_by_one
    assert run["task"]["query"] == "What is 2 + 3? Compute it with Python."
    # AG2's own speaker-selection helpers (checking_agent, speaker_selection_agent) are not team members
    assert [a["name"] for a in run["agents"]] == ["executor", "chat_manager", "planner", "coder"]
    assert [(s["agent"], s["content"]) for s in run["steps"]] == [
        ("chat_manager", "planner"),  # speaker selection: the manager's choice
        ("planner", "Plan: the coder prints 2 + 3 with Python, the executor runs it."),
        ("chat_manager", "coder"),
        ("coder", "```python\nprint(2 + 3)\n```"),
        ("chat_manager", "executor"),
        ("executor", "exitcode: 0 (execution succeeded)\nCode output: 5\n"),
        ("chat_manager", "coder"),
        # the chat span's output (the last message again, under the initiator's name) is no step
        ("coder", "The answer is 5. TERMINATE"),
    ]


def test_autogen_magentic_one_team_sent_span_by_span(two_servers):
    one_by_one, all_at_once = _send_both_ways("autogen_agentchat_facts", two_servers)
    assert one_by_one == all_at_once

    run = one_by_one
    assert run["task"]["query"] == "How many people live in Paris?"
    assert [(a["name"], a["description"]) for a in run["agents"]] == [
        ("MagenticOneOrchestrator", ""), ("researcher", "Looks facts up."), ("writer", "Writes the answer.")]
    orchestrator = "MagenticOneOrchestrator"  # its model calls sit under the team span, with no agent span of their own
    assert _rows(run) == [
        (orchestrator, "llm_call", None),  # facts
        (orchestrator, "llm_call", None),  # plan
        (orchestrator, "llm_call", None),  # progress ledger → researcher
        ("researcher", "llm_call", None),
        ("researcher", "tool_call", "lookup_population"),
        (orchestrator, "llm_call", None),  # ledger → writer
        ("writer", "llm_call", None),
        (orchestrator, "llm_call", None),  # ledger: satisfied
        (orchestrator, "llm_call", None),  # final answer
    ]
    tool = run["steps"][4]
    assert tool["tool_arguments"] == {"city": "Paris"} and tool["content"] == "Paris has 2.1 million inhabitants."
