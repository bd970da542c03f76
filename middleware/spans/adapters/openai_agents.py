"""The OpenAI Agents SDK (openai-agents), traced with OpenInference: read by the conventions alone, so this adapter has no hooks.

What its spans look like, and what the core makes of them (the adapter's
test pins it on a recorded run): each agent span (`Triage`) carries
`agent.name` and `graph.node.id`; the root `Agent workflow` agent span names
no agent, so it is no step and names no one's steps; its `turn` chains only
group; `tool.parameters` holds the tool's schema, so a call's arguments are
read from `input.value`. A hook goes here when its spans need one.
"""

from __future__ import annotations

from . import SpanAdapter

ADAPTER = SpanAdapter(name="openai_agents")
