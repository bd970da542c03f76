"""The gateway's step writer: a step the store refuses for good is dropped and counted, not retried for ever;
a run's header never overwrites what is stored (an outcome above all); a failed run whose outcome came before its
steps is attributed once the writer has stored them. On SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from faultlens.gateway_cli import build_gateway_app
from faultlens.middleware.capture.live_gateway import Gateway
from faultlens.middleware.capture.step_writer import PendingWrite, StepWriter, refused_for_good
from faultlens.middleware.capture.upstream import CallableUpstream
from faultlens.middleware.model.trace import AgentInfo, Outcome, Source, Step, StepKind, Task, Trace
from faultlens.middleware.store import open_store
from faultlens.server import create_app

LONE_SURROGATE = "\ud800"  # valid in a Python str, not encodable as UTF-8: no database can store it
QUESTION = "What is the combined population of Rome and Milan?"


@pytest.fixture
def store(store_target):
    s = open_store(store_target)
    yield s
    s.close()


def pending(run_id: str, n: int, content: str = "Rome 2761, Milan 2103.", *, query: str = QUESTION, agent: str = "solver") -> PendingWrite:
    header = Trace(id=run_id, task=Task(query=query), agents=[AgentInfo(name=agent)], source=Source(framework="gateway", format="gateway"))
    step = Step(index=0, agent=agent, kind=StepKind.llm_call, content=content, span_id=f"{n:016x}", started_at=1000.0 + n)
    return PendingWrite(run_id, header, step, new_agent=n == 0)


def reply(agent: str, request: dict) -> dict:
    return {"object": "chat.completion", "model": "double", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": "The combined population is 5364 thousand."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}


# -- finding 2b: a step that can never be written ----------------------------------------------


@pytest.mark.parametrize("exc, for_good", [
    (UnicodeEncodeError("utf-8", LONE_SURROGATE, 0, 1, "surrogates not allowed"), True),
    (ValueError("bad value"), True),
    (OverflowError("Python int too large to convert to SQLite INTEGER"), True),
    (sqlite3.DataError("string or blob too big"), True),
    (sqlite3.IntegrityError("FOREIGN KEY constraint failed"), True),
    (sqlite3.OperationalError("database is locked"), False),
    (OSError("database is unreachable"), False),
    (ConnectionError("connection reset"), False),
])
def test_data_errors_are_for_good_and_outages_are_not(exc, for_good):
    assert refused_for_good(exc) is for_good


def test_psycopg_errors_are_told_apart():
    psycopg = pytest.importorskip("psycopg")
    assert refused_for_good(psycopg.errors.NumericValueOutOfRange("out of range"))
    assert refused_for_good(psycopg.errors.UntranslatableCharacter("no such character"))
    assert not refused_for_good(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not refused_for_good(psycopg.errors.SerializationFailure("could not serialize access"))


def test_a_step_the_store_can_never_write_is_dropped_and_counted_and_later_steps_are_recorded(store):
    writer = StepWriter(store)
    writer.submit(pending("run-a", 0))
    writer.submit(pending("run-a", 1, f"an answer holding {LONE_SURROGATE}"))
    assert writer.flush(20), "the writer is stuck on the step it can never write"
    for n in range(2, 6):
        writer.submit(pending("run-a", n, f"answer {n}"))
    assert writer.flush(20)
    assert (writer.recorded, writer.rejected, writer.dropped) == (5, 1, 1)
    assert writer.store_errors == 0  # not an outage: no retry was counted
    assert "UnicodeEncodeError" in (writer.last_error or "")
    steps = store.get_trace("run-a").steps
    assert [s.content for s in steps] == ["Rome 2761, Milan 2103."] + [f"answer {n}" for n in range(2, 6)]
    writer.close()


def test_a_run_whose_header_can_never_be_written_drops_its_steps_and_other_runs_go_on(store):
    writer = StepWriter(store, max_pending=5)
    writer.submit(pending("run-bad", 0, query=f"a task holding {LONE_SURROGATE}"))
    writer.submit(pending("run-good", 0))
    assert writer.flush(20)
    assert (writer.recorded, writer.rejected, writer.dropped) == (1, 1, 1)
    assert not store.has_trace("run-bad") and len(store.get_trace("run-good").steps) == 1
    writer.close()


class OutageStore:
    """The real store, unreachable (an OperationalError, as a locked or lost database gives) until `down` is cleared."""

    def __init__(self, store: Any):
        self.store = store
        self.down = True

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise sqlite3.OperationalError("database is locked")
            return attribute(*args, **kwargs)

        return call


def test_an_outage_is_still_waited_out_not_rejected(store):
    flaky = OutageStore(store)
    writer = StepWriter(flaky, max_wait=0.05)
    writer.submit(pending("run-o", 0))
    assert not writer.flush(0.3)
    assert writer.store_errors >= 1 and writer.rejected == 0 and writer.queued == 1
    flaky.down = False
    assert writer.flush(10)
    assert (writer.recorded, writer.rejected, writer.dropped) == (1, 0, 0)
    writer.close()


def test_the_gateway_status_counts_rejected_steps(store):
    gateway = Gateway(CallableUpstream(reply), store)
    assert gateway.writer is not None
    gateway.writer.submit(pending("run-s", 0, LONE_SURROGATE))
    gateway.writer.submit(pending("run-s", 1))
    assert gateway.flush(20)
    status = gateway.status()
    assert (status["recorded"], status["rejected"], status["dropped"]) == (1, 1, 1)
    gateway.close()


# -- finding 3: an outcome before the run's steps ----------------------------------------------


def wait_for_attribution(client: TestClient, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        state = client.get(f"/api/runs/{run_id}/attribution").json()
        if state["latest"] is not None or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def call(client: TestClient, run_id: str, agent: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}]}
    answer = client.post(f"/run/{run_id}/agent/{agent}/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text


def test_a_failed_outcome_posted_before_the_steps_are_written_is_attributed(store):
    app, gateway = build_gateway_app(store, CallableUpstream(reply), method="heuristic", workers=1)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        posted = client.post("/api/runs/early/outcome", json={"success": False, "detail": "expected 4864"})
        assert posted.status_code == 200, posted.text
        assert client.get("/api/runs/early/attribution").json()["job"]["state"] == "waiting"
        for agent in ("researcher", "writer"):
            call(client, "early", agent)
        assert gateway.flush(10)
        state = wait_for_attribution(client, "early")
        assert state["latest"] is not None, f"the job was never woken: {state['job']}"
        assert state["latest"]["agent"] in ("researcher", "writer")
    trace = store.get_trace("early")
    assert trace.outcome is not None and not trace.outcome.success
    assert trace.task.query == QUESTION  # the placeholder's empty task is filled from the calls
    gateway.close()


class OutcomeInBetween:
    """The real store, where an outcome is posted just before the writer writes a run's header (as when the
    outcome route's request lands between the writer's look-up and its write)."""

    def __init__(self, store: Any, post_outcome: Any):
        self.store = store
        self.post_outcome = post_outcome
        self.posted = threading.Event()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not name.startswith("begin_trace"):
            return attribute

        def call(trace: Trace, *args: Any, **kwargs: Any) -> Any:
            if not self.posted.is_set():
                self.posted.set()
                self.post_outcome(trace.id)
            return attribute(trace, *args, **kwargs)

        return call


def test_a_header_written_after_an_outcome_never_erases_it(store):
    app, gateway = build_gateway_app(store, CallableUpstream(reply), method="heuristic", workers=1)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        def post_outcome(run_id: str) -> None:
            posted = client.post(f"/api/runs/{run_id}/outcome", json={"success": False, "detail": "expected 4864"})
            assert posted.status_code == 200, posted.text

        assert gateway.writer is not None
        gateway.writer.store = OutcomeInBetween(store, post_outcome)
        call(client, "between", "researcher")
        assert gateway.flush(10) and gateway.writer.store.posted.is_set()
        outcome = store.get_outcome("between")
        assert outcome is not None and not outcome.success and outcome.detail == "expected 4864"
        assert store.get_trace("between").task.query == QUESTION
        assert wait_for_attribution(client, "between")["latest"] is not None
        # The outcome can be posted again: it is there to read (no 500 'has no outcome yet').
        assert client.post("/api/runs/between/outcome", json={"success": False, "detail": "again"}).status_code == 200
    gateway.close()


def test_the_header_is_written_only_if_absent(store):
    store.begin_trace(Trace(id="kept", task=Task(query=""), source=Source(format="otlp")))
    store.set_outcome("kept", Outcome(success=False, evaluator="api"))
    assert not store.begin_trace_if_absent(Trace(id="kept", task=Task(query=QUESTION), source=Source(format="gateway")))
    kept = store.get_trace("kept")
    assert kept.outcome is not None and not kept.outcome.success and kept.source.format == "otlp"
    assert store.begin_trace_if_absent(Trace(id="new", task=Task(query=QUESTION)))
    assert store.get_trace("new").task.query == QUESTION


class StepsArriveDuringLookUp:
    """The real store, where a run's first step is stored just after the outcome route found the run empty."""

    def __init__(self, store: Any, step: Step):
        self.store = store
        self.step = step
        self.done = False

    def get_trace(self, trace_id: str) -> Trace:
        trace = self.store.get_trace(trace_id)
        if not self.done:
            self.done = True
            self.store.add_steps(trace_id, [self.step])  # (its writer looked for a job to wake before there was one)
        return trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_step_stored_while_the_outcome_is_recorded_does_not_leave_the_job_waiting(store):
    step = Step(index=0, agent="solver", kind=StepKind.llm_call, content="Rome 2761, Milan 2103.", span_id="00000000000000aa")
    store.begin_trace(Trace(id="mid", task=Task(query=QUESTION)))
    app = create_app(StepsArriveDuringLookUp(store, step), on_failure=lambda trace_id: None, workers=0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        posted = client.post("/api/runs/mid/outcome", json={"success": False})
        assert posted.status_code == 200, posted.text
        assert client.get("/api/runs/mid/attribution").json()["job"]["state"] == "queued"
