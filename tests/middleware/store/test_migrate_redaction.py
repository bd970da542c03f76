"""Issue #43, finding 6: a store written by faultlens 66d5c46 (layout 4, its redaction rules) opened by today's.

The old store is built here from that version's DDL and with what its writer stored: secrets of shapes it
did not know (`github_pat_...`, `hf_...`, a password inside escaped JSON) in clear, in the text and in a
run's id. Migration 7 (`reredact`) redacts every row again and re-keys ids, so the run is found by the id
its caller knows, its attributions, lesson, label, job and span links go with it, and nothing is left in clear.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from faultlens.middleware import open_store
from faultlens.middleware.store import STORE_SCHEMA_VERSION
from faultlens.middleware.store.redact import redact_id
from faultlens.middleware.store.reredact import reredact

GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
KEY_ID = "0123456789abcdef0123456789abcdef01234567"
ESCAPED_BODY = '{\\"error\\": \\"denied\\", \\"password\\": \\"hunter5\\", \\"private_key_id\\": \\"' + KEY_ID + '\\"}'
RUN = "conv-" + GITHUB_PAT  # a conversation id with a token pasted into it
PLAIN = "plain-run"
SPAN_A, SPAN_B = "0a" * 8, "0b" * 8
CLEAR = ("github_pat_", GITHUB_PAT[-20:], HF, "hunter5", KEY_ID)
TABLES = ("traces", "steps", "attributions", "lessons", "jobs", "span_links", "otel_spans")

# The layout of faultlens 66d5c46 (store layout 4), as its SQLite and PostgreSQL stores created it.
OLD_DDL = [
    """CREATE TABLE store_schema (version INTEGER PRIMARY KEY, applied_at {real})""",
    """CREATE TABLE traces (
        id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success {flag},
        framework TEXT, benchmark TEXT, modality TEXT, format TEXT,
        created_at {real}, updated_at {real},
        task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)""",
    """CREATE TABLE steps (
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        key TEXT NOT NULL, position {real}, seq INTEGER,
        agent TEXT, kind TEXT, error {flag}, data TEXT,
        PRIMARY KEY (trace_id, key))""",
    "CREATE INDEX steps_agent ON steps(agent)",
    """CREATE TABLE attributions (
        id TEXT PRIMARY KEY, trace_id TEXT, method TEXT, model TEXT, status TEXT,
        agent TEXT, step INTEGER, mode TEXT, created_at {real}, data TEXT)""",
    "CREATE INDEX attributions_trace ON attributions(trace_id)",
    """CREATE TABLE lessons (
        id TEXT PRIMARY KEY, agent TEXT, mode TEXT, retired {flag},
        created_at {real}, updated_at {real}, data TEXT)""",
    "CREATE INDEX lessons_agent ON lessons(agent)",
    """CREATE TABLE jobs (
        trace_id TEXT PRIMARY KEY, state TEXT NOT NULL, generation INTEGER NOT NULL,
        attempts INTEGER NOT NULL, runs INTEGER NOT NULL, worker TEXT,
        lease_until {real}, not_before {real}, queued_at {real}, started_at {real}, finished_at {real}, error TEXT)""",
    "CREATE INDEX jobs_state ON jobs(state, queued_at)",
    """CREATE TABLE span_links (
        trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
        span_id TEXT NOT NULL, parent_id TEXT, start_ns {bigint},
        agent TEXT, describes TEXT, task TEXT, output TEXT, waiting_on TEXT,
        PRIMARY KEY (trace_id, span_id))""",
    "CREATE INDEX span_links_waiting ON span_links(trace_id, waiting_on) WHERE waiting_on IS NOT NULL",
    "CREATE INDEX span_links_parent ON span_links(trace_id, parent_id)",
    "CREATE INDEX steps_trace_seq ON steps(trace_id, seq)",
    "CREATE INDEX span_links_agent ON span_links(trace_id, agent, start_ns, span_id) WHERE agent IS NOT NULL",
]
OLD_WORDS = {
    "sqlite": {"real": "REAL", "flag": "INTEGER", "bigint": "INTEGER"},
    "postgres": {"real": "DOUBLE PRECISION", "flag": "SMALLINT", "bigint": "BIGINT"},
}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _step(index: int, span: str, kind: str, **fields) -> str:
    return _dumps({"index": index, "agent": "coder", "kind": kind, "span_id": span, **fields})


# What the old writer stored: its redactor knew none of these secrets' shapes.
PLAIN_STEP = json.dumps({"index": 0, "agent": "coder", "kind": "message", "content": "hello"}, separators=(",", ":"))  # spaced otherwise
OLD_ROWS: dict[str, list[tuple]] = {
    "store_schema": [(version, 0.0) for version in (1, 2, 3, 4)],
    "traces": [
        (RUN, "1", f"push with {GITHUB_PAT}", 0, "otel", None, "text", "otlp", 100.0, 101.0,
         _dumps({"query": f"push with {GITHUB_PAT}"}), _dumps([{"name": "coder", "role": "", "description": ""}]),
         _dumps({"success": False, "evaluator": "ci", "detail": f"401 from the hub with {HF}"}),
         _dumps({"framework": "otel", "modality": "text", "format": "otlp"}),
         _dumps({"step": 1, "agent": "coder", "mode": "A.2", "reason": f"pasted {GITHUB_PAT}"}), _dumps({"note": HF})),
        (PLAIN, "1", "say hello", 1, "python", None, "text", "faultlens", 90.0, 91.0,
         '{"query":"say hello"}', "[]", None, '{"framework":"python"}', None, "{}"),
    ],
    "steps": [
        (RUN, SPAN_A, 1.0, 0, "coder", "llm_call", 0, _step(0, SPAN_A, "llm_call", content=f"I will use {GITHUB_PAT}")),
        (RUN, SPAN_B, 2.0, 1, "coder", "tool_call", 1,
         _step(1, SPAN_B, "tool_call", tool_name="git push", tool_arguments={"remote": "origin", "note": f"use {GITHUB_PAT}"},
               tool_result=ESCAPED_BODY, error=f"upstream said: {ESCAPED_BODY}")),
        (PLAIN, "#0", 0.0, 0, "coder", "message", 0, PLAIN_STEP),
    ],
    "span_links": [
        (RUN, SPAN_A, None, 1000, "coder", None, f"task with {GITHUB_PAT}", f"out {HF}", None),
        (RUN, SPAN_B, SPAN_A, 2000, "coder", None, None, None, SPAN_A),
    ],
    "attributions": [
        ("att-1", RUN, "all_at_once", "heuristic", "ok", "coder", 1, "A.2", 102.0,
         _dumps({"id": "att-1", "trace_id": RUN, "method": "all_at_once", "status": "ok", "agent": "coder", "step": 1, "mode": "A.2",
                 "reason": f"the call leaked {HF}", "model": "heuristic", "created_at": 102.0})),
    ],
    "lessons": [
        ("lesson-1", "coder", "A.2", 0, 103.0, 103.0,
         _dumps({"id": "lesson-1", "agent": "coder", "mode": "A.2", "situation": "pushing", "mistake": f"pasted {GITHUB_PAT}",
                 "advice": "use the credential helper", "trace_id": RUN, "step": 1, "attribution_id": "att-1",
                 "created_at": 103.0, "updated_at": 103.0})),
    ],
    "jobs": [(RUN, "done", 1, 1, 1, "host-1", None, None, 101.0, 101.5, 102.0, f"failed once: {GITHUB_PAT}")],
}


def _connect(target: str):
    if target.startswith("postgresql"):
        import psycopg

        return psycopg.connect(target, autocommit=True), "%s", OLD_WORDS["postgres"]
    return sqlite3.connect(target, isolation_level=None), "?", OLD_WORDS["sqlite"]


def build_old_store(target: str) -> None:
    conn, mark, words = _connect(target)
    try:
        for statement in OLD_DDL:
            conn.execute(statement.format(**words))
        for table, rows in OLD_ROWS.items():
            for row in rows:
                conn.execute(f"INSERT INTO {table} VALUES ({', '.join(mark for _ in row)})", row)
    finally:
        conn.close()


def dump(target: str) -> dict[str, list[tuple]]:
    """Every row of the store's tables, straight from the database."""
    conn, _, _ = _connect(target)
    try:
        return {table: sorted(map(tuple, conn.execute(f"SELECT * FROM {table}").fetchall()), key=repr) for table in TABLES}
    finally:
        conn.close()


