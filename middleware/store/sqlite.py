"""The embedded store: traces, steps, attributions, lessons and jobs in SQLite (via sqlite-utils).

`open_store(target)` opens a store from a path (SQLite, the default) or a
``postgresql://`` URL (`pg_store.PostgresStore`, for several servers and
workers sharing one database). Both implement the `Store` protocol with the
same semantics; the code above this module is typed against `Store`.

One file, WAL mode, safe for several threads at once: each thread gets its own
connection, and writes in this process are serialised by a lock so that SQLite
never has to retry; other processes writing the same file take turns on a
lock file beside it (`writer_lock`), which wakes the next writer at once.

Writes cost what the request holds, not what the run already holds: a batch of
steps is one `executemany` and two indexed look-ups (`add_steps`), and
`batch()` groups several writes (one OTLP request, one tracer batch) into one
transaction so that they all land or none does.

Steps are keyed by span id when they have one, so writing the same span twice
replaces it instead of duplicating it. Steps of a live run arrive in the order
their spans *end*; a trace read back orders them by start time and numbers them
0..n-1.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import sqlite_utils

from ..errors import FaultlensError, extra_needed
from .jobs import JOB_COLUMNS, Job, job_row, next_submission
from ..model.trace import AgentInfo, Attribution, GoldLabel, Lesson, Outcome, Step, Trace
from .redact import redact, redact_id, redact_text
from .writer_lock import WriterLock
from .protocol import (
    DEFAULT_DB,
    OTEL_SPANS_MIGRATION,
    STORE_SCHEMA_VERSION,
    PreparedStep,
    SchemaTooNew,
    Store,
    TraceNotFound,
    TraceSummary,
    default_db,
    default_db_path,
    describe,
    dumps as _dumps,
    gold_column,
    list_query,
    otel_span_rows,
    otel_spans_sql,
    prepare_steps,
    prepared,
    step_row,
    stored_ids,
    stored_link,
    store_url,
    summary_from_row,
    trace_from_row,
    trace_row,
)

__all__ = [
    "DEFAULT_DB", "STORE_SCHEMA_VERSION", "PreparedStep", "SQLiteStore", "SchemaTooNew", "Store", "TraceNotFound",
    "TraceSummary", "default_db", "default_db_path", "describe", "open_store", "store_url",
]

def _upsert(db: sqlite_utils.Database, table: str, row: dict[str, Any], pk: tuple[str, ...]) -> None:
    # Plain SQL rather than Table.upsert: sqlite-utils commits inside its own
    # methods, which would break our all-or-nothing transactions.
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in pk)
    db.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT ({', '.join(pk)}) DO UPDATE SET {updates}",
        list(row.values()),
    )


_STEP_COLUMNS = ("trace_id", "key", "position", "seq", "agent", "kind", "error", "data")
_UPSERT_STEP = (
    f"INSERT INTO steps ({', '.join(_STEP_COLUMNS)}) VALUES ({', '.join('?' for _ in _STEP_COLUMNS)})"
    " ON CONFLICT (trace_id, key) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _STEP_COLUMNS if c not in ("trace_id", "key"))
)
# SQLite's default limit on host parameters is 999 in old builds; stay well under it.
_KEYS_PER_QUERY = 500


_SQLITE_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS traces (
            id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success INTEGER,
            framework TEXT, benchmark TEXT, modality TEXT, format TEXT,
            created_at REAL, updated_at REAL,
            task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)""",
        """CREATE TABLE IF NOT EXISTS steps (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            key TEXT NOT NULL, position REAL, seq INTEGER,
            agent TEXT, kind TEXT, error INTEGER, data TEXT,
            PRIMARY KEY (trace_id, key))""",
        "CREATE INDEX IF NOT EXISTS steps_agent ON steps(agent)",
        """CREATE TABLE IF NOT EXISTS attributions (
            id TEXT PRIMARY KEY, trace_id TEXT, method TEXT, model TEXT, status TEXT,
            agent TEXT, step INTEGER, mode TEXT, created_at REAL, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS attributions_trace ON attributions(trace_id)",
        """CREATE TABLE IF NOT EXISTS lessons (
            id TEXT PRIMARY KEY, agent TEXT, mode TEXT, retired INTEGER,
            created_at REAL, updated_at REAL, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS lessons_agent ON lessons(agent)",
    ],
    2: [
        """CREATE TABLE IF NOT EXISTS jobs (
            trace_id TEXT PRIMARY KEY, state TEXT NOT NULL, generation INTEGER NOT NULL,
            attempts INTEGER NOT NULL, runs INTEGER NOT NULL, worker TEXT,
            lease_until REAL, not_before REAL, queued_at REAL, started_at REAL, finished_at REAL, error TEXT)""",
        "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, queued_at)",
    ],
    # Every span's place in its run's tree (steps and the containers that are
    # not steps), so a step's agent is found whatever order spans arrive in
    # (see spans.ingest). `waiting_on`: the ancestor a step's agent waits for.
    3: [
        """CREATE TABLE IF NOT EXISTS span_links (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            span_id TEXT NOT NULL, parent_id TEXT, start_ns INTEGER,
            agent TEXT, describes TEXT, task TEXT, output TEXT, waiting_on TEXT,
            PRIMARY KEY (trace_id, span_id))""",
        "CREATE INDEX IF NOT EXISTS span_links_waiting ON span_links(trace_id, waiting_on) WHERE waiting_on IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS span_links_parent ON span_links(trace_id, parent_id)",
    ],
    # Ingest cost that does not grow with the run (issue #20, item 5): the next
    # seq of a run is MAX(seq) of its steps, which without an index scans the
    # whole run, making ingest quadratic in a run's size.
    4: [
        "CREATE INDEX IF NOT EXISTS steps_trace_seq ON steps(trace_id, seq)",
        # Each agent's first span (first_agent_spans), found without reading the whole run.
        "CREATE INDEX IF NOT EXISTS span_links_agent ON span_links(trace_id, agent, start_ns, span_id) WHERE agent IS NOT NULL",
    ],
    # Leases that ran out, counted apart from the handler's failures (jobs.py).
    5: ["ALTER TABLE jobs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0"],
    # The OpenTelemetry trace id of each step's span (protocol.OTEL_SPANS_MIGRATION).
    6: OTEL_SPANS_MIGRATION,
}
_UPSERT_OTEL_SPAN, _OTEL_TRACE_ID = otel_spans_sql("?")


