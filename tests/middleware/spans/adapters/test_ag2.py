"""The AG2 adapter: its speaker-selection helpers speak for the chat manager; a whole chat is no step."""

from faultlens.middleware.spans.mapping import agent_of, span_to_step
from tests.middleware.spans.test_mapping import oi, sid


def test_speaker_selection_helpers_name_no_agent():
    # AG2's speaker-selection helpers speak for the chat manager above them
    assert agent_of(oi(sid(1), "checking_agent.initiate_chat", "AGENT", **{"agent.name": "checking_agent"})) is None


def test_a_whole_chat_is_no_step_unless_it_failed():
    chat = {"agent.name": "user_proxy", "ag2.recipient.name": "chat_manager", "output.value": "the last message, said by another agent"}
    assert span_to_step(oi(sid(1), "user_proxy.initiate_chat", "AGENT", **chat)) is None
    failed = span_to_step(oi(sid(1), "user_proxy.initiate_chat", "AGENT", status="error", message="boom", **chat))
    assert failed is not None and failed.agent == "user_proxy" and failed.error == "boom"
    # the same span without the recipient is the agent's own message
    said = span_to_step(oi(sid(1), "user_proxy.initiate_chat", "AGENT", **{"agent.name": "user_proxy", "output.value": "hello"}))
    assert said is not None and said.content == "hello"
