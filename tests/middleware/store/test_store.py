import subprocess
import sys
import threading
import time

import pytest

from faultlens.middleware import Attribution, Lesson, Outcome, Step, Task, Trace, open_store
from faultlens.middleware.store.postgres import PostgresStore
from faultlens.middleware.store.sqlite import SQLiteDialect
from faultlens.middleware.store import STORE_SCHEMA_VERSION, TraceNotFound
from tests.middleware.model.test_trace import sample_trace


def raw(store, sql: str) -> list:
    """Rows straight from the backend's tables (no model in between)."""
    if isinstance(store, PostgresStore):
        with store._pool.connection() as conn:
            return conn.execute(sql).fetchall()
    return store._db().execute(sql).fetchall()


def test_save_and_get_trace(store):
    trace = sample_trace()
    store.save_trace(trace)
    assert store.get_trace(trace.id) == trace
    assert [s.id for s in store.list_traces(status="failed")] == [trace.id]
    assert store.list_traces(status="succeeded") == []
    assert store.list_traces(agent="viewer")[0].n_steps == 4


def test_wal_mode(tmp_path):
    store = open_store(tmp_path / "f.db")
    assert store._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_saving_again_replaces(store):
    trace = sample_trace()
    store.save_trace(trace)
    shorter = trace.model_copy(update={"steps": trace.steps[:2], "gold": None})
    store.save_trace(shorter)
    assert len(store.get_trace(trace.id).steps) == 2


def test_missing_trace(store):
    with pytest.raises(TraceNotFound, match="traces list"):
        store.get_trace("nope")


def test_same_span_twice_is_idempotent_and_order_is_by_start(store):
    store.begin_trace(Trace(id="t1", task=Task(query="q")))
    later = Step(index=0, agent="b", span_id="s2", started_at=2.0, content="second")
    earlier = Step(index=0, agent="a", span_id="s1", started_at=1.0, content="first")
    store.add_step("t1", later)
    store.add_step("t1", earlier)
    store.add_step("t1", later.model_copy(update={"content": "second (final)"}))
    trace = store.get_trace("t1")
    assert [(s.index, s.agent, s.content) for s in trace.steps] == [(0, "a", "first"), (1, "b", "second (final)")]
    store.set_outcome("t1", Outcome(success=False))
    assert store.get_trace("t1").failed


def test_secrets_are_redacted_before_storage(store):
    trace = Trace(
        task=Task(query="use key sk-proj-abcdefghijklmnopqrstuv"),
        steps=[Step(index=0, agent="a", tool_arguments={"api_key": "hunter2", "q": "x"}, content="Authorization: Bearer abc.def.ghijklmnop")],
    )
    store.save_trace(trace)
    stored = store.get_trace(trace.id)
    text = raw(store, "SELECT data FROM steps")[0][0] + raw(store, "SELECT task FROM traces")[0][0]
    assert "hunter2" not in text and "abcdefghijklmnopqrstuv" not in text and "ghijklmnop" not in text
    assert stored.steps[0].tool_arguments == {"api_key": "[REDACTED]", "q": "x"}


def test_many_threads_write_at_once(store):
    def work(n):
        for i in range(20):
            t = Trace(id=f"t{n}-{i}", task=Task(query="q"), steps=[Step(index=j, agent=f"a{n}") for j in range(3)])
            store.save_trace(t)
            store.add_step(t.id, Step(index=3, agent=f"a{n}", span_id=f"sp{n}-{i}", started_at=99.0))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count_traces() == 120
    assert all(len(store.get_trace(f"t{n}-{i}").steps) == 4 for n in range(6) for i in range(20))


_WRITER = """
import sys
from faultlens.middleware import Step, Task, Trace, open_store
store = open_store(sys.argv[1])
for i in range(150):
    trace = Trace(id=f"{sys.argv[2]}-{i}", task=Task(query="q"), steps=[Step(index=0, agent="a")])
    with store.batch([trace.id]):
        store.count_traces()  # a read before the write, as an OTLP ingest reads the run's outcome first
        store.save_trace(trace)
"""