@pytest.fixture
def migrated(store_target):
    build_old_store(store_target)
    store = open_store(store_target)
    yield store_target, store
    store.close()


def test_no_secret_is_left_in_clear_in_any_table(migrated):
    target, store = migrated
    assert store.schema_version() == STORE_SCHEMA_VERSION
    rows = dump(target)
    text = repr(rows)
    assert [fragment for fragment in CLEAR if fragment in text] == []
    assert "[REDACTED]" in text and len(rows["steps"]) == 3 and len(rows["span_links"]) == 2
    assert RUN not in {row[0] for row in rows["traces"]}  # the raw id's row is gone, not kept beside the new one


def test_the_run_is_found_by_the_id_its_caller_knows(migrated):
    _, store = migrated
    sid = redact_id(RUN)
    assert sid != RUN and store.has_trace(RUN)
    trace = store.get_trace(RUN)
    assert trace.id == sid and [s.span_id for s in trace.steps] == [SPAN_A, SPAN_B]
    assert trace.task.query == "push with [REDACTED]" and "[REDACTED]" in trace.outcome.detail
    assert trace.steps[1].error is not None and "hunter5" not in trace.steps[1].error
    # The escaped body is still one level of escaped JSON: it reads back with its secrets replaced.
    assert json.loads(json.loads(f'"{trace.steps[1].tool_result}"'))["password"] == "[REDACTED]"
    summary = next(s for s in store.list_traces() if s.id == sid)
    assert summary.labelled and summary.n_steps == 2 and trace.gold.step == 1 and "github_pat" not in trace.gold.reason


