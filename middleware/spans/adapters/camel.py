"""CAMEL, traced with OpenInference's OpenAI instrumentation: a model call's agent named by CAMEL's system prompt.

No OpenInference instrumentation exists for CAMEL, so its runs are traced by
`openinference-instrumentation-openai` on the OpenAI client each model
backend holds: one LLM span per model call, which names no agent (a
`ChatAgent` has a role name, but the OpenAI client never sees it). CAMEL
writes the role into the system prompt it gives each agent, so the LLM
span's first input message tells the agents apart: a role-playing
society's AI assistant and AI user ("Never forget you are a solver and I am
a instructor" → `solver`; the AI user's prompt names the user first) and
its task specifier ("You can make a task more specific." →
`task_specifier`) and task planner. A model call whose first
message is none of these stays unnamed (its ancestors' agent, if any).
Left as the core reads it: the run span and the tool spans that
`injectors.envs.math_society.tracing` adds (the tools' `agent.name` is the
calling agent's role name).
"""

from __future__ import annotations

import re

from ..conventions import CHAT, OI_INPUT_MESSAGES
from ..record import SpanRecord
from . import SpanAdapter

_ROLE = f"{OI_INPUT_MESSAGES}.0.message.role"
_CONTENT = f"{OI_INPUT_MESSAGES}.0.message.content"
# CAMEL's AI-society (and code) prompts: "Never forget you are a <role> and I am a <other>."
ROLE_PLAYER = re.compile(r"Never forget you are an? (.+?) and I am an? ")
# CAMEL's helper agents' fixed system messages, and the agent each is.
HELPERS = {"You can make a task more specific.": "task_specifier", "You are a helpful task planner.": "task_planner"}


def agent_name(record: SpanRecord) -> str | None:
    """The agent a CAMEL model call is made for: the role its system prompt gives (asked of chat spans)."""
    attrs = record.attributes
    if attrs.get(_ROLE) != "system":
        return None
    system = str(attrs.get(_CONTENT) or "")
    found = ROLE_PLAYER.search(system[:400])
    if found:
        return found.group(1).strip().replace(" ", "_")
    return next((agent for opening, agent in HELPERS.items() if system.startswith(opening)), None)


ADAPTER = SpanAdapter(name="camel", agent_names={CHAT: agent_name})
