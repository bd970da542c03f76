"""`RerunUpstream`: a re-run's prefix replays against requests as the store kept them (secrets redacted)."""

from __future__ import annotations

import pytest

from faultlens.middleware.capture.rerun_upstream import RerunUpstream
from faultlens.middleware.capture.upstream import CallableUpstream
from faultlens.middleware.replay.gateway_calls import request_key
from faultlens.middleware.replay.session import CallRecord, Recording
from faultlens.middleware.store.redact import REDACTED, redact


def completion(text: str) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


# A prompt that holds a key (the store redacts it), and an image whose base64 holds an AWS-key-shaped run by chance.
SECRET_PROMPT = [{"role": "system", "content": "Use key AKIAIOSFODNN7EXAMPLE for the archive."}, {"role": "user", "content": "go"}]
BYTES = "iVBORw0KGgoAAAANSUhEUgAAAQhABIAABCAAEQACEIAARD4FsBblRcadgNA2wDqGxAkZI4S2AXJLdE94D8CNgLugnCBTBcCNgI0Lg=="
PICTURE = "data:image/png;base64," + BYTES
IMAGE_PROMPT = [{"role": "user", "content": [{"type": "text", "text": "read the chart"},
                                             {"type": "image_url", "image_url": {"url": PICTURE}}]}]


def stored(messages: list) -> dict:
    """The request as a recording rebuilt from the store holds it."""
    return redact(request_key(messages, {"model": "m"}))


def test_a_request_whose_secret_the_store_redacted_still_replays():
    assert REDACTED in str(stored(SECRET_PROMPT))  # what the store kept differs from what the program sends
    recording = Recording([CallRecord(0, "model", "a", stored(SECRET_PROMPT), completion("recorded")),
                           CallRecord(1, "model", "b", request_key([{"role": "user", "content": "next"}], {"model": "m"}),
                                      completion("wrong"))])
    live: list[str] = []
    rerun = RerunUpstream(recording, 1, CallableUpstream(lambda agent, request: live.append(agent) or completion("live")),
                          replacement="corrected")
    reply = rerun.complete("a", {"model": "m", "messages": SECRET_PROMPT})
    assert rerun.drift is None and reply["choices"][0]["message"]["content"] == "recorded" and live == []
    assert rerun.complete("b", {"model": "m", "messages": [{"role": "user", "content": "next"}]})["choices"][0]["message"]["content"] == "corrected"


def test_an_inline_image_is_stored_whole_and_replays():
    assert redact(BYTES) != BYTES  # as text, the chance run would be cut out of the picture
    assert stored(IMAGE_PROMPT) == request_key(IMAGE_PROMPT, {"model": "m"})
    recording = Recording([CallRecord(0, "model", "reader", stored(IMAGE_PROMPT), completion("75")),
                           CallRecord(1, "model", "lead", request_key([{"role": "user", "content": "75"}], {"model": "m"}),
                                      completion("wrong"))])
    rerun = RerunUpstream(recording, 1, CallableUpstream(lambda agent, request: completion("live")), replacement="right")
    assert rerun.complete("reader", {"model": "m", "messages": IMAGE_PROMPT})["choices"][0]["message"]["content"] == "75"
    assert rerun.drift is None


def test_a_control_with_a_later_call_drawn_beforehand_replays_up_to_it_puts_its_draw_there_and_goes_live_after():
    asks = [[{"role": "user", "content": f"call {i}"}] for i in range(4)]
    recording = Recording([CallRecord(i, "model", "a", request_key(asks[i], {"model": "m"}), completion(f"recorded {i}"))
                           for i in range(4)])
    live: list[str] = []
    rerun = RerunUpstream(recording, 0, CallableUpstream(lambda agent, request: live.append(agent) or completion("live")),
                          control=True, drawn_later=(2, completion("drawn before")))
    replies = [rerun.complete("a", {"model": "m", "messages": ask})["choices"][0]["message"]["content"] for ask in asks]
    # Call 1 gave its recorded reply when drawn first, so it replays; call 2 gets its draw; call 3 is asked anew even
    # though it asks what was recorded (a control draws every later call anew).
    assert replies == ["recorded 0", "recorded 1", "drawn before", "live"] and live == ["a"]
    assert rerun.drift is None and rerun.live_calls == 2 and rerun.corrected is None


def test_a_control_drawn_beforehand_must_name_a_later_call():
    recording = Recording([CallRecord(i, "model", "a", {"i": i}, completion("x")) for i in range(2)])
    upstream = CallableUpstream(lambda agent, request: completion("live"))
    for position in (0, 2):  # the control's own call, and one past the recording
        with pytest.raises(ValueError, match="drawn_later"):
            RerunUpstream(recording, 0, upstream, control=True, drawn_later=(position, completion("y")))