class SQLiteStore:
    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = str(default_db_path() if path is None else path)
        self.location = self.path
        self._memory = self.path == ":memory:"
        if not self._memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.RLock()
        if not self._memory and Path(self.path).is_dir():
            raise FaultlensError(f"cannot open the SQLite store at {self.path}: it is a directory; give a file, e.g. {Path(self.path) / 'faultlens.db'}")
        self._writer = None if self._memory else WriterLock(self.path)
        self._shared: sqlite_utils.Database | None = None
        try:
            self._create_tables()
        except sqlite3.DatabaseError as exc:  # not a SQLite file, unreadable, a broken one
            self.close()
            raise FaultlensError(f"cannot open the SQLite store at {self.path}: {exc} (is it a faultlens store?)") from None

    # -- connections -----------------------------------------------------
    def _db(self) -> sqlite_utils.Database:
        if self._memory:
            if self._shared is None:
                self._shared = sqlite_utils.Database(sqlite3.connect(":memory:", check_same_thread=False))
            return self._shared
        db = getattr(self._local, "db", None)
        if db is None:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            db = self._local.db = sqlite_utils.Database(conn)
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite_utils.Database]:
        """One transaction: everything in it lands, or nothing does.

        Inside `batch()` (same thread) it joins the batch's transaction
        instead of committing on its own (as on PostgreSQL).
        """
        with self._lock:
            db = self._db()
            if getattr(self._local, "in_transaction", False):
                yield db
                return
            self._local.in_transaction = True
            try:
                # IMMEDIATE takes the write lock at once. A plain (deferred) BEGIN whose transaction reads before it
                # writes cannot wait for another process's writer: SQLite answers "database is locked" at once,
                # busy timeout or not (two `faultlens serve` processes on one file failed 586 of 2,000 exports so).
                with self._writer.held() if self._writer is not None else nullcontext():
                    db.conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield db
                    except BaseException:
                        db.conn.rollback()
                        raise
                    db.conn.commit()
            finally:
                self._local.in_transaction = False

    @contextmanager
    def batch(self, trace_ids: Iterable[str] = ()) -> Iterator[SQLiteStore]:
        """Everything the store writes inside lands in one transaction, or nothing does.

        `trace_ids` are the traces the batch reads and writes; on SQLite the
        one writer lock already keeps other writers out, so they are not used.
        """
        with self._write():
            yield self

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None
        if self._writer is not None:
            with self._lock:  # not while a thread of this process holds it in `_write`
                self._writer.close()

    def schema_version(self) -> int:
        return self._db().execute("SELECT COALESCE(MAX(version), 0) FROM store_schema").fetchone()[0]

    def _create_tables(self) -> None:
        with self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS store_schema (version INTEGER PRIMARY KEY, applied_at REAL)")
            found = db.execute("SELECT COALESCE(MAX(version), 0) FROM store_schema").fetchone()[0]
            if found > STORE_SCHEMA_VERSION:
                raise SchemaTooNew(self.path, found)
            for version in range(found + 1, STORE_SCHEMA_VERSION + 1):
                for statement in _SQLITE_MIGRATIONS[version]:
                    db.execute(statement)
                db.execute("INSERT INTO store_schema (version, applied_at) VALUES (?, ?)", [version, time.time()])

    # -- traces ----------------------------------------------------------
    @staticmethod
    def _trace_row(trace: Trace) -> dict[str, Any]:
        return trace_row(trace)

    @staticmethod
    def _step_row(trace_id: str, step: Step, seq: int, position: float) -> dict[str, Any]:
        return step_row(trace_id, step, seq, position)

    def save_trace(self, trace: Trace) -> None:
        """Store a whole trace, replacing any earlier version of it atomically."""
        self.save_traces([trace])

    def save_traces(self, traces: Iterable[Trace]) -> int:
        """Store many whole traces in one transaction: all of them land, or none."""
        count = 0
        with self._write() as db:
            for trace in traces:
                db.execute("DELETE FROM steps WHERE trace_id = ?", [redact_id(trace.id)])
                _upsert(db, "traces", self._trace_row(trace), ("id",))
                rows = [self._step_row(trace.id, step, step.index, float(step.index)) for step in trace.steps]
                db.conn.executemany(_UPSERT_STEP, [tuple(r.values()) for r in rows])
                count += 1
        return count

    def begin_trace(self, trace: Trace) -> None:
        """Write a trace's header (task, agents, source) without touching its steps."""
        with self._write() as db:
            _upsert(db, "traces", self._trace_row(trace), ("id",))

    def add_step(self, trace_id: str, step: Step) -> None:
        """Add or replace one step (idempotent by span id). The trace header must exist."""
        self.add_steps(trace_id, [step])

    # One serialisation for both stores (store_api.prepare_steps).
    prepare_steps = staticmethod(prepare_steps)

    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep], *, new_run: bool = False) -> None:
        """Add or replace steps of one trace in one transaction (idempotent by span id).

        A new step gets the next arrival number (`seq`); a step written again
        keeps its own. The trace header must exist. new_run: the header was
        written in this transaction for a run not stored before, so the run
        has no steps and a fresh `updated_at` (nothing to look up or touch).
        """
        if not steps:
            return
        rows_in = prepared(steps)
        trace_id = redact_id(trace_id)
        with self._write() as db:
            next_seq = 0 if new_run else db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM steps WHERE trace_id = ?", [trace_id]).fetchone()[0]
            known: dict[str, int] = {}
            # A run with no steps yet (the common case for a new run) has no keys to look up.
            unique = list(dict.fromkeys(p.key for p in rows_in)) if next_seq > 0 else []
            for start in range(0, len(unique), _KEYS_PER_QUERY):
                chunk = unique[start : start + _KEYS_PER_QUERY]
                marks = ", ".join("?" for _ in chunk)
                known.update(db.execute(f"SELECT key, seq FROM steps WHERE trace_id = ? AND key IN ({marks})", [trace_id, *chunk]).fetchall())
            rows = []
            for p in rows_in:
                seq = known.get(p.key)
                if seq is None:
                    seq = known[p.key] = next_seq
                    next_seq += 1
                # A live step is ordered by when its span started; one without a clock by arrival.
                position = p.started_at if p.started_at is not None else float(seq)
                rows.append((trace_id, p.key, position, seq, p.agent, p.kind, p.error, p.data))
            db.conn.executemany(_UPSERT_STEP, rows)
            if not new_run:
                db.execute("UPDATE traces SET updated_at = ? WHERE id = ?", [time.time(), trace_id])

    # -- span links: the tree a run's agents are resolved from (spans.ingest) --
    _LINK_COLUMNS = ("span_id", "parent_id", "start_ns", "agent", "describes", "task", "output", "waiting_on")
    _UPSERT_LINK = (
        f"INSERT INTO span_links (trace_id, {', '.join(_LINK_COLUMNS)}) VALUES ({', '.join('?' for _ in range(len(_LINK_COLUMNS) + 1))})"
        " ON CONFLICT (trace_id, span_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _LINK_COLUMNS if c != "span_id")
    )

    def save_span_links(self, trace_id: str, rows: Iterable[dict[str, Any]]) -> None:
        trace_id = redact_id(trace_id)
        values = [(trace_id, *map(stored_link(row).get, self._LINK_COLUMNS)) for row in rows]
        if not values:
            return
        with self._write() as db:
            db.conn.executemany(self._UPSERT_LINK, values)

    def span_links(
        self, trace_id: str, *, span_ids: list[str] | None = None, parent_id: str | None = None, describing: bool = False, with_task: bool = False
    ) -> list[dict[str, Any]]:
        """Stored links of a run: those of `span_ids`, the children of `parent_id`, those that name or describe agents, or those that state a task."""
        where, params = ["trace_id = ?"], [redact_id(trace_id)]
        if parent_id is not None:
            where.append("parent_id = ?")
            params.append(redact_id(parent_id))
        if span_ids is not None:
            where.append(f"span_id IN ({', '.join('?' for _ in span_ids)})")
            params += stored_ids(span_ids)
        if with_task:
            where.append("task IS NOT NULL")
        columns = ", ".join(self._LINK_COLUMNS)
        sql = f"SELECT {columns} FROM span_links WHERE {' AND '.join(where)}"
        if describing:
            # Each agent's first span (SQLite takes the bare columns from the MIN row), and the spans that describe agents.
            first = columns.replace("start_ns", "MIN(start_ns)")
            sql = (f"SELECT {first} FROM span_links WHERE {' AND '.join(where)} AND agent IS NOT NULL GROUP BY agent"
                   f" UNION ALL {sql} AND describes IS NOT NULL")
            params = params + params
        return [dict(zip(self._LINK_COLUMNS, row)) for row in self._db().execute(sql, params).fetchall()]

    def first_agent_spans(self, trace_id: str, agents: list[str]) -> dict[str, str]:
        """agent → span id of its first stored span (by start time, then span id), for those of `agents` that have one."""
        trace_id = redact_id(trace_id)
        found = {}
        db = self._db()
        for agent, stored in zip(agents, stored_ids(agents)):
            row = db.execute(
                "SELECT span_id FROM span_links WHERE trace_id = ? AND agent = ? ORDER BY start_ns, span_id LIMIT 1", [trace_id, stored]
            ).fetchone()
            if row is not None:
                found[agent] = row[0]
        return found

    def steps_waiting_on(self, trace_id: str, span_ids: list[str]) -> list[tuple[str, str]]:
        """(step span id, the ancestor it waits on) for steps waiting on any of `span_ids`."""
        trace_id = redact_id(trace_id)
        span_ids = stored_ids(span_ids)
        found: list[tuple[str, str]] = []
        for start in range(0, len(span_ids), 500):  # SQLite's bound-parameter limit
            chunk = span_ids[start : start + 500]
            found += self._db().execute(
                f"SELECT span_id, waiting_on FROM span_links WHERE trace_id = ? AND waiting_on IN ({', '.join('?' for _ in chunk)})",
                [trace_id, *chunk],
            ).fetchall()
        return [(a, b) for a, b in found]

    def set_step_agents(self, trace_id: str, agents: dict[str, str], waiting: dict[str, str | None]) -> None:
        """Give stored steps (by span id) their agent once the span tree names it, and move what the others wait on."""
        trace_id = redact_id(trace_id)
        with self._write() as db:
            for span_id, waiting_on in waiting.items():
                link = stored_link({"span_id": span_id, "waiting_on": waiting_on})
                db.execute("UPDATE span_links SET waiting_on = ? WHERE trace_id = ? AND span_id = ?", [link["waiting_on"], trace_id, link["span_id"]])
            for span_id, agent in zip(stored_ids(agents), stored_ids(agents.values())):
                db.execute(
                    "UPDATE steps SET agent = ?, data = json_set(data, '$.agent', ?) WHERE trace_id = ? AND key = ?",
                    [agent, agent, trace_id, span_id],
                )
            db.execute("UPDATE traces SET updated_at = ? WHERE id = ?", [time.time(), trace_id])

    # -- OpenTelemetry trace ids of steps (migration 6) --------------------
    def save_otel_trace_ids(self, trace_id: str, otel_trace_ids: Mapping[str, str]) -> None:
        rows = otel_span_rows(trace_id, otel_trace_ids)
        if rows:
            with self._write() as db:
                db.conn.executemany(_UPSERT_OTEL_SPAN, rows)

    def otel_trace_id(self, trace_id: str, span_id: str) -> str | None:
        row = self._db().execute(_OTEL_TRACE_ID, [redact_id(trace_id), redact_id(span_id)]).fetchone()
        return None if row is None else row[0]

    def delete_step(self, trace_id: str, key: str) -> None:
        """Remove one step (by span id), e.g. a chain step that turned out to repeat its tool's output."""
        trace_id = redact_id(trace_id)
        with self._write() as db:
            db.execute("DELETE FROM steps WHERE trace_id = ? AND key = ?", [trace_id, redact_id(key)])

    def set_run_agents(self, trace_id: str, agents: list[AgentInfo]) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as db:
            data = redact([a.model_dump(mode="json") for a in agents])
            db.execute("UPDATE traces SET agents = ?, updated_at = ? WHERE id = ?", [_dumps(data), time.time(), trace_id])

    def fill_run_query(self, trace_id: str, query: str) -> None:
        """Set a run's task query if it has none yet (a task given by the run itself is kept)."""
        trace_id = redact_id(trace_id)
        if not query:
            return
        row = self._db().execute("SELECT query FROM traces WHERE id = ?", [trace_id]).fetchone()
        if row is None or row[0]:
            return  # a read, so that every model call of a run does not take the write lock
        query = redact(query)
        with self._write() as db:
            db.execute(
                "UPDATE traces SET query = ?, task = json_set(task, '$.query', ?), updated_at = ? WHERE id = ? AND (query IS NULL OR query = '')",
                [query, query, time.time(), trace_id],
            )

    def set_outcome(self, trace_id: str, outcome: Outcome) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as db:
            cursor = db.execute(
                "UPDATE traces SET outcome = ?, success = ?, updated_at = ? WHERE id = ?",
                [_dumps(redact(outcome.model_dump(mode="json"))), int(outcome.success), time.time(), trace_id],
            )
            if cursor.rowcount == 0:
                raise TraceNotFound(trace_id)

    def set_gold(self, trace_id: str, gold: GoldLabel | None) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as db:
            cursor = db.execute("UPDATE traces SET gold = ?, updated_at = ? WHERE id = ?",
                                [gold_column(gold), time.time(), trace_id])
            if cursor.rowcount == 0:
                raise TraceNotFound(trace_id)

    # Readers take the id a caller knows (perhaps one holding a secret) and look
    # up the id it was stored under; redact_id is the identity on clean ids.
    def has_trace(self, trace_id: str) -> bool:
        trace_id = redact_id(trace_id)
        trace_id = redact_id(trace_id)
        return self._db().execute("SELECT 1 FROM traces WHERE id = ?", [trace_id]).fetchone() is not None

    def get_outcome(self, trace_id: str) -> Outcome | None:
        """A run's outcome without reading its steps (None if not recorded yet). Raises TraceNotFound."""
        trace_id = redact_id(trace_id)
        trace_id = redact_id(trace_id)
        row = self._db().execute("SELECT outcome FROM traces WHERE id = ?", [trace_id]).fetchone()
        if row is None:
            raise TraceNotFound(trace_id)
        return Outcome.model_validate_json(row[0]) if row[0] else None

    def get_trace(self, trace_id: str) -> Trace:
        trace_id = redact_id(trace_id)
        trace_id = redact_id(trace_id)
        db = self._db()
        row = db.execute(
            "SELECT schema_version, task, agents, outcome, source, gold, metadata, created_at FROM traces WHERE id = ?",
            [trace_id],
        ).fetchone()
        if row is None:
            raise TraceNotFound(trace_id)
        rows = db.execute("SELECT data FROM steps WHERE trace_id = ? ORDER BY position, seq", [trace_id]).fetchall()
        return trace_from_row(trace_id, row, [data for (data,) in rows])

    def iter_traces(self, ids: Iterable[str] | None = None) -> Iterator[Trace]:
        for trace_id in ids if ids is not None else [s.id for s in self.list_traces(limit=None)]:
            yield self.get_trace(trace_id)

    def list_traces(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
        since: float | None = None,
        labelled: bool | None = None,
    ) -> list[TraceSummary]:
        """Newest first. status: 'failed', 'succeeded' or 'unknown'; labelled: only runs with (True) or without a label."""
        sql, params = list_query(status=status, agent=agent, since=since, labelled=labelled, limit=limit, offset=offset, mark="?")
        return [summary_from_row(r) for r in self._db().execute(sql, params).fetchall()]

    def count_traces(self) -> int:
        return self._db().execute("SELECT COUNT(*) FROM traces").fetchone()[0]

    def delete_trace(self, trace_id: str) -> None:
        trace_id = redact_id(trace_id)
        trace_id = redact_id(trace_id)
        with self._write() as db:
            db.execute("DELETE FROM steps WHERE trace_id = ?", [trace_id])
            db.execute("DELETE FROM span_links WHERE trace_id = ?", [trace_id])
            db.execute("DELETE FROM otel_spans WHERE trace_id = ?", [trace_id])
            db.execute("DELETE FROM traces WHERE id = ?", [trace_id])

    # -- attributions ------------------------------------------------------
    def save_attribution(self, attribution: Attribution) -> None:
        a = Attribution.model_validate(redact(attribution.model_dump(mode="json")))
        with self._write() as db:
            _upsert(
                db,
                "attributions",
                {
                    "id": a.id,
                    "trace_id": a.trace_id,
                    "method": a.method,
                    "model": a.model,
                    "status": a.status.value,
                    "agent": a.agent,
                    "step": a.step,
                    "mode": a.mode,
                    "created_at": a.created_at,
                    "data": a.model_dump_json(),
                },
                ("id",),
            )

    def attributions(self, trace_id: str) -> list[Attribution]:
        trace_id = redact_id(trace_id)
        rows = self._db().execute(
            "SELECT data FROM attributions WHERE trace_id = ? ORDER BY created_at, id", [redact_id(trace_id)]
        ).fetchall()
        return [Attribution.model_validate_json(r[0]) for r in rows]

    # -- lessons -----------------------------------------------------------
    def save_lesson(self, lesson: Lesson) -> None:
        lesson = Lesson.model_validate(redact(lesson.model_dump(mode="json")))
        with self._write() as db:
            _upsert(
                db,
                "lessons",
                {
                    "id": lesson.id,
                    "agent": lesson.agent,
                    "mode": lesson.mode,
                    "retired": int(lesson.retired),
                    "created_at": lesson.created_at,
                    "updated_at": lesson.updated_at,
                    "data": lesson.model_dump_json(),
                },
                ("id",),
            )

    def get_lesson(self, lesson_id: str) -> Lesson:
        row = self._db().execute("SELECT data FROM lessons WHERE id = ?", [lesson_id]).fetchone()
        if row is None:
            raise KeyError(f"no lesson with id {lesson_id!r}")
        return Lesson.model_validate_json(row[0])

    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]:
        where: list[str] = []
        params: list[Any] = []
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if not include_retired:
            where.append("retired = 0")
        sql = "SELECT data FROM lessons" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, id"
        return [Lesson.model_validate_json(r[0]) for r in self._db().execute(sql, params).fetchall()]


    # -- jobs (the failed-run queue, see jobs.py) --------------------------
    _JOB_SELECT = f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs"

    def get_job(self, trace_id: str) -> Job | None:
        trace_id = redact_id(trace_id)
        row = self._db().execute(self._JOB_SELECT + " WHERE trace_id = ?", [trace_id]).fetchone()
        return None if row is None else Job.from_row(row)

    def job_counts(self) -> dict[str, int]:
        return dict(self._db().execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())

    def submit_job(self, trace_id: str, *, hold: bool = False, again: bool = False, max_queued: int | None = None, drop_reason: str | None = None) -> Job:
        trace_id = redact_id(trace_id)
        with self._write() as db:
            row = db.execute(self._JOB_SELECT + " WHERE trace_id = ?", [trace_id]).fetchone()
            current = None if row is None else Job.from_row(row)
            queued = db.execute("SELECT COUNT(*) FROM jobs WHERE state = 'queued'").fetchone()[0] if max_queued is not None else 0
            job = next_submission(current, trace_id, time.time(), hold=hold, queued=queued, max_queued=max_queued, drop_reason=drop_reason, again=again)
            if job is None:
                assert current is not None
                return current
            _upsert(db, "jobs", job_row(job), ("trace_id",))
            return job

    def claim_job(self, worker: str, *, lease: float, max_attempts: int) -> Job | None:
        now = time.time()
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET state = 'error', finished_at = ?, runs = runs + 1, lease_until = NULL, lost = lost + 1,"
                " error = 'gave up after ' || attempts || ' attempts: the lease of ' || worker || ' ran out ' || (lost + 1) || ' time(s)'"
                " WHERE state = 'running' AND lease_until < ? AND lost + 1 >= ?",
                [now, now, max_attempts],
            )
            # One statement: the pick and the claim cannot be split by another writer.
            row = db.execute(
                "UPDATE jobs SET state = 'running', worker = ?, attempts = attempts + 1, lost = lost + (state = 'running'), lease_until = ?, started_at = ?"
                " WHERE trace_id = (SELECT trace_id FROM jobs WHERE (state = 'queued' AND not_before <= ?)"
                " OR (state = 'running' AND lease_until < ?) ORDER BY queued_at, trace_id LIMIT 1)"
                f" RETURNING {', '.join(JOB_COLUMNS)}",
                [worker, now + lease, now, now, now],
            ).fetchone()
            return None if row is None else Job.from_row(row)

    def renew_job(self, job: Job, *, lease: float) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "UPDATE jobs SET lease_until = ? WHERE trace_id = ? AND state = 'running' AND worker = ? AND attempts = ?",
                [time.time() + lease, job.trace_id, job.worker, job.attempts],
            )
            return cursor.rowcount == 1

    def finish_job(self, job: Job, *, error: str | None = None, retry_in: float | None = None) -> bool:
        now = time.time()
        state = "done" if error is None else ("queued" if retry_in is not None else "error")
        with self._write() as db:
            cursor = db.execute(
                "UPDATE jobs SET state = ?, error = ?, runs = runs + 1, lease_until = NULL, finished_at = ?, not_before = ?"
                " WHERE trace_id = ? AND state = 'running' AND worker = ? AND attempts = ?",
                [state, None if error is None else redact_text(error), now, now + (retry_in or 0.0), job.trace_id, job.worker, job.attempts],
            )
            return cursor.rowcount == 1

def open_store(target: str | os.PathLike[str] | None = None) -> Store:
    """Open (creating if needed) the store at `target`, `$FAULTLENS_DB`, or `.faultlens/faultlens.db`.

    `target` is a SQLite file path (or ``:memory:``), or a ``postgresql://``
    URL for a `PostgresStore` (its tables are created in that database).
    """
    target = default_db() if target is None else target
    url = store_url(target)
    if url is None:
        return SQLiteStore(target)
    with extra_needed("a postgresql:// store"):  # psycopg is imported only for one
        from .postgres import PostgresStore
    return PostgresStore(url)
