"""The AutoGen AgentChat adapter: a team's manager speaks on the team's span, which lists its participants."""

from faultlens.middleware.spans.mapping import agent_of
from faultlens.middleware.spans.tree import link_of, run_agents
from tests.middleware.spans.test_mapping import oi, sid


def test_agents_and_team_managers():
    assert agent_of(oi(sid(1), "researcher.on_messages_stream", "AGENT", **{"graph.node.id": "researcher"})) == "researcher"  # AutoGen
    assert agent_of(oi(sid(1), "MagenticOneGroupChat.run_stream", "CHAIN", participant_names=["a", "b"])) == "MagenticOneOrchestrator"
    assert agent_of(oi(sid(1), "SelectorGroupChat.run_stream", "CHAIN", participant_names=["a"])) == "SelectorGroupChatManager"


def test_a_team_span_lists_its_participants():
    team = oi(sid(1), "SelectorGroupChat.run_stream", "CHAIN", start=1, participant_names='["writer", "critic"]', participant_descriptions='["Writes.", "None"]')
    assert [(a.name, a.description) for a in run_agents([link_of(team)])] == [("SelectorGroupChatManager", ""), ("writer", "Writes."), ("critic", "")]