def test_two_processes_write_one_sqlite_file_at_once(tmp_path):
    # Each transaction reads, then writes. With a deferred BEGIN the second process cannot wait for the first one's
    # write lock and SQLite fails it at once ("database is locked"); two `faultlens serve` processes did.
    path = tmp_path / "shared.db"
    open_store(path).close()
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name], stderr=subprocess.PIPE, text=True)
               for name in ("left", "right")]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert open_store(path).count_traces() == 300


def test_failed_batch_stores_nothing(store):
    store.save_trace(sample_trace())

    def batch():
        yield Trace(task=Task(query="ok"))
        raise ValueError("record 2 is broken")

    with pytest.raises(ValueError):
        store.save_traces(batch())
    assert store.count_traces() == 1


def test_attributions_and_lessons(store):
    a = Attribution(trace_id="t", method="heuristic", step=1, agent="x")
    store.save_attribution(a)
    assert store.attributions("t") == [a]
    lesson = Lesson(agent="x", situation="s", mistake="m", advice="a")
    store.save_lesson(lesson)
    retired = Lesson(agent="x", situation="s2", mistake="m", advice="a", retired=True)
    store.save_lesson(retired)
    assert store.lessons(agent="x") == [lesson]
    assert len(store.lessons(include_retired=True)) == 2
    assert store.get_lesson(lesson.id) == lesson


# -- the same semantics, both backends ---------------------------------------------------


def test_a_batch_lands_together_or_not_at_all(store):
    with store.batch(["b1"]):
        store.begin_trace(Trace(id="b1", task=Task(query="q")))
        store.add_step("b1", Step(index=0, agent="a", span_id="s1", started_at=1.0))
        assert store.has_trace("b1")  # the batch reads its own writes
    assert len(store.get_trace("b1").steps) == 1
    with pytest.raises(RuntimeError):
        with store.batch(["b2", "b1"]):
            store.begin_trace(Trace(id="b2", task=Task(query="q")))
            store.add_step("b1", Step(index=0, agent="a", span_id="s2", started_at=2.0))
            raise RuntimeError("the request broke half way")
    assert not store.has_trace("b2")
    assert len(store.get_trace("b1").steps) == 1


def test_text_with_nul_and_unicode_round_trips(store):
    trace = Trace(task=Task(query="naïve \x00 query ☃"), steps=[Step(index=0, agent="a", content="zero \x00 byte, 日本語")])
    store.save_trace(trace)
    assert store.get_trace(trace.id) == trace


def test_schema_version_is_recorded_and_reopening_keeps_data(store_target):
    from faultlens.middleware.store import STORE_SCHEMA_VERSION

    store = open_store(store_target)
    assert store.schema_version() == STORE_SCHEMA_VERSION
    store.save_trace(sample_trace())
    store.close()
    again = open_store(store_target)
    assert again.schema_version() == STORE_SCHEMA_VERSION and again.count_traces() == 1
    again.close()


def test_a_store_from_a_newer_faultlens_is_refused(store_target):
    from faultlens.middleware.store.sqlite import STORE_SCHEMA_VERSION, SchemaTooNew

    store = open_store(store_target)
    if isinstance(store, PostgresStore):
        with store._pool.connection() as conn:
            conn.execute("INSERT INTO store_schema VALUES (%s, 0)", [STORE_SCHEMA_VERSION + 1])
    else:
        with store._write() as db:
            db.execute("INSERT INTO store_schema VALUES (?, 0)", [STORE_SCHEMA_VERSION + 1])
    store.close()
    with pytest.raises(SchemaTooNew, match="upgrade faultlens"):
        open_store(store_target)


