"""AutoGen AgentChat, traced with OpenInference: a team's manager speaks on the team's span, which lists its participants.

Its agent spans are `<agent name>.on_messages_stream` with the name in
`graph.node.id` (the conventions read that); `tool.parameters` holds the
call's arguments, as `input.value` does; a root span's `input.value` holds
the request under `task`.
"""

from __future__ import annotations

from typing import Any

from ...model.trace import AgentInfo
from ..conventions import CHAIN
from ..messages import maybe_json
from ..record import SpanRecord
from . import SpanAdapter

PARTICIPANT_NAMES = "participant_names"
PARTICIPANT_DESCRIPTIONS = "participant_descriptions"
# AgentChat's group chat managers: their model calls sit directly under the
# team's `<Team>.run_stream` span, with no agent span of their own. A team not
# listed here has `<Team>Manager`.
TEAM_MANAGERS = {"MagenticOneGroupChat": "MagenticOneOrchestrator"}


def agent_name(record: SpanRecord) -> str | None:
    """The team's manager, on a team's `<Team>.run_stream` chain (the one listing participants; asked of chains)."""
    if not record.attributes.get(PARTICIPANT_NAMES):
        return None
    team = record.name.split(".", 1)[0]
    return TEAM_MANAGERS.get(team, f"{team}Manager")


def _listed(value: Any) -> list[str]:
    value = maybe_json(value)
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)] if value else []


def listed_agents(record: SpanRecord) -> list[AgentInfo]:
    """A team's participants, as its run_stream span lists them (`participant_names`, `participant_descriptions`)."""
    attrs = record.attributes
    if PARTICIPANT_NAMES not in attrs:
        return []
    names, descriptions = _listed(attrs.get(PARTICIPANT_NAMES)), _listed(attrs.get(PARTICIPANT_DESCRIPTIONS))
    return [AgentInfo(name=name, description=descriptions[i] if i < len(descriptions) and descriptions[i] != "None" else "") for i, name in enumerate(names)]


ADAPTER = SpanAdapter(name="autogen", agent_names={CHAIN: agent_name}, listed_agents=listed_agents)