def test_attributions_lessons_jobs_and_span_links_follow_the_run(migrated):
    _, store = migrated
    sid = redact_id(RUN)
    [attribution] = store.attributions(RUN)
    assert attribution.trace_id == sid and attribution.step == 1 and HF not in attribution.reason
    [lesson] = store.lessons(agent="coder")
    assert lesson.trace_id == sid and lesson.attribution_id == "att-1" and "github_pat" not in lesson.mistake
    job = store.get_job(RUN)
    assert job is not None and job.state == "done" and "github_pat" not in job.error
    links = store.span_links(RUN)
    assert {link["span_id"] for link in links} == {SPAN_A, SPAN_B}
    assert {link["task"] for link in links} == {"task with [REDACTED]", None}
    assert store.steps_waiting_on(RUN, [SPAN_A]) == [(SPAN_B, SPAN_A)]


def test_rows_with_nothing_to_redact_keep_their_bytes(migrated):
    target, _ = migrated
    rows = dump(target)
    assert ("plain-run", "#0", 0.0, 0, "coder", "message", 0, PLAIN_STEP) in rows["steps"]
    plain = next(row for row in rows["traces"] if row[0] == PLAIN)
    assert plain[10] == '{"query":"say hello"}' and plain[13] == '{"framework":"python"}'


def test_redacting_again_changes_nothing(migrated):
    target, store = migrated
    before = dump(target)
    with store._d.migrating() as conn:
        reredact(store._d, conn)
    assert dump(target) == before
    store.close()
    again = open_store(target)  # and reopening migrates nothing more
    assert again.schema_version() == STORE_SCHEMA_VERSION and dump(target) == before
    again.close()


def test_a_run_already_stored_under_its_redacted_id_is_kept_and_gains_what_only_the_old_row_had(store_target):
    """The same conversation written since under today's id (by a release that knew the token's shape): that row
    is kept, the old row's steps join it, and the label only the old row had is not lost."""
    build_old_store(store_target)
    conn, mark, _ = _connect(store_target)
    try:
        conn.execute(f"INSERT INTO traces (id, schema_version, query, task, created_at, updated_at) VALUES ({mark}, '1', 'newer', {mark}, 1, 1)",
                     [redact_id(RUN), _dumps({"query": "newer"})])
    finally:
        conn.close()
    store = open_store(store_target)
    try:
        trace = store.get_trace(RUN)
        assert trace.task.query == "newer" and len(trace.steps) == 2 and store.count_traces() == 2
        assert trace.gold is not None and trace.gold.step == 1 and "github_pat" not in repr(dump(store_target))
    finally:
        store.close()


def test_a_store_larger_than_a_page_is_rewritten_whole(store_target, monkeypatch):
    """Rows are read a page at a time in key order, rows moved meanwhile included: with one row a page, the same result."""
    import faultlens.middleware.store.reredact as module

    monkeypatch.setattr(module, "_PAGE", 1)
    build_old_store(store_target)
    store = open_store(store_target)
    try:
        assert [fragment for fragment in CLEAR if fragment in repr(dump(store_target))] == []
        assert len(store.get_trace(RUN).steps) == 2 and len(store.span_links(RUN)) == 2 and store.count_traces() == 2
    finally:
        store.close()
