"""Record/replay: exact replay, drift detection, hand-over to live execution."""

import pytest

from faultlens.middleware.replay.session import CallRecord, Drift, Recording, Session


def program(session: Session, x: int) -> list:
    """A toy agent: asks a 'model' twice and a 'tool' once; each answer feeds the next request."""
    calls = {"model": 0, "tool": 0}

    def model(req):
        calls["model"] += 1
        return {"content": f"plan for {req['q']}"}

    def tool(req):
        calls["tool"] += 1
        return {"output": req["arg"] * 2}

    a = session.call("model", "planner", {"q": x}, model)
    b = session.call("tool", "worker", {"arg": len(a["content"])}, tool)
    c = session.call("model", "answerer", {"q": b["output"]}, model)
    return [a, b, c, calls]


def test_record_then_full_replay_has_zero_drift_and_calls_nothing():
    live = Session()
    *answers, calls = program(live, 3)
    assert calls == {"model": 2, "tool": 1}
    recording = Recording.loads(live.recorded.dumps())  # through JSON, as stored
    replay = Session(recording, replay_until=None)
    *again, calls_again = program(replay, 3)
    assert again == answers
    assert calls_again == {"model": 0, "tool": 0}
    assert replay.replayed == 3 and replay.live == 0
    assert all(c.meta.get("replayed") for c in replay.calls)


def test_changed_recorded_request_is_drift():
    live = Session()
    program(live, 3)
    recording = Recording.loads(live.recorded.dumps())
    recording.calls[1].request["arg"] += 1
    with pytest.raises(Drift) as info:
        program(Session(recording, replay_until=3), 3)
    assert info.value.index == 1
    # the same change after the replayed prefix is not drift: that call runs live
    *_, calls = program(Session(recording, replay_until=1), 3)
    assert calls == {"model": 1, "tool": 1}


def test_replay_prefix_then_live_and_override():
    live = Session()
    program(live, 3)
    recording = live.recorded
    session = Session(recording, replay_until=1, overrides={1: lambda rec: {"output": rec.response["output"] + 1}})
    a, b, c, calls = program(session, 3)
    assert b["output"] == recording[1].response["output"] + 1  # the override saw the recorded response
    assert calls == {"model": 1, "tool": 0}  # call 0 replayed, call 1 overridden, call 2 live
    assert c["content"] == f"plan for {b['output']}"
    assert [bool(x.meta.get("replayed")) for x in session.calls] == [True, False, False]
    assert session.calls[1].meta == {"overridden": True}


def test_full_replay_rejects_extra_calls_and_bad_bounds():
    live = Session()
    live.call("model", "a", {"q": 1}, lambda r: {"content": "x"})
    session = Session(live.recorded, replay_until=None)
    session.call("model", "a", {"q": 1}, lambda r: pytest.fail("must not call live"))
    with pytest.raises(Drift):
        session.call("model", "a", {"q": 2}, lambda r: {"content": "y"})
    with pytest.raises(ValueError):
        Session(live.recorded, replay_until=5)


def test_caller_change_is_drift():
    rec = Recording([CallRecord(0, "model", "planner", {"q": 1}, {"content": "x"})])
    with pytest.raises(Drift):
        Session(rec, replay_until=1).call("model", "reader", {"q": 1}, lambda r: {"content": "x"})


def test_reuse_unchanged_serves_recorded_answers_until_a_request_changes():
    live = Session()
    program(live, 3)
    recording = Recording.loads(live.recorded.dumps())
    # The tool's recorded answer is odd (as if a fault had been injected there); the last call saw it.
    recording.calls[1].response["output"] = 999
    recording.calls[2].request["q"] = 999
    recording.calls[2].response["content"] = "plan for 999"

    # Regenerating call 1 live gives a different answer, so call 2's request changes and it runs live.
    session = Session(recording, replay_until=1, reuse_unchanged_from=2)
    a, b, c, calls = program(session, 3)
    assert b["output"] != 999 and c["content"] == f"plan for {b['output']}"
    assert calls == {"model": 1, "tool": 1} and session.reused == 0

    # An override equal to the recorded answer changes nothing downstream: call 2 is reused, not re-asked.
    session = Session(recording, replay_until=1, overrides={1: lambda rec: rec.response}, reuse_unchanged_from=2)
    a, b, c, calls = program(session, 3)
    assert c["content"] == "plan for 999"
    assert calls == {"model": 0, "tool": 0} and session.reused == 1
    assert session.calls[2].meta == {"reused": True}


def test_drift_shows_where_two_long_requests_first_differ():
    shared = "You are the chart reader. " * 20
    recording = Recording([CallRecord(0, "model", "a", {"text": shared + "bars: 75, 58"}, {"ok": 1})])
    with pytest.raises(Drift) as info:
        Session(recording, replay_until=1).call("model", "a", {"text": shared + "bars: 75, 56"}, lambda r: {})
    message = str(info.value)
    assert "bars: 75, 58" in message and "bars: 75, 56" in message and message.count("...") == 2
