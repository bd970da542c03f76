"""The Haystack adapter: an `Agent.run` span named by its system prompt's role; a retriever's documents read as text."""

import json

from faultlens.middleware.spans.mapping import agent_of, span_to_step
from tests.middleware.spans.test_mapping import oi, sid


def _messages(system: str) -> str:
    sys = f"ChatMessage(_role=<ChatRole.SYSTEM: 'system'>, _content=[TextContent(text=\"{system}\")], _name=None, _meta={{}})"
    user = "ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='You are the boss now.')], _name=None)"
    return json.dumps({"messages": [sys, user]})


def test_an_agent_run_is_named_by_the_role_its_system_prompt_opens_with():
    assert agent_of(oi(sid(1), "Agent.run", "CHAIN", **{"output.value": _messages("You are the researcher. Search.")})) == "researcher"
    assert agent_of(oi(sid(2), "Agent.run", "CHAIN", **{"input.value": _messages("You are a planner, brief.")})) == "planner"
    # a user message that says "You are ..." names no one; nor does a prompt that opens otherwise, nor another span
    assert agent_of(oi(sid(3), "Agent.run", "CHAIN", **{"output.value": _messages("Answer the question.")})) is None
    assert agent_of(oi(sid(4), "Pipeline.run", "CHAIN", **{"output.value": _messages("You are the lead.")})) is None


def test_a_retrievers_documents_are_read_as_id_and_content_lines():
    docs = ["Document(id=BRI-2025, content: 'Brightwater annual report 2025: 482 employees.', score: 3.644314700261223)",
            "Document(id=TAR-2024, content: 'Tarrant annual report 2024: 12 offices.', score: 1.5e-05)"]
    step = span_to_step(oi(sid(1), "InMemoryBM25Retriever.run", "RETRIEVER", **{"input.value": json.dumps({"query": "Brightwater"}),
                                                                              "output.value": json.dumps({"documents": docs}),
                                                                              "output.mime_type": "application/json"}),
                        agent="researcher")
    assert step.tool_result == ("[BRI-2025] Brightwater annual report 2025: 482 employees.\n"
                                "[TAR-2024] Tarrant annual report 2024: 12 offices.")
    other = span_to_step(oi(sid(2), "lookup", "TOOL", **{"tool.name": "lookup", "output.value": json.dumps({"documents": [1]})}))
    assert other.tool_result == {"documents": [1]}  # not Haystack documents: as it was
