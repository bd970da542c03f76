"""`draw_control`: a control's later calls drawn before the program is re-run (no program, no gateway needed)."""

from __future__ import annotations

from faultlens.middleware.capture.upstream import CallableUpstream, UpstreamError
from faultlens.middleware.replay.session import CallRecord, Recording
from faultlens.rerun.trial import TrialSpec, draw_control


def completion(text: str) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


RECORDING = Recording([CallRecord(i, "model", "a", {"i": i}, completion(f"reply {i}")) for i in range(4)])
LATER = [("a", {"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]}) for i in range(2, 4)]
SPEC = TrialSpec(RECORDING, 1, 5, "the task", control=True)  # call 1 is the run's step 5


def test_every_later_draw_giving_its_recorded_reply_ends_the_control_without_a_rerun():
    asked: list[str] = []

    def same(agent, request):
        asked.append(request["messages"][0]["content"])
        return completion(f"reply {len(asked) + 1}")  # calls 2 and 3 answered as recorded

    trial = draw_control(SPEC, LATER, CallableUpstream(same))
    assert asked == ["call 2", "call 3"]
    assert (trial.step, trial.success, trial.control, trial.as_recorded, trial.reran) == (5, False, True, True, False)
    assert trial.outcome == "failure" and "not re-run" in trial.detail


def test_the_first_later_draw_that_differs_is_where_the_control_re_runs_from():
    asked: list[str] = []

    def differs(agent, request):
        asked.append(request["messages"][0]["content"])
        return completion("something new")

    position, drawn = draw_control(SPEC, LATER, CallableUpstream(differs))
    assert position == 2 and drawn["choices"][0]["message"]["content"] == "something new"
    assert asked == ["call 2"]  # call 3 is left to the program's re-run


def test_an_upstream_that_fails_a_later_draw_shows_nothing():
    def failing(agent, request):
        raise UpstreamError(503, b"overloaded")

    trial = draw_control(SPEC, LATER, CallableUpstream(failing))
    assert trial.outcome == "upstream_error" and trial.reran is False and "call 2" in trial.detail
