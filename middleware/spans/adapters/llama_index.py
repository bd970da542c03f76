"""LlamaIndex, traced with OpenInference: agents named by the workflow step that runs them, the workflow's plumbing dropped.

An `AgentWorkflow` (or a single `FunctionAgent`, itself a workflow) traces
each workflow step as a CHAIN span named `<Workflow>.<step>` whose input and
output are the step's events as Python reprs (`AgentInput(...)`,
`AgentSetup(..., current_agent_name='researcher')`, `ToolCallResult(...)`,
`StopEvent(...)`). No span carries an agent attribute: the agent is the
`current_agent_name` of the event a `run_agent_step` span takes in, and the
model call under it is that agent's. The model call itself is three LLM
spans: `<LLM>._prepare_chat_with_tools` (the request being built), the
`<LLM>.achat` the agent calls and, inside it, the instrumented `achat`
that records the messages; only the last is a step. The event plumbing is
no step either. A tool's output (`ToolOutput` JSON: `{"blocks": [{"text":
...}], "tool_name": ...}`) is read as its blocks' text. Left as the core
reads it: a function tool's span
(`FunctionTool.acall`) runs under `call_tool`, which names no agent, so a
tool's step has the run's fallback agent; its call is in the agent's
model-call step that precedes it.
"""

from __future__ import annotations

import re
from typing import Any

from ..conventions import CHAIN, CHAT, OI_INPUT_VALUE, OI_OUTPUT_VALUE
from ..record import SpanRecord
from . import SpanAdapter

CURRENT_AGENT = re.compile(r"current_agent_name=['\"]([^'\"]+)['\"]")
# What a workflow step's span outputs: an event's repr (`AgentOutput(response=...`, cut short by the instrumentation).
EVENT = re.compile(r"[A-Z]\w*\(|None$")
# The LLM's methods that wrap the instrumented call (or build its request): `OpenAILike.achat`, `OpenAI.chat`, ...
WRAPPER = re.compile(r"\w+\.(?:_prepare_chat_with_tools|a?chat|a?stream_chat|a?complete)")
OUTPUT_MESSAGES = "llm.output_messages"


def agent_name(record: SpanRecord) -> str | None:
    """The agent a `<Workflow>.run_agent_step` span runs (asked of chain spans)."""
    if not record.name.endswith(".run_agent_step"):
        return None
    found = CURRENT_AGENT.findall(str(record.attributes.get(OI_INPUT_VALUE) or ""))
    return found[-1] if found else None


def machinery(record: SpanRecord) -> bool:
    """A workflow step's span (its output an event) or a model call's wrapper (no messages of its own)."""
    op = record.operation
    if op == CHAIN:
        output = record.attributes.get(OI_OUTPUT_VALUE)
        return "." in record.name and (output is None or EVENT.match(str(output).strip()) is not None)
    if op == CHAT and WRAPPER.fullmatch(record.name):
        return not any(key.startswith(OUTPUT_MESSAGES) for key in record.attributes)
    return False


def tool_result(result: Any) -> Any:
    """A `ToolOutput` as the text of its blocks (other results unchanged)."""
    if not (isinstance(result, dict) and isinstance(result.get("blocks"), list) and "tool_name" in result):
        return result
    texts = [str(b["text"]) for b in result["blocks"] if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(texts) if texts else result


ADAPTER = SpanAdapter(name="llama_index", agent_names={CHAIN: agent_name}, tool_result=tool_result, machinery=machinery)
