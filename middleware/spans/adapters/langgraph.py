"""LangGraph, traced with OpenInference's LangChain instrumentation: each span's agent is the top-level graph node it runs under.

Every span of a LangGraph run carries the run's LangChain `metadata` (JSON):
`langgraph_node` (the node the span runs in) and, inside a subgraph,
`checkpoint_ns` (`<top node>:<id>|<inner node>:<id>...`). In a multi-agent
graph (`langgraph-supervisor`'s, a swarm, a hand-built one) the top-level nodes
are the agents (`supervisor`, `researcher`), while the inner nodes of each
agent's ReAct graph are named the same for every agent (`agent`, `tools`;
OpenInference marks the `agent` node an AGENT span). So an agent, chain,
chat or tool span is named by the first node of its `checkpoint_ns`, or by its
`langgraph_node` when it is a top-level node itself. Spans without that
metadata (the root `LangGraph` chain) name no agent. An agent span outputs
the graph's state (the whole history), so it is no step of its own.
A routing chain whose output is one of LangGraph's reserved nodes (`__end__`:
the agent's graph is done) is no step. A tool's output recorded as
LangChain's ToolMessage JSON (`{"type": "tool", "data": {"content": ...}}`)
is read as its content; a handoff's `Command` JSON is left as it is.
"""

from __future__ import annotations

import json
from typing import Any

from ..conventions import AGENT, CHAIN, CHAT, OI_OUTPUT_VALUE, TOOL
from ..record import SpanRecord
from . import SpanAdapter

METADATA = "metadata"  # OpenInference's attribute for a LangChain run's metadata


def agent_name(record: SpanRecord) -> str | None:
    """The top-level LangGraph node a span runs under (None: not a LangGraph span, or the graph's root)."""
    raw = record.attributes.get(METADATA)
    if not isinstance(raw, str) or "langgraph_node" not in raw:
        return None
    try:
        metadata = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(metadata, dict):
        return None
    namespace = metadata.get("checkpoint_ns") or metadata.get("langgraph_checkpoint_ns")
    if isinstance(namespace, str) and namespace:
        return namespace.split("|", 1)[0].split(":", 1)[0] or None
    node = metadata.get("langgraph_node")
    return str(node) if node and not str(node).startswith("__") else None


def whole_conversation(record: SpanRecord) -> bool:
    """A LangGraph agent span (a ReAct graph's `agent` node, a supervisor's `call_agent`) outputs the graph's state:
    the whole message history, whose last message its chat span already holds."""
    return record.operation == AGENT and agent_name(record) is not None


def machinery(record: SpanRecord) -> bool:
    """A routing chain of a LangGraph graph that only says where the graph goes next: a reserved node (`__end__`)."""
    if record.operation != CHAIN:
        return False
    output = str(record.attributes.get(OI_OUTPUT_VALUE) or "").strip()
    return output.startswith("__") and output.endswith("__") and output[2:-2].isidentifier() and agent_name(record) is not None


def tool_result(result: Any) -> Any:
    """A LangChain ToolMessage (`{"type": "tool", "data": {"content": ...}}`) as its content (other results unchanged)."""
    if isinstance(result, dict) and result.get("type") == "tool" and isinstance(result.get("data"), dict):
        content = result["data"].get("content")
        if isinstance(content, str):
            return content
    return result


ADAPTER = SpanAdapter(name="langgraph", agent_names={AGENT: agent_name, CHAIN: agent_name, CHAT: agent_name, TOOL: agent_name},
                      whole_conversation=whole_conversation, tool_result=tool_result, machinery=machinery)
