"""The embedded store: traces, steps, attributions and lessons in SQLite (via sqlite-utils).

One file, WAL mode, safe for several threads at once: each thread gets its own
connection, and writes in this process are serialised by a lock so that SQLite
never has to retry (other processes wait on SQLite's busy timeout).

Writes cost what the request holds, not what the run already holds: a batch of
steps is one transaction, one `executemany` and two indexed look-ups
(`add_steps`), and `transaction()` groups several writes (one OTLP request,
one tracer batch) so that they all land or none does.

Steps are keyed by span id when they have one, so writing the same span twice
replaces it instead of duplicating it. Steps of a live run arrive in the order
their spans *end*; a trace read back orders them by start time and numbers them
0..n-1.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import sqlite_utils

from .model import Attribution, Lesson, Outcome, Step, Trace
from .redact import redact

DEFAULT_DB = Path(".faultlens") / "faultlens.db"


def default_db_path() -> Path:
    return Path(os.environ.get("FAULTLENS_DB") or DEFAULT_DB)


@dataclass(frozen=True)
class TraceSummary:
    id: str
    query: str
    success: bool | None
    n_steps: int
    agents: list[str]
    framework: str | None
    benchmark: str | None
    modality: str | None
    created_at: float
    updated_at: float


class PreparedStep(NamedTuple):
    """A step serialised and redacted for storage (`SQLiteStore.prepare_steps`), ready to write."""

    key: str
    started_at: float | None
    agent: str
    kind: str
    error: int
    data: str


@runtime_checkable
class Store(Protocol):
    """What the rest of faultlens needs from a store. `SQLiteStore` is the one we ship."""

    def save_trace(self, trace: Trace) -> None: ...
    def get_trace(self, trace_id: str) -> Trace: ...
    def list_traces(self, *, status: str | None = None, agent: str | None = None, limit: int = 100, offset: int = 0, since: float | None = None) -> list[TraceSummary]: ...
    def add_step(self, trace_id: str, step: Step) -> None: ...
    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep]) -> None: ...
    def prepare_steps(self, steps: Sequence[Step]) -> list[PreparedStep]: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def set_outcome(self, trace_id: str, outcome: Outcome) -> None: ...
    def save_attribution(self, attribution: Attribution) -> None: ...
    def attributions(self, trace_id: str) -> list[Attribution]: ...
    def save_lesson(self, lesson: Lesson) -> None: ...
    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]: ...


class TraceNotFound(KeyError):
    def __init__(self, trace_id: str):
        super().__init__(trace_id)
        self.trace_id = trace_id

    def __str__(self) -> str:
        return f"no trace with id {self.trace_id!r} in the store (try `faultlens traces list`)"


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


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


class SQLiteStore:
    def __init__(self, path: str | Path | None = None):
        self.path = str(default_db_path() if path is None else path)
        self._memory = self.path == ":memory:"
        if not self._memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.RLock()
        self._shared: sqlite_utils.Database | None = None
        self._create_tables()

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

        Inside `transaction()` (same thread) it joins the open transaction
        instead of committing on its own.
        """
        with self._lock:
            db = self._db()
            if getattr(self._local, "in_transaction", False):
                yield db
                return
            self._local.in_transaction = True
            try:
                with db.atomic():
                    yield db
            finally:
                self._local.in_transaction = False

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes made inside the block (on this thread) into one transaction: all or none."""
        with self._write():
            yield

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None

    def _create_tables(self) -> None:
        with self._write() as db:
            db.execute(
                """CREATE TABLE IF NOT EXISTS traces (
                    id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success INTEGER,
                    framework TEXT, benchmark TEXT, modality TEXT, format TEXT,
                    created_at REAL, updated_at REAL,
                    task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)"""
            )
            db.execute(
                """CREATE TABLE IF NOT EXISTS steps (
                    trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
                    key TEXT NOT NULL, position REAL, seq INTEGER,
                    agent TEXT, kind TEXT, error INTEGER, data TEXT,
                    PRIMARY KEY (trace_id, key))"""
            )
            db.execute("CREATE INDEX IF NOT EXISTS steps_agent ON steps(agent)")
            # The next seq of a run is MAX(seq) of its steps: without this index that
            # scans the whole run, making ingest quadratic in a run's size.
            db.execute("CREATE INDEX IF NOT EXISTS steps_trace_seq ON steps(trace_id, seq)")
            db.execute(
                """CREATE TABLE IF NOT EXISTS attributions (
                    id TEXT PRIMARY KEY, trace_id TEXT, method TEXT, model TEXT, status TEXT,
                    agent TEXT, step INTEGER, mode TEXT, created_at REAL, data TEXT)"""
            )
            db.execute("CREATE INDEX IF NOT EXISTS attributions_trace ON attributions(trace_id)")
            db.execute(
                """CREATE TABLE IF NOT EXISTS lessons (
                    id TEXT PRIMARY KEY, agent TEXT, mode TEXT, retired INTEGER,
                    created_at REAL, updated_at REAL, data TEXT)"""
            )
            db.execute("CREATE INDEX IF NOT EXISTS lessons_agent ON lessons(agent)")

    # -- traces ----------------------------------------------------------
    @staticmethod
    def _trace_row(trace: Trace) -> dict[str, Any]:
        data = redact(trace.model_dump(mode="json", exclude={"steps"}))
        return {
            "id": trace.id,
            "schema_version": trace.schema_version,
            "query": data["task"]["query"],
            "success": None if trace.outcome is None else int(trace.outcome.success),
            "framework": trace.source.framework,
            "benchmark": trace.source.benchmark,
            "modality": trace.source.modality,
            "format": trace.source.format,
            "created_at": trace.created_at,
            "updated_at": time.time(),
            "task": _dumps(data["task"]),
            "agents": _dumps(data["agents"]),
            "outcome": _dumps(data["outcome"]),
            "source": _dumps(data["source"]),
            "gold": _dumps(data["gold"]),
            "metadata": _dumps(data["metadata"]),
        }

    @staticmethod
    def _step_row(trace_id: str, step: Step, seq: int, position: float) -> dict[str, Any]:
        data = redact(step.model_dump(mode="json"))
        return {
            "trace_id": trace_id,
            "key": step.span_id or f"#{step.index}",
            "position": position,
            "seq": seq,
            "agent": step.agent,
            "kind": data["kind"],
            "error": int(step.error is not None),
            "data": _dumps(data),
        }

    def save_trace(self, trace: Trace) -> None:
        """Store a whole trace, replacing any earlier version of it atomically."""
        self.save_traces([trace])

    def save_traces(self, traces: Iterable[Trace]) -> int:
        """Store many whole traces in one transaction: all of them land, or none."""
        count = 0
        with self._write() as db:
            for trace in traces:
                db.execute("DELETE FROM steps WHERE trace_id = ?", [trace.id])
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

    @staticmethod
    def prepare_steps(steps: Sequence[Step]) -> list[PreparedStep]:
        """Serialise and redact steps without touching the database.

        The costly part of writing a step; done before a transaction opens,
        it keeps the write lock short (other requests wait only for the SQL).
        """
        out = []
        for step in steps:
            data = redact(step.model_dump(mode="json"))
            out.append(PreparedStep(step.span_id or f"#{step.index}", step.started_at, step.agent, data["kind"], int(step.error is not None), _dumps(data) or ""))
        return out

    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep]) -> None:
        """Add or replace steps of one trace in one transaction (idempotent by span id).

        A new step gets the next arrival number (`seq`); a step written again
        keeps its own. The trace header must exist.
        """
        if not steps:
            return
        prepared = [s if isinstance(s, PreparedStep) else self.prepare_steps([s])[0] for s in steps]
        with self._write() as db:
            next_seq = db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM steps WHERE trace_id = ?", [trace_id]).fetchone()[0]
            known: dict[str, int] = {}
            # A run with no steps yet (the common case for a new run) has no keys to look up.
            unique = list(dict.fromkeys(p.key for p in prepared)) if next_seq > 0 else []
            for start in range(0, len(unique), _KEYS_PER_QUERY):
                chunk = unique[start : start + _KEYS_PER_QUERY]
                marks = ", ".join("?" for _ in chunk)
                known.update(db.execute(f"SELECT key, seq FROM steps WHERE trace_id = ? AND key IN ({marks})", [trace_id, *chunk]).fetchall())
            rows = []
            for p in prepared:
                seq = known.get(p.key)
                if seq is None:
                    seq = known[p.key] = next_seq
                    next_seq += 1
                # A live step is ordered by when its span started; one without a clock by arrival.
                position = p.started_at if p.started_at is not None else float(seq)
                rows.append((trace_id, p.key, position, seq, p.agent, p.kind, p.error, p.data))
            db.conn.executemany(_UPSERT_STEP, rows)
            db.execute("UPDATE traces SET updated_at = ? WHERE id = ?", [time.time(), trace_id])

    def set_outcome(self, trace_id: str, outcome: Outcome) -> None:
        with self._write() as db:
            cursor = db.execute(
                "UPDATE traces SET outcome = ?, success = ?, updated_at = ? WHERE id = ?",
                [_dumps(redact(outcome.model_dump(mode="json"))), int(outcome.success), time.time(), trace_id],
            )
            if cursor.rowcount == 0:
                raise TraceNotFound(trace_id)

    def has_trace(self, trace_id: str) -> bool:
        return self._db().execute("SELECT 1 FROM traces WHERE id = ?", [trace_id]).fetchone() is not None

    def get_outcome(self, trace_id: str) -> Outcome | None:
        """A run's outcome without reading its steps (None if not recorded yet). Raises TraceNotFound."""
        row = self._db().execute("SELECT outcome FROM traces WHERE id = ?", [trace_id]).fetchone()
        if row is None:
            raise TraceNotFound(trace_id)
        return Outcome.model_validate_json(row[0]) if row[0] else None

    def get_trace(self, trace_id: str) -> Trace:
        db = self._db()
        row = db.execute(
            "SELECT schema_version, task, agents, outcome, source, gold, metadata, created_at FROM traces WHERE id = ?",
            [trace_id],
        ).fetchone()
        if row is None:
            raise TraceNotFound(trace_id)
        steps = []
        for index, (data,) in enumerate(
            db.execute("SELECT data FROM steps WHERE trace_id = ? ORDER BY position, seq", [trace_id]).fetchall()
        ):
            step = json.loads(data)
            step["index"] = index
            steps.append(step)
        schema_version, task, agents, outcome, source, gold, metadata, created_at = row
        return Trace.model_validate(
            {
                "id": trace_id,
                "schema_version": schema_version,
                "task": json.loads(task),
                "agents": json.loads(agents or "[]"),
                "steps": steps,
                "outcome": json.loads(outcome) if outcome else None,
                "source": json.loads(source) if source else {},
                "gold": json.loads(gold) if gold else None,
                "metadata": json.loads(metadata or "{}"),
                "created_at": created_at,
            }
        )

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
    ) -> list[TraceSummary]:
        """Newest first. status: 'failed', 'succeeded' or 'unknown'."""
        where, params = [], []
        if status is not None:
            clauses = {"failed": "success = 0", "succeeded": "success = 1", "unknown": "success IS NULL"}
            if status not in clauses:
                raise ValueError(f"status must be one of {sorted(clauses)}, not {status!r}")
            where.append(clauses[status])
        if agent is not None:
            where.append("id IN (SELECT trace_id FROM steps WHERE agent = ?)")
            params.append(agent)
        if since is not None:
            where.append("updated_at >= ?")
            params.append(since)
        sql = (
            "SELECT id, query, success, agents, framework, benchmark, modality, created_at, updated_at,"
            " (SELECT COUNT(*) FROM steps WHERE steps.trace_id = traces.id) FROM traces"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY created_at DESC, id"
        )
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [
            TraceSummary(
                id=r[0],
                query=r[1],
                success=None if r[2] is None else bool(r[2]),
                agents=[a["name"] for a in json.loads(r[3] or "[]")],
                framework=r[4],
                benchmark=r[5],
                modality=r[6],
                created_at=r[7],
                updated_at=r[8],
                n_steps=r[9],
            )
            for r in self._db().execute(sql, params).fetchall()
        ]

    def count_traces(self) -> int:
        return self._db().execute("SELECT COUNT(*) FROM traces").fetchone()[0]

    def delete_trace(self, trace_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM steps WHERE trace_id = ?", [trace_id])
            db.execute("DELETE FROM traces WHERE id = ?", [trace_id])

    # -- attributions ------------------------------------------------------
    def save_attribution(self, attribution: Attribution) -> None:
        a = attribution
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
        rows = self._db().execute(
            "SELECT data FROM attributions WHERE trace_id = ? ORDER BY created_at, id", [trace_id]
        ).fetchall()
        return [Attribution.model_validate_json(r[0]) for r in rows]

    # -- lessons -----------------------------------------------------------
    def save_lesson(self, lesson: Lesson) -> None:
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
        where, params = [], []
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if not include_retired:
            where.append("retired = 0")
        sql = "SELECT data FROM lessons" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, id"
        return [Lesson.model_validate_json(r[0]) for r in self._db().execute(sql, params).fetchall()]


def open_store(path: str | Path | None = None) -> SQLiteStore:
    """Open (creating if needed) the store at `path`, `$FAULTLENS_DB`, or `.faultlens/faultlens.db`."""
    return SQLiteStore(path)
