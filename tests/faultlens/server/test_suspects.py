"""Suspected failures in the live loop: a finished run with no outcome is scored by the shipped failure detector,
suspected, queued and attributed like a failed run, listed apart, confirmed by a person's click, and then a failed run
that the detector's training reads (SQLite and PostgreSQL)."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from faultlens.feedback.loop import attribute_and_reflect
from faultlens.middleware.model.trace import Outcome, Step, StepKind, Task, Trace
from faultlens.middleware.sources import load_store_spec
from faultlens.middleware.store import open_store
from faultlens.server import create_app
from faultlens.wiring import failure_detector

LOCAL = "http://127.0.0.1"


def finished_run(run_id: str, answer: str) -> Trace:
    steps = [Step(index=0, agent="researcher", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Munich"},
                  error="no entry for 'Munich'", content="lookup(Munich)"),
             Step(index=1, agent="researcher", kind=StepKind.message, content="Rome has 2761 thousand people."),
             Step(index=2, agent="writer", kind=StepKind.final_answer, content=answer)]
    return Trace(id=run_id, task=Task(query="How many people live in Rome and Munich together?"), steps=steps)


@pytest.fixture
def store(store_target):
    store = open_store(store_target)
    yield store
    store.close()


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_suspected_run_is_detected_attributed_shown_apart_confirmed_and_trained_on(store, store_target):
    score = failure_detector()
    assert score is not None, "the shipped detector loads"
    store.save_trace(finished_run("quiet-fail", "Together 2761 thousand people."))
    store.save_trace(finished_run("ok-run", "Rome 2761 and Munich 1488: 4249 thousand.").model_copy(update={"outcome": Outcome(success=True)}))
    app = create_app(store, on_failure=lambda trace_id: attribute_and_reflect(store, trace_id, "heuristic"), workers=1,
                     score_run=score, suspect_above=0.0)  # every scored run is suspected: the flow, not the threshold, is tested
    with TestClient(app, base_url=LOCAL) as client:
        sweep = app.state.suspects
        assert sweep.sweep_once(now=time.time()) == []  # just written: not finished yet (no step for `idle` seconds)
        assert sweep.sweep_once(now=time.time() + 3600) == ["quiet-fail"]  # the run with an outcome is never scored
        p_failed, suspected = store.detection("quiet-fail")
        assert suspected and 0.0 <= p_failed <= 1.0
        wait_for(lambda: store.attributions("quiet-fail"))  # queued and attributed like a failed run
        assert store.get_outcome("quiet-fail") is None  # but not a failed run
        assert [s.id for s in store.list_traces(status="suspected")] == ["quiet-fail"]
        assert [r["id"] for r in client.get("/api/runs", params={"status": "suspected"}).json()] == ["quiet-fail"]
        runs_page = client.get("/").text
        assert "suspected" in runs_page and runs_page.index("quiet-fail") < runs_page.index("ok-run")
        page = client.get("/runs/quiet-fail").text
        assert 'id="suspected-badge"' in page and 'id="confirm-failure"' in page
        # A person's click: confirmed.
        clicked = client.post("/runs/quiet-fail/suspicion", content="failed=1", headers={"content-type": "application/x-www-form-urlencoded"},
                              follow_redirects=False)
        assert clicked.status_code == 303
        outcome = store.get_outcome("quiet-fail")
        assert outcome is not None and outcome.success is False and outcome.evaluator == "person"
        assert store.list_traces(status="suspected") == [] and "quiet-fail" in [s.id for s in store.list_traces(status="failed")]
        assert client.post("/api/runs/quiet-fail/suspicion", json={"failed": False}).status_code == 409  # decided already
    # The detector's training reads runs with outcomes from a store (`scripts/detect_train.py --extra store:DB`): this one is a failure.
    trained = {t.id: t.outcome for t in load_store_spec(store_target) if t.outcome is not None}
    assert trained["quiet-fail"].success is False and trained["ok-run"].success is True


def test_a_dismissed_suspicion_is_a_success_and_a_run_that_cannot_be_judged_is_left_alone(store):
    store.save_trace(finished_run("maybe", "Together 2761 thousand people."))
    store.save_trace(Trace(id="empty", task=Task(query="q")))
    app = create_app(store, workers=0, score_run=lambda trace: 0.9, suspect_above=0.5)
    with TestClient(app, base_url=LOCAL) as client:
        assert app.state.suspects.sweep_once(now=time.time() + 3600) == ["maybe"]  # a run with no steps is not scored
        assert store.detection("empty") == (None, False)
        dismissed = client.post("/api/runs/maybe/suspicion", json={"failed": False})
        assert dismissed.status_code == 200 and store.get_outcome("maybe").success is True
        assert client.post("/api/runs/empty/suspicion", json={"failed": True}).status_code == 409


def test_below_the_threshold_a_run_is_scored_but_not_suspected(store):
    store.save_trace(finished_run("fine", "Rome 2761 and Munich 1488: 4249 thousand."))
    app = create_app(store, workers=0, score_run=lambda trace: 0.2, suspect_above=0.5)
    with TestClient(app, base_url=LOCAL):
        assert app.state.suspects.sweep_once(now=time.time() + 3600) == []
    assert store.detection("fine") == (0.2, False)
    assert store.list_traces(status="suspected") == []
