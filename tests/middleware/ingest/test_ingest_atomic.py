"""One transaction per ingested batch: a process killed mid-batch leaves nothing of it; cost does not grow with the run."""

import os
import subprocess
import sys
import textwrap

from faultlens.middleware import open_store
from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans.record import SpanRecord


def _records(trace: str, n: int, start: int = 0) -> list[SpanRecord]:
    return [
        SpanRecord(
            trace_id=trace * 32, span_id=f"{i + 1:016x}", parent_id=None, name="chat", start_ns=1_000 + i, end_ns=2_000 + i,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": "a", "gen_ai.conversation.id": trace * 32, "faultlens.content": f"step {i}"},
        )
        for i in range(start, start + n)
    ]


# Dies (like SIGKILL: no cleanup, no atexit) inside the transaction, after the
# first run's header and steps have been written and before the second run's are.
KILLED_MID_BATCH = textwrap.dedent(
    """
    import os, sys
    from faultlens.middleware import open_store
    from faultlens.middleware.ingest.write import ingest
    from faultlens.middleware.spans.record import SpanRecord
    from faultlens.middleware.store import SQLiteStore

    def records(trace, n):
        return [SpanRecord(trace_id=trace * 32, span_id=f"{i + 1:016x}", parent_id=None, name="chat", start_ns=i, end_ns=i,
                           attributes={"gen_ai.operation.name": "chat", "gen_ai.conversation.id": trace * 32}) for i in range(n)]

    store = open_store(sys.argv[1])
    written = []
    original = SQLiteStore.add_steps

    def add_steps_then_die(self, trace_id, steps, **options):
        original(self, trace_id, steps, **options)
        written.append(trace_id)
        if len(written) == 2:
            os._exit(9)

    SQLiteStore.add_steps = add_steps_then_die
    ingest(store, records("a", 500) + records("b", 500) + records("c", 500))
    """
)


def test_a_process_killed_mid_batch_leaves_nothing_of_the_batch(tmp_path):
    db = tmp_path / "k.db"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    code = subprocess.run([sys.executable, "-c", KILLED_MID_BATCH, str(db)], env=env, timeout=120).returncode
    assert code == 9
    store = open_store(db)
    assert store.count_traces() == 0


def test_a_bad_span_late_in_a_batch_stores_nothing_of_it(tmp_path):
    store = open_store(tmp_path / "b.db")
    bad = _records("e", 1)[0]
    bad.attributes["faultlens.step.kind"] = "no-such-kind"
    try:
        ingest(store, _records("d", 50) + [bad])
    except Exception as exc:  # noqa: BLE001 - the error type is checked below
        assert "faultlens.step.kind" in str(exc)
    else:
        raise AssertionError("a bad span was accepted")
    assert store.count_traces() == 0


def test_batches_into_a_growing_run_keep_order_and_ids(tmp_path):
    store = open_store(tmp_path / "g.db")
    for k in range(5):
        ingest(store, _records("f", 200, start=200 * k))
    ingest(store, _records("f", 10, start=0))  # the first ten again: replaced, not duplicated
    steps = store.get_trace("f" * 32).steps
    assert len(steps) == 1000 and [s.content for s in steps[:3]] == ["step 0", "step 1", "step 2"]
    assert [s.index for s in steps] == list(range(1000))


def _statements_to_ingest(store, records) -> list[str]:
    seen: list[str] = []
    conn = store._db().conn  # the store's own connection: what ingest really asks SQLite
    conn.set_trace_callback(seen.append)
    try:
        ingest(store, records)
    finally:
        conn.set_trace_callback(None)
    return seen


def test_ingest_work_does_not_grow_with_the_run_it_adds_to(tmp_path):
    """Issue #20 item 5: a batch into a run of 2,000 steps asks SQLite no more than a batch into a run of 200, and no
    statement scans the run's steps (the timing is measured in scripts/bench_big_run.py)."""
    store = open_store(tmp_path / "big.db")
    ingest(store, _records("a" * 32, 200))
    small = _statements_to_ingest(store, _records("a" * 32, 50, start=200))
    for k in range(10):
        ingest(store, _records("b" * 32, 200, start=200 * k))
    grown = _statements_to_ingest(store, _records("b" * 32, 50, start=2000))
    assert len(grown) <= len(small)
    conn = store._db().conn
    for sql in {s for s in grown if "steps" in s and s.lstrip().upper().startswith("SELECT")}:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "SCAN steps" not in plan, (sql, plan)


def test_a_new_run_skips_the_look_ups_its_first_read_answered(tmp_path):
    """Issue #17: one read tells that a run is new; its next seq, its stored tree and its updated_at need no statement."""
    store = open_store(tmp_path / "new.db")
    fresh = " | ".join(_statements_to_ingest(store, _records("n", 20)))
    for skipped in ("SELECT 1 FROM traces", "MAX(seq)", "UPDATE traces SET updated_at", "waiting_on IN", "SELECT key, seq"):
        assert skipped not in fresh, skipped
    again = " | ".join(_statements_to_ingest(store, _records("n", 20, start=20)))
    assert "MAX(seq)" in again and "UPDATE traces SET updated_at" in again
    steps = store.get_trace("n" * 32).steps
    assert [s.content for s in steps] == [f"step {i}" for i in range(40)]
