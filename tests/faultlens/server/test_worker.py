"""The background worker: bounded queue, statuses, errors kept, no double queueing."""

from __future__ import annotations

import threading

from faultlens.server.failed_runs import FailureWorker


def test_runs_jobs_in_the_background_and_reports_status():
    seen = []
    worker = FailureWorker(seen.append)
    worker.start()
    try:
        worker.submit("t1")
        worker.submit("t2")
        assert worker.wait_idle(10)
        assert seen == ["t1", "t2"]
        assert worker.status("t1").state == "done" and worker.status("t1").runs == 1
        assert worker.summary()["processed"] == 2
    finally:
        worker.stop()


def test_an_error_is_recorded_and_the_worker_goes_on():
    def on_failure(trace_id):
        if trace_id == "bad":
            raise RuntimeError("model unavailable")

    worker = FailureWorker(on_failure)
    worker.start()
    try:
        worker.submit("bad")
        worker.submit("good")
        assert worker.wait_idle(10)
        assert worker.status("bad").state == "error"
        assert "model unavailable" in worker.status("bad").error
        assert worker.status("good").state == "done"
    finally:
        worker.stop()


def test_a_full_queue_drops_and_says_so():
    gate = threading.Event()
    worker = FailureWorker(lambda _id: gate.wait(10), max_queue=1)
    worker.start()
    try:
        worker.submit("running")
        # Wait until the first job has left the queue for the worker.
        assert _until(lambda: worker.status("running").state == "running")
        assert worker.submit("waiting").state == "queued"
        dropped = worker.submit("overflow")
        assert dropped.state == "dropped" and "queue full" in dropped.error
        assert worker.submit("waiting").state == "queued"  # not queued twice
        assert worker.summary()["queued"] == 1
    finally:
        gate.set()
        worker.stop()


def test_without_on_failure_nothing_runs():
    worker = FailureWorker(None)
    worker.start()
    status = worker.submit("t")
    assert status.state == "dropped" and "no on_failure" in status.error
    worker.stop()


def _until(predicate, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_jobs_live_in_the_store_not_in_the_process(tmp_path):
    """A server that only queues (workers=0) and a worker elsewhere on the same store share one queue;
    finished statuses outlive both (a restarted server still knows them)."""
    from faultlens.middleware.store import open_store

    seen = []
    queue_only = FailureWorker(seen.append, store=open_store(tmp_path / "s.db"), workers=0)
    queue_only.start()
    assert queue_only.submit("t1").state == "queued"
    assert not queue_only.wait_idle(0.3) and seen == []  # nothing here attributes
    elsewhere = FailureWorker(seen.append, store=open_store(tmp_path / "s.db"), poll=0.05)
    elsewhere.start()
    try:
        assert queue_only.wait_idle(10)
        assert seen == ["t1"]
        restarted = FailureWorker(seen.append, store=open_store(tmp_path / "s.db"))
        assert restarted.status("t1").state == "done" and restarted.status("t1").runs == 1
    finally:
        elsewhere.stop()
        queue_only.stop()
