import threading

import pytest

from faultlens.middleware import Attribution, Lesson, Outcome, Step, Task, Trace, open_store
from faultlens.middleware.pg_store import PostgresStore
from faultlens.middleware.store import TraceNotFound
from tests.middleware.test_model import sample_trace


@pytest.fixture
def store(store_target):
    """The same suite on both backends: SQLite, then PostgreSQL (tests/conftest.py)."""
    s = open_store(store_target)
    yield s
    s.close()


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