def test_a_sqlite_file_from_before_versions_is_migrated(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE traces (id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success INTEGER, framework TEXT, benchmark TEXT, modality TEXT, format TEXT, created_at REAL, updated_at REAL, task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)")
    conn.execute("INSERT INTO traces (id, schema_version, query, task, created_at, updated_at) VALUES ('old', '1', 'q', '{\"query\": \"q\"}', 1, 1)")
    conn.commit()
    conn.close()
    store = open_store(path)
    assert store.schema_version() == STORE_SCHEMA_VERSION and store.get_trace("old").task.query == "q"
    assert store.get_job("old") is None  # the jobs table was added


def test_urls_survive_pathlib_and_hide_passwords():
    from pathlib import Path

    from faultlens.middleware.store.sqlite import describe, store_url

    url = "postgresql://u:secret@db.example:5432/faultlens?sslmode=require"
    assert store_url(Path(url)) == url and store_url(url) == url
    assert store_url("runs.db") is None and store_url(Path("/tmp/x.db")) is None
    assert describe(url) == "postgresql://u:***@db.example:5432/faultlens?sslmode=require"


def test_faultlens_db_may_be_a_url(monkeypatch, pg_url):
    monkeypatch.setenv("FAULTLENS_DB", pg_url)
    store = open_store()
    assert isinstance(store, PostgresStore)
    store.close()


def test_an_unreachable_database_is_named_in_the_error():
    from faultlens.middleware.errors import FaultlensError

    with pytest.raises(FaultlensError, match=r"cannot open the PostgreSQL store at postgresql://u:\*\*\*@127.0.0.1:1/x"):
        open_store("postgresql://u:pw@127.0.0.1:1/x")


# -- the job queue's rows ----------------------------------------------------------------


def test_jobs_are_claimed_once_leased_and_finished(store):
    assert store.submit_job("t1").state == "queued"
    assert store.submit_job("t1").state == "queued"  # not queued twice
    store.submit_job("t2")
    first = store.claim_job("w1", lease=30, max_attempts=3)
    second = store.claim_job("w2", lease=30, max_attempts=3)
    assert {first.trace_id, second.trace_id} == {"t1", "t2"} and first.state == "running" and first.attempts == 1
    assert store.claim_job("w3", lease=30, max_attempts=3) is None
    assert store.renew_job(first, lease=30)
    assert store.finish_job(first)
    assert store.get_job(first.trace_id).state == "done" and store.get_job(first.trace_id).runs == 1
    assert store.job_counts() == {"done": 1, "running": 1}


def test_an_expired_lease_is_claimed_again_and_the_old_holder_is_fenced_off(store):
    store.submit_job("t")
    lost = store.claim_job("dead-worker", lease=0.05, max_attempts=3)
    time.sleep(0.1)
    again = store.claim_job("w2", lease=30, max_attempts=3)
    assert again.trace_id == "t" and again.attempts == 2 and again.key == lost.key
    assert not store.finish_job(lost) and not store.renew_job(lost, lease=30)
    assert store.finish_job(again) and store.get_job("t").state == "done"


def test_failures_are_retried_then_given_up(store):
    store.submit_job("t")
    job = store.claim_job("w", lease=30, max_attempts=2)
    assert store.finish_job(job, error="boom", retry_in=0.05)
    assert store.get_job("t").state == "queued" and store.claim_job("w", lease=30, max_attempts=2) is None  # backing off
    time.sleep(0.1)
    job = store.claim_job("w", lease=30, max_attempts=2)
    assert job.attempts == 2
    store.finish_job(job, error="boom again")
    assert store.get_job("t").state == "error" and store.get_job("t").error == "boom again"
    lost = store.submit_job("u")
    store.claim_job("w", lease=0.01, max_attempts=1)
    time.sleep(0.05)
    assert store.claim_job("w", lease=30, max_attempts=1) is None
    assert "gave up after 1 attempts" in store.get_job(lost.trace_id).error


def test_leases_lost_with_their_worker_do_not_use_up_the_jobs_attempts(store):
    """Issue #33: two workers killed mid-job leave the handler all of its three attempts."""
    from faultlens.middleware.store.jobs import JobQueue

    store.submit_job("t")
    for _ in range(2):
        assert store.claim_job("killed-worker", lease=0.05, max_attempts=3) is not None
        time.sleep(0.1)
    calls = []

    def fail(job):
        calls.append((job.attempts, job.lost, job.failures))
        raise RuntimeError("boom")

    queue = JobQueue(store, fail, workers=0, max_attempts=3, retry_backoff=0.0)
    for expected in ("queued", "queued", "error"):
        assert queue.run_one("w") is not None
        assert store.get_job("t").state == expected
    assert calls == [(3, 2, 1), (4, 2, 2), (5, 2, 3)]
    # A run whose every worker dies is still given up: after max_attempts lost leases.
    store.submit_job("poison")
    for _ in range(3):
        assert store.claim_job("killed-worker", lease=0.05, max_attempts=3).trace_id == "poison"
        time.sleep(0.1)
    assert store.claim_job("w", lease=30, max_attempts=3) is None
    job = store.get_job("poison")
    assert job.state == "error" and job.lost == 3 and "ran out 3 time(s)" in job.error


def test_queueing_a_finished_run_again_is_a_new_generation(store):
    store.submit_job("t")
    job = store.claim_job("w", lease=30, max_attempts=3)
    store.finish_job(job)
    assert store.submit_job("t").state == "done"  # a run is queued once...
    again = store.submit_job("t", again=True)  # ...unless asked again
    assert again.state == "queued" and again.generation == 2 and again.key != job.key and again.runs == 1


def test_hold_then_submit_and_a_full_queue_drops(store):
    assert store.submit_job("t", hold=True).state == "waiting"
    assert store.submit_job("t").state == "queued"
    dropped = store.submit_job("u", max_queued=1)
    assert dropped.state == "dropped" and "queue full" in dropped.error
    assert store.submit_job("v", drop_reason="nothing attributes here").error == "nothing attributes here"


def test_many_threads_claim_each_job_exactly_once(store):
    for n in range(40):
        store.submit_job(f"t{n}")
    claimed: list[str] = []
    lock = threading.Lock()

    def work(w):
        while (job := store.claim_job(f"w{w}", lease=30, max_attempts=3)) is not None:
            with lock:
                claimed.append(job.trace_id)
            store.finish_job(job)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(f"t{n}" for n in range(40))
    assert store.job_counts() == {"done": 40}


def test_a_version_3_store_gets_the_step_order_index(store_target):
    """Migration 4 (steps(trace_id, seq)) is applied to a store made before it, on both backends."""
    store = open_store(store_target)
    index = "SELECT indexname FROM pg_indexes WHERE indexname = 'steps_trace_seq'" if isinstance(store, PostgresStore) else \
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'steps_trace_seq'"
    assert raw(store, index)
    # Back to version 3: without the index, the later migrations' column and their rows, as a store written before them.
    if isinstance(store, PostgresStore):
        with store._pool.connection() as conn:
            conn.execute("DROP INDEX steps_trace_seq")
            conn.execute("ALTER TABLE jobs DROP COLUMN lost")
            conn.execute("ALTER TABLE traces DROP COLUMN p_failed")
            conn.execute("ALTER TABLE traces DROP COLUMN suspected")
            conn.execute("DELETE FROM store_schema WHERE version >= 4")
    else:
        with store._write() as db:
            db.execute("DROP INDEX steps_trace_seq")
            db.execute("ALTER TABLE jobs DROP COLUMN lost")
            db.execute("ALTER TABLE traces DROP COLUMN p_failed")
            db.execute("ALTER TABLE traces DROP COLUMN suspected")
            db.execute("DELETE FROM store_schema WHERE version >= 4")
    store.close()
    store = open_store(store_target)
    assert store.schema_version() == STORE_SCHEMA_VERSION and raw(store, index)
    assert store.submit_job("t").lost == 0  # migration 5's column
    store.begin_trace(Trace(id="scored", task=Task(query="q")))
    store.set_detection("scored", 0.8, True)  # migration 8's columns
    assert store.detection("scored") == (0.8, True)
    store.close()


def test_a_version_5_store_gets_the_otel_trace_ids_of_steps(store_target):
    """Migration 6 (otel_spans) on a store made before it; the ids go with their run, and a run whose id holds a secret keeps them."""
    store = open_store(store_target)
    if isinstance(store, PostgresStore):
        with store._pool.connection() as conn:
            conn.execute("DROP TABLE otel_spans")
            conn.execute("ALTER TABLE traces DROP COLUMN p_failed")
            conn.execute("ALTER TABLE traces DROP COLUMN suspected")
            conn.execute("DELETE FROM store_schema WHERE version >= 6")
    else:
        with store._write() as db:
            db.execute("DROP TABLE otel_spans")
            db.execute("ALTER TABLE traces DROP COLUMN p_failed")
            db.execute("ALTER TABLE traces DROP COLUMN suspected")
            db.execute("DELETE FROM store_schema WHERE version >= 6")
    store.close()
    store = open_store(store_target)
    assert store.schema_version() == STORE_SCHEMA_VERSION
    secret_run = "conv-sk-proj-" + "A1b2C3d4" * 5  # a conversation id that holds an API key
    for run in ("conversation-1", secret_run):
        store.begin_trace(Trace(id=run, task=Task(query="q")))
        store.save_otel_trace_ids(run, {"0a" * 8: "1b" * 16, "0c" * 8: "2d" * 16})
        store.save_otel_trace_ids(run, {"0c" * 8: "3e" * 16})  # the same span again: replaced
    for run in ("conversation-1", secret_run):
        assert store.otel_trace_id(run, "0a" * 8) == "1b" * 16 and store.otel_trace_id(run, "0c" * 8) == "3e" * 16
    assert store.otel_trace_id("conversation-1", "0e" * 8) is None and store.otel_trace_id("another run", "0a" * 8) is None
    assert not any(secret_run in str(row) for row in raw(store, "SELECT * FROM otel_spans"))
    store.delete_trace("conversation-1")
    assert store.otel_trace_id("conversation-1", "0a" * 8) is None and store.otel_trace_id(secret_run, "0a" * 8) == "1b" * 16
    store.close()


def test_add_steps_numbers_a_batch_and_keeps_a_repeated_span_in_its_place(store):
    trace = Trace(id="batched", task=Task(query="q"))
    store.begin_trace(trace)
    first = [Step(index=i, agent="a", content=f"s{i}", span_id=f"{i:016x}") for i in range(3)]
    store.add_steps("batched", store.prepare_steps(first))
    # A batch mixing a span seen before (updated in place), a new one and the same new one twice.
    again = [first[1].model_copy(update={"content": "s1 again"}), Step(index=0, agent="b", content="s3", span_id=f"{3:016x}"),
             Step(index=0, agent="b", content="s3 last", span_id=f"{3:016x}")]
    store.add_steps("batched", again)
    assert [s.content for s in store.get_trace("batched").steps] == ["s0", "s1 again", "s2", "s3 last"]
    assert sorted(seq for (seq,) in raw(store, "SELECT seq FROM steps WHERE trace_id = 'batched'")) == [0, 1, 2, 3]


# -- issue #33: no secret in any text column of any table, on both backends ----------------------
# One secret of a different shape in each place, so a leak names its place.
SECRETS = {
    "run id": "AKIAIOSFODNN7EXAMPLE",
    "agent": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456",
    "task": "sk-ant-api03-taskTASKtask0123456789",
    "answer": "hf_answerANSWERanswerANSWERanswer0123",
    "tool arguments": "ghp_toolargsTOOLARGStoolargsTOOLARGS0123",
    "tool result": "x-api-key: resultRESULT0123",
    "attribute": "password=attributeATTR0123",
    "service": "xoxb-123456789012-serviceSERVICE",
    "description": "AIzaSyDdescriptionDESCRIPTIONdescription01",
    "error": "sk-proj-errorERRORerror0123456789",
    "outcome": "Authorization: Bearer outcomeOUTCOME0123",
    "attribution": "glpat-attributionATTRIBUTION01",
    "lesson": "r8_lessonLESSONlessonLESSONlessonLESSON01",
    "job error": "gsk_joberrorJOBERRORjoberrorJOBERRORjoberror0123",
}
# What must not remain of each (a leak of its distinctive part, not of a redacted copy's prefix).
MARKS = {place: secret.split(" ")[-1].split("=")[-1].split("-")[-1][-12:] for place, secret in SECRETS.items()}


def text_columns(store) -> list[tuple[str, str]]:
    if isinstance(store, PostgresStore):
        sql = ("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
               " AND data_type IN ('text', 'character varying') ORDER BY table_name, column_name")
        return [tuple(r) for r in raw(store, sql)]
    tables = [name for (name,) in raw(store, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [(t, c[1]) for t in tables for c in raw(store, f"PRAGMA table_info({t})") if c[2].upper() == "TEXT"]


def test_a_run_sent_with_secrets_everywhere_leaves_none_in_any_text_column(store):
    import json

    from faultlens.middleware import GoldLabel
    from faultlens.middleware.store.jobs import JobQueue
    from faultlens.middleware.ingest.write import ingest
    from faultlens.middleware.spans.record import SpanRecord

    s = SECRETS
    run, trace = f"conv {s['run id']}", "4bf92f3577b34da6a3ce929d0e0e4736"
    common = {"gen_ai.conversation.id": run, "app.note": s["attribute"]}
    resource = {"service.name": f"svc {s['service']}"}
    agent = SpanRecord(trace_id=trace, span_id="a" * 16, parent_id=None, name="invoke_agent", start_ns=1, end_ns=100, resource=resource,
                       attributes={**common, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"planner {s['agent']}",
                                   "gen_ai.agent.description": f"plans; {s['description']}"})
    chat = SpanRecord(trace_id=trace, span_id="c" * 16, parent_id="a" * 16, name="chat", start_ns=2, end_ns=3, resource=resource, attributes={
        **common, "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"the task: {s['task']}"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"use {s['answer']}"}]}])})
    tool = SpanRecord(trace_id=trace, span_id="d" * 16, parent_id="a" * 16, name="execute_tool", start_ns=4, end_ns=5, resource=resource,
                      status="error", status_message=f"failed: {s['error']}", attributes={
                          **common, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "deploy",
                          "gen_ai.tool.call.arguments": json.dumps({"note": s["tool arguments"]}),
                          "gen_ai.tool.call.result": s["tool result"]})
    # Steps in one batch, their agent span in the next (the stored tree is read), then the rest of the run's life.
    ingest(store, [chat, tool])
    ingest(store, [agent])
    store.set_outcome(run, Outcome(success=False, detail=s["outcome"]))
    stored = store.get_trace(run)
    store.set_gold(run, GoldLabel(agent=stored.steps[0].agent, step=0, reason=f"label {s['outcome']}"))
    store.save_attribution(Attribution(trace_id=run, method="heuristic", agent=f"planner {s['agent']}", step=0, reason=s["attribution"],
                                       raw=[s["attribution"]], details={"why": s["attribution"]}))
    store.save_lesson(Lesson(agent=f"planner {s['agent']}", situation=s["lesson"], mistake=s["lesson"], advice=s["lesson"], trace_id=run))

    def fail(job):
        raise RuntimeError(f"model call failed with {s['job error']}")

    queue = JobQueue(store, fail, workers=0, max_attempts=1)
    queue.submit(run)
    queue.run_one("w")
    assert store.get_job(run).state == "error"

    columns = text_columns(store)
    tables = {t for t, _ in columns}
    assert {"traces", "steps", "span_links", "attributions", "lessons", "jobs"} <= tables
    for table, column in columns:
        for (value,) in raw(store, f"SELECT {column} FROM {table}"):
            for place, mark in MARKS.items():
                assert value is None or mark not in value, f"{table}.{column} holds the {place}'s secret: {value[:200]!r}"
    # ...and the run still reads back whole: its steps found their (hashed) agent across batches.
    stored = store.get_trace(run)
    assert len(stored.steps) == 2 and {st.agent for st in stored.steps} == {stored.agents[0].name}
    assert stored.agents[0].name.startswith("redacted-")


def test_an_in_memory_store_read_waits_for_another_thread_s_write_transaction():
    """`:memory:` has one connection for every thread: a read must not see a write transaction half-way (a job
    moving between states was once counted in neither, and a worker's queue looked idle)."""
    dialect = SQLiteDialect(":memory:")
    with dialect.write() as db:
        db.execute("CREATE TABLE jobs (state TEXT)")
        db.execute("INSERT INTO jobs VALUES ('queued')")
    seen: list[list[str]] = []

    def read() -> None:
        with dialect.read() as db:
            seen.append([row[0] for row in db.execute("SELECT state FROM jobs")])

    with dialect.write() as db:
        db.execute("DELETE FROM jobs")  # mid-transaction: the job is in no state at all
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and not seen  # the read waits for the transaction
        db.execute("INSERT INTO jobs VALUES ('running')")
    reader.join(5)
    assert seen == [["running"]]
