"""AG2, traced with OpenInference: its speaker-selection helpers speak for the chat manager, and a whole chat is no step.

AG2 names its agent spans `<agent name>.<method>` and puts the name in
`agent.name` too (the conventions read that); a root span's `input.value`
holds the request under `message`.
"""

from __future__ import annotations

from ..record import SpanRecord
from . import SpanAdapter

# The chat's receiver, on `<sender>.initiate_chat`.
RECIPIENT = "ag2.recipient.name"
# AG2 selects the next speaker through two helper agents of its own; what they
# say is the chat manager's choice, so their spans belong to the manager above them.
HELPER_AGENTS = frozenset({"checking_agent", "speaker_selection_agent"})


def whole_conversation(record: SpanRecord) -> bool:
    """`<sender>.initiate_chat` (the span with `ag2.recipient.name`) is a whole chat: its output is the
    chat's last message, which another agent said."""
    return RECIPIENT in record.attributes


ADAPTER = SpanAdapter(name="ag2", helper_agents=HELPER_AGENTS, whole_conversation=whole_conversation)
