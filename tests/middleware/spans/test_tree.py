"""Agent identity from the span tree: `resolve_agent` walks up to the nearest span that names an agent."""

from faultlens.middleware.spans.tree import SpanLink, link_of, resolve_agent
from tests.middleware.spans.test_mapping import oi, sid


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
