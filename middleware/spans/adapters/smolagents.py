"""smolagents, traced with OpenInference: agents named by their `<name>.run` spans, managed agents, wrapped tool arguments.

Its `Step N` chains hold the observation of the code a step ran (the core
keeps a chain that reports text, and drops one that only repeats its tool's
output); `tool.parameters` holds the tool's schema, not the call's arguments;
a root span's `input.value` holds the request under `task`.
"""

from __future__ import annotations

import re
from typing import Any

from ...model.trace import AgentInfo
from ..conventions import AGENT
from ..messages import flattened
from ..record import SpanRecord
from . import SpanAdapter

# smolagents names its agent spans `<agent name>.run` (other frameworks use
# `<agent name>.<method>` too, but also put the name in an attribute, read first).
METHOD_SPAN = re.compile(r"^([A-Za-z_][\w-]*)\.[A-Za-z_]\w*$")
MANAGED_AGENTS = "smolagents.managed_agents"
# The keys of its wrapped tool call: `{"args": [...], "kwargs": {...}, "sanitize_inputs_outputs": ...}`.
_CALL_KEYS = {"args", "kwargs", "sanitize_inputs_outputs"}


def agent_name(record: SpanRecord) -> str | None:
    """`weather_agent.run` -> `weather_agent` (asked of agent spans)."""
    m = METHOD_SPAN.match(record.name)
    return m.group(1) if m else None


def listed_agents(record: SpanRecord) -> list[AgentInfo]:
    """The managed agents a manager's span lists (`smolagents.managed_agents.N.name/description`)."""
    return [AgentInfo(name=str(managed["name"]), description=str(managed.get("description") or ""))
            for managed in flattened(record.attributes, MANAGED_AGENTS) if managed.get("name")]


def call_arguments(arguments: Any, parameters: Any) -> Any:
    """A call wrapped as `{"args": [...], "kwargs": {...}}`, as named arguments: positional ones named from the parameters when they are known."""
    if not (isinstance(arguments, dict) and "kwargs" in arguments and set(arguments) <= _CALL_KEYS):
        return arguments
    positional = list(arguments.get("args") or [])
    named = dict(arguments.get("kwargs") or {})
    names = [n for n in parameters if n not in named] if isinstance(parameters, dict) else []
    for name in names[: len(positional)]:
        named[name] = positional.pop(0)
    return {**named, **({"args": positional} if positional else {})}


ADAPTER = SpanAdapter(name="smolagents", agent_names={AGENT: agent_name}, listed_agents=listed_agents, call_arguments=call_arguments)
