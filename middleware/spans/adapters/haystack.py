"""Haystack, traced with OpenInference: an `Agent` component's span named by its system prompt's role.

Haystack's instrumentation traces the components a `Pipeline` runs as CHAIN
spans named `<Class>.run` (`Pipeline.run` → `Agent.run`; an agent another
agent calls as a tool is an `Agent.run` under the caller's), whose input and
output values are the component's sockets with each `ChatMessage` as its
Python repr. A Haystack `Agent` has no name: the only thing that tells one
agent from another is its system prompt, so an `Agent.run` span is named by
the role its system prompt opens with ("You are the researcher." →
`researcher`), and the model calls under it (the OpenAI instrumentation's
LLM spans) are that agent's. An agent whose prompt opens otherwise stays
unnamed (the run's fallback agent).

A retriever's span (RETRIEVER, read as a tool) outputs `{"documents":
[...]}`, each document as its Python repr (`Document(id=BRI-2025, content:
'...', score: 3.6)`, the content cut at 100 characters); its result is read
as one `[id] content` line per document. Left as the core reads it: a
function tool runs inside the agent's `ToolInvoker`, which no span records
(a component a tool wraps is a CHAIN span of its own); the tool calls are in
the model-call steps.
"""

from __future__ import annotations

import re
from typing import Any

from ..conventions import CHAIN, OI_INPUT_VALUE, OI_OUTPUT_VALUE
from ..record import SpanRecord
from . import SpanAdapter

# The system message's repr in an agent's messages, and the role its text opens with.
SYSTEM_ROLE = re.compile(r"ChatRole\.SYSTEM: 'system'>, _content=\[TextContent\(text=\\?(['\"])You are (?:the |an? )?([\w-]+)[.,;:]")


def agent_name(record: SpanRecord) -> str | None:
    """The agent an `Agent.run` span runs: the role its system prompt names (asked of chain spans)."""
    if not record.name.endswith("Agent.run"):
        return None
    for key in (OI_OUTPUT_VALUE, OI_INPUT_VALUE):
        found = SYSTEM_ROLE.search(str(record.attributes.get(key) or ""))
        if found:
            return found.group(2)
    return None


DOCUMENT = re.compile(r"^Document\(id=(.*?), content: '(.*)'(?:, score: [-\d.e]+)?(?:, [a-z_]+: .*)?\)$", re.S)


def tool_result(result: Any) -> Any:
    """A retriever's `{"documents": [<Document repr>, ...]}` as `[id] content` lines (other results unchanged)."""
    docs = result.get("documents") if isinstance(result, dict) and len(result) == 1 else None
    if not isinstance(docs, list) or not docs or not all(isinstance(d, str) and d.startswith("Document(") for d in docs):
        return result
    found = [DOCUMENT.match(d) for d in docs]
    if not all(found):
        return result
    return "\n".join(f"[{m.group(1)}] {m.group(2)}" for m in found if m)


ADAPTER = SpanAdapter(name="haystack", agent_names={CHAIN: agent_name}, tool_result=tool_result)
