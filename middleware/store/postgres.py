"""The same store on PostgreSQL (psycopg 3 and its connection pool), for many servers and workers on one database.

    store = open_store("postgresql://faultlens@db.internal:5432/faultlens")

Same tables, same semantics as `store.SQLiteStore` (one test suite checks
both): a step is idempotent by span id, `save_traces` and a `batch()` land
together or not at all, secrets are redacted before they are written, and the
tables carry a layout version that is migrated forward on open (under an
advisory lock, so servers starting together do not race).

What PostgreSQL adds is safe concurrency between processes:

- `batch(trace_ids)` takes a transaction-scoped advisory lock per trace, so
  two servers ingesting spans of the same run take turns (the header a root
  span writes is never overwritten by another server's placeholder);
- `add_steps` locks its trace's row, so step sequence numbers stay distinct;
- `claim_job` picks with ``FOR UPDATE SKIP LOCKED``: workers never wait on
  one another and never claim the same job; leases use the database's clock,
  so the machines' clocks need not agree.

JSON is kept as text, like in SQLite, so a value round-trips byte for byte
(``jsonb`` would reorder keys and refuses ``\\u0000``). PostgreSQL text cannot
hold NUL characters; in the plain columns (ids, agent names, the query shown
in lists) one becomes U+FFFD, while the JSON columns keep the exact value.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import FaultlensError
from .jobs import JOB_COLUMNS, Job, job_row, next_submission
from ..model.trace import AgentInfo, Attribution, GoldLabel, Lesson, Outcome, Step, Trace
from .redact import redact, redact_id, redact_text
from .protocol import (
    OTEL_SPANS_MIGRATION,
    PreparedStep,
    STORE_SCHEMA_VERSION,
    SchemaTooNew,
    TraceNotFound,
    TraceSummary,
    describe,
    dumps,
    gold_column,
    list_query,
    otel_span_rows,
    otel_spans_sql,
    prepare_steps,
    prepared,
    step_row,
    stored_ids,
    stored_link,
    summary_from_row,
    trace_from_row,
    trace_row,
)

# pg_advisory_xact_lock keys: one for migrations, one space (by hash) for traces and one for jobs.
_MIGRATION_LOCK = 0x6661756C746C656E  # "faultlen"
_TRACE_SPACE = 1
_JOB_SPACE = 2

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS traces (
            id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success SMALLINT,
            framework TEXT, benchmark TEXT, modality TEXT, format TEXT,
            created_at DOUBLE PRECISION, updated_at DOUBLE PRECISION,
            task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)""",
        "CREATE INDEX IF NOT EXISTS traces_created ON traces(created_at DESC, id)",
        """CREATE TABLE IF NOT EXISTS steps (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            key TEXT NOT NULL, position DOUBLE PRECISION, seq INTEGER,
            agent TEXT, kind TEXT, error SMALLINT, data TEXT,
            PRIMARY KEY (trace_id, key))""",
        "CREATE INDEX IF NOT EXISTS steps_agent ON steps(agent)",
        """CREATE TABLE IF NOT EXISTS attributions (
            id TEXT PRIMARY KEY, trace_id TEXT, method TEXT, model TEXT, status TEXT,
            agent TEXT, step INTEGER, mode TEXT, created_at DOUBLE PRECISION, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS attributions_trace ON attributions(trace_id)",
        """CREATE TABLE IF NOT EXISTS lessons (
            id TEXT PRIMARY KEY, agent TEXT, mode TEXT, retired SMALLINT,
            created_at DOUBLE PRECISION, updated_at DOUBLE PRECISION, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS lessons_agent ON lessons(agent)",
    ],
    2: [
        """CREATE TABLE IF NOT EXISTS jobs (
            trace_id TEXT PRIMARY KEY, state TEXT NOT NULL, generation INTEGER NOT NULL,
            attempts INTEGER NOT NULL, runs INTEGER NOT NULL, worker TEXT,
            lease_until DOUBLE PRECISION, not_before DOUBLE PRECISION, queued_at DOUBLE PRECISION,
            started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION, error TEXT)""",
        "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, queued_at)",
    ],
    3: [
        """CREATE TABLE IF NOT EXISTS span_links (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            span_id TEXT NOT NULL, parent_id TEXT, start_ns BIGINT,
            agent TEXT, describes TEXT, task TEXT, output TEXT, waiting_on TEXT,
            PRIMARY KEY (trace_id, span_id))""",
        "CREATE INDEX IF NOT EXISTS span_links_waiting ON span_links(trace_id, waiting_on) WHERE waiting_on IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS span_links_parent ON span_links(trace_id, parent_id)",
    ],
    # Ingest cost that does not grow with the run: the next seq of a run (MAX(seq)) and
    # each agent's first span (first_agent_spans), found without reading the whole run.
    4: [
        "CREATE INDEX IF NOT EXISTS steps_trace_seq ON steps(trace_id, seq)",
        "CREATE INDEX IF NOT EXISTS span_links_agent ON span_links(trace_id, agent, start_ns, span_id) WHERE agent IS NOT NULL",
    ],
    # Leases that ran out, counted apart from the handler's failures (jobs.py).
    5: ["ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lost INTEGER NOT NULL DEFAULT 0"],
    # The OpenTelemetry trace id of each step's span (protocol.OTEL_SPANS_MIGRATION).
    6: OTEL_SPANS_MIGRATION,
}
_UPSERT_OTEL_SPAN, _OTEL_TRACE_ID = otel_spans_sql("%s")

# A step's seq is the one it already has (same span again) or the next; a live step
# is ordered by when its span started, one without a clock by arrival. Statements of
# one transaction see each other's rows, so a batch of them numbers steps in order.
_UPSERT_STEP = """
WITH s AS (SELECT COALESCE(
        (SELECT seq FROM steps WHERE trace_id = %(trace_id)s AND key = %(key)s),
        (SELECT COALESCE(MAX(seq), -1) + 1 FROM steps WHERE trace_id = %(trace_id)s)) AS seq)
INSERT INTO steps (trace_id, key, position, seq, agent, kind, error, data)
SELECT %(trace_id)s, %(key)s, COALESCE(%(started)s::float8, s.seq::float8), s.seq, %(agent)s, %(kind)s, %(error)s, %(data)s FROM s
ON CONFLICT (trace_id, key) DO UPDATE SET position = EXCLUDED.position, seq = EXCLUDED.seq,
    agent = EXCLUDED.agent, kind = EXCLUDED.kind, error = EXCLUDED.error, data = EXCLUDED.data
"""

_JOB_SELECT = f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs"
_NOW = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"


def _scalar(cursor: Any) -> Any:
    """The one value of a query that always returns one row (an aggregate, the clock)."""
    row = cursor.fetchone()
    if row is None:
        raise FaultlensError("the database returned no row for an aggregate query")
    return row[0]


def _clean(value: Any) -> Any:
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


def _upsert_sql(table: str, columns: Iterable[str], pk: tuple[str, ...]) -> str:
    columns = list(columns)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in pk)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('%s' for _ in columns)})"
        f" ON CONFLICT ({', '.join(pk)}) DO UPDATE SET {updates}"
    )


def _upsert(conn: psycopg.Connection, table: str, row: dict[str, Any], pk: tuple[str, ...]) -> None:
    conn.execute(_upsert_sql(table, row, pk), [_clean(v) for v in row.values()])


class PostgresStore:
    """A faultlens store in a PostgreSQL database (its tables in the connection's search_path).

    url: a libpq URL, ``postgresql://USER:PASSWORD@HOST:PORT/DATABASE?...``.
    pool_size: most connections this process opens (threads beyond it wait).
    """

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout: float = 10.0):
        self.url = url
        self.location = describe(url)
        self._local = threading.local()
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout)) as conn:
                self._migrate(conn)
        except psycopg.OperationalError as exc:
            raise FaultlensError(f"cannot open the PostgreSQL store at {self.location}: {str(exc).strip()}") from None
        self._pool = ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=True,
            name=f"faultlens {self.location}", timeout=60,
        )

    # -- connections -------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:  # inside batch(): read our own uncommitted writes
            yield conn
            return
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection]:
        """One transaction (or, inside `batch()`, part of the batch's)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def batch(self, trace_ids: Iterable[str] = ()) -> Iterator[PostgresStore]:
        """Everything this thread writes inside lands in one transaction, or nothing does.

        Writers (in any process) that name one of the same `trace_ids` wait
        for this batch to commit: a batch reads its traces' state and decides
        what to write knowing no other server is halfway through them.
        """
        if getattr(self._local, "conn", None) is not None:
            yield self
            return
        # Pipeline mode: statements whose results are not read go out without waiting for
        # the server, so a request's writes take a few round trips, not a few per span.
        with self._pool.connection() as conn, conn.transaction(), conn.pipeline():
            for trace_id in sorted(set(trace_ids)):  # one order everywhere: no deadlock between batches
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_TRACE_SPACE, trace_id])
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

    def close(self) -> None:
        self._pool.close()

    def __del__(self) -> None:
        # Close the pool from the thread that drops the store: left to the
        # garbage collector, the pool may be finalised on one of its own
        # threads, which cannot join itself.
        pool = getattr(self, "_pool", None)
        if pool is not None and not pool.closed:
            try:
                pool.close(timeout=1.0)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    def _migrate(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            conn.execute("CREATE TABLE IF NOT EXISTS store_schema (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)")
            found = _scalar(conn.execute("SELECT COALESCE(MAX(version), 0) FROM store_schema"))
            if found > STORE_SCHEMA_VERSION:
                raise SchemaTooNew(self.location, found)
            for version in range(found + 1, STORE_SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO store_schema (version, applied_at) VALUES (%s, %s)", [version, time.time()])

    def schema_version(self) -> int:
        with self._read() as conn:
            return _scalar(conn.execute("SELECT COALESCE(MAX(version), 0) FROM store_schema"))

    # -- traces ------------------------------------------------------------
    def save_trace(self, trace: Trace) -> None:
        """Store a whole trace, replacing any earlier version of it atomically."""
        self.save_traces([trace])

    def save_traces(self, traces: Iterable[Trace]) -> int:
        """Store many whole traces in one transaction: all of them land, or none."""
        count = 0
        with self._write() as conn:
            for trace in traces:
                conn.execute("DELETE FROM steps WHERE trace_id = %s", [trace.id])
                _upsert(conn, "traces", trace_row(trace), ("id",))
                rows = [step_row(trace.id, step, step.index, float(step.index)) for step in trace.steps]
                if rows:
                    with conn.cursor() as cur:
                        cur.executemany(_upsert_sql("steps", rows[0], ("trace_id", "key")), [[_clean(v) for v in r.values()] for r in rows])
                count += 1
        return count

    def begin_trace(self, trace: Trace) -> None:
        """Write a trace's header (task, agents, source) without touching its steps."""
        with self._write() as conn:
            _upsert(conn, "traces", trace_row(trace), ("id",))

    def add_step(self, trace_id: str, step: Step) -> None:
        """Add or replace one step (idempotent by span id). The trace header must exist."""
        self.add_steps(trace_id, [step])

    # One serialisation for both stores (store_api.prepare_steps).
    prepare_steps = staticmethod(prepare_steps)

    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep], *, new_run: bool = False) -> None:
        """Add or replace steps of one trace in one transaction (idempotent by span id).

        A new step gets the next arrival number (`seq`); a step written again
        keeps its own. The trace header must exist. new_run: the header was
        written in this transaction for a run not stored before (its
        `updated_at` is fresh).
        """
        if not steps:
            return
        trace_id = _clean(redact_id(trace_id))
        rows = [
            {"trace_id": trace_id, "key": _clean(p.key), "started": p.started_at, "agent": _clean(p.agent), "kind": p.kind, "error": p.error, "data": p.data}
            for p in prepared(steps)
        ]
        with self._write() as conn:
            # The trace's row lock makes concurrent writers of one trace take turns, so
            # seq stays distinct; the statements after it see what they committed.
            # No result is read, so inside a batch (pipeline mode) none waits for a round
            # trip. A missing header fails the foreign key, as on SQLite.
            conn.execute("SELECT 1 FROM traces WHERE id = %s FOR UPDATE", [trace_id])
            with conn.cursor() as cur:
                cur.executemany(_UPSERT_STEP, rows)
            if not new_run:
                conn.execute("UPDATE traces SET updated_at = %s WHERE id = %s", [time.time(), trace_id])

    # -- span links: the tree a run's agents are resolved from (spans.ingest) --
    _LINK_COLUMNS = ("span_id", "parent_id", "start_ns", "agent", "describes", "task", "output", "waiting_on")

    def save_span_links(self, trace_id: str, rows: Iterable[dict[str, Any]]) -> None:
        trace_id = redact_id(trace_id)
        values = [[_clean(trace_id), *(_clean(link.get(c)) for c in self._LINK_COLUMNS)] for link in map(stored_link, rows)]
        if not values:
            return
        with self._write() as conn, conn.cursor() as cur:
            cur.executemany(_upsert_sql("span_links", ("trace_id", *self._LINK_COLUMNS), ("trace_id", "span_id")), values)

    def span_links(
        self, trace_id: str, *, span_ids: list[str] | None = None, parent_id: str | None = None, describing: bool = False, with_task: bool = False
    ) -> list[dict[str, Any]]:
        """Stored links of a run: those of `span_ids`, the children of `parent_id`, those that name or describe agents, or those that state a task."""
        where, params = ["trace_id = %s"], [_clean(redact_id(trace_id))]
        if parent_id is not None:
            where.append("parent_id = %s")
            params.append(_clean(redact_id(parent_id)))
        if span_ids is not None:
            where.append("span_id = ANY(%s)")
            params.append([_clean(i) for i in stored_ids(span_ids)])
        if with_task:
            where.append("task IS NOT NULL")
        columns = ", ".join(self._LINK_COLUMNS)
        sql = f"SELECT {columns} FROM span_links WHERE {' AND '.join(where)}"
        if describing:
            # Each agent's first span, and the spans that describe agents.
            sql = (f"(SELECT DISTINCT ON (agent) {columns} FROM span_links WHERE {' AND '.join(where)} AND agent IS NOT NULL"
                   f" ORDER BY agent, start_ns) UNION ALL ({sql} AND describes IS NOT NULL)")
            params = params + params
        with self._read() as conn:
            return [dict(zip(self._LINK_COLUMNS, row)) for row in conn.execute(sql, params).fetchall()]

    def first_agent_spans(self, trace_id: str, agents: list[str]) -> dict[str, str]:
        """agent → span id of its first stored span (by start time, then span id), for those of `agents` that have one."""
        if not agents:
            return {}
        with self._read() as conn:
            rows = conn.execute(
                "SELECT a.n, l.span_id FROM unnest(%s::text[]) WITH ORDINALITY AS a(agent, n) CROSS JOIN LATERAL"
                " (SELECT span_id FROM span_links WHERE trace_id = %s AND agent = a.agent ORDER BY start_ns, span_id LIMIT 1) AS l",
                [[_clean(a) for a in stored_ids(agents)], _clean(redact_id(trace_id))],
            ).fetchall()
        # By position, so the names come back as given (a NUL in one is stored as U+FFFD).
        return {agents[n - 1]: span_id for n, span_id in rows}

    def steps_waiting_on(self, trace_id: str, span_ids: list[str]) -> list[tuple[str, str]]:
        """(step span id, the ancestor it waits on) for steps waiting on any of `span_ids`."""
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            rows = conn.execute("SELECT span_id, waiting_on FROM span_links WHERE trace_id = %s AND waiting_on = ANY(%s)",
                                [_clean(trace_id), [_clean(i) for i in stored_ids(span_ids)]]).fetchall()
        return [(a, b) for a, b in rows]

    def set_step_agents(self, trace_id: str, agents: dict[str, str], waiting: dict[str, str | None]) -> None:
        """Give stored steps (by span id) their agent once the span tree names it, and move what the others wait on."""
        trace_id = redact_id(trace_id)
        trace_id = _clean(trace_id)
        with self._write() as conn:
            for span_id, waiting_on in waiting.items():
                link = stored_link({"span_id": span_id, "waiting_on": waiting_on})
                conn.execute("UPDATE span_links SET waiting_on = %s WHERE trace_id = %s AND span_id = %s",
                             [_clean(link["waiting_on"]), trace_id, _clean(link["span_id"])])
            agents = dict(zip(stored_ids(agents), stored_ids(agents.values())))
            if agents:
                # JSON is kept as text (see the module docstring), so the agent is set in Python, not with jsonb.
                found = conn.execute("SELECT key, data FROM steps WHERE trace_id = %s AND key = ANY(%s) FOR UPDATE",
                                     [trace_id, [_clean(k) for k in agents]]).fetchall()
                for key, data in found:
                    step = json.loads(data)
                    step["agent"] = agents[key]
                    conn.execute("UPDATE steps SET agent = %s, data = %s WHERE trace_id = %s AND key = %s",
                                 [_clean(agents[key]), dumps(step), trace_id, key])
            conn.execute("UPDATE traces SET updated_at = %s WHERE id = %s", [time.time(), trace_id])

    # -- OpenTelemetry trace ids of steps (migration 6) --------------------
    def save_otel_trace_ids(self, trace_id: str, otel_trace_ids: Mapping[str, str]) -> None:
        rows = [[_clean(value) for value in row] for row in otel_span_rows(trace_id, otel_trace_ids)]
        if rows:
            with self._write() as conn, conn.cursor() as cur:
                cur.executemany(_UPSERT_OTEL_SPAN, rows)

    def otel_trace_id(self, trace_id: str, span_id: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(_OTEL_TRACE_ID, [_clean(redact_id(trace_id)), _clean(redact_id(span_id))]).fetchone()
        return None if row is None else row[0]

    def delete_step(self, trace_id: str, key: str) -> None:
        """Remove one step (by span id), e.g. a chain step that turned out to repeat its tool's output."""
        trace_id = redact_id(trace_id)
        with self._write() as conn:
            conn.execute("DELETE FROM steps WHERE trace_id = %s AND key = %s", [_clean(trace_id), _clean(redact_id(key))])

    def set_run_agents(self, trace_id: str, agents: list[AgentInfo]) -> None:
        trace_id = redact_id(trace_id)
        data = redact([a.model_dump(mode="json") for a in agents])
        with self._write() as conn:
            conn.execute("UPDATE traces SET agents = %s, updated_at = %s WHERE id = %s", [dumps(data), time.time(), _clean(trace_id)])

    def fill_run_query(self, trace_id: str, query: str) -> None:
        """Set a run's task query if it has none yet (a task given by the run itself is kept)."""
        trace_id = redact_id(trace_id)
        if not query:
            return
        query = redact(query)
        with self._write() as conn:
            row = conn.execute("SELECT query, task FROM traces WHERE id = %s FOR UPDATE", [_clean(trace_id)]).fetchone()
            if row is None or row[0]:
                return
            task = json.loads(row[1]) if row[1] else {}
            task["query"] = query
            conn.execute("UPDATE traces SET query = %s, task = %s, updated_at = %s WHERE id = %s",
                         [_clean(query), dumps(task), time.time(), _clean(trace_id)])

    def set_outcome(self, trace_id: str, outcome: Outcome) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as conn:
            found = conn.execute(
                "UPDATE traces SET outcome = %s, success = %s, updated_at = %s WHERE id = %s RETURNING id",
                [dumps(redact(outcome.model_dump(mode="json"))), int(outcome.success), time.time(), _clean(trace_id)],
            ).fetchone()
            if found is None:
                raise TraceNotFound(trace_id)

    def set_gold(self, trace_id: str, gold: GoldLabel | None) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as conn:
            found = conn.execute("UPDATE traces SET gold = %s, updated_at = %s WHERE id = %s RETURNING id",
                                 [gold_column(gold), time.time(), _clean(trace_id)]).fetchone()
            if found is None:
                raise TraceNotFound(trace_id)

    def has_trace(self, trace_id: str) -> bool:
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM traces WHERE id = %s", [_clean(trace_id)]).fetchone() is not None

    def get_outcome(self, trace_id: str) -> Outcome | None:
        """A run's outcome without reading its steps (None if not recorded yet). Raises TraceNotFound."""
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            row = conn.execute("SELECT outcome FROM traces WHERE id = %s", [_clean(trace_id)]).fetchone()
        if row is None:
            raise TraceNotFound(trace_id)
        return Outcome.model_validate_json(row[0]) if row[0] else None

    def get_trace(self, trace_id: str) -> Trace:
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            row = conn.execute(
                "SELECT schema_version, task, agents, outcome, source, gold, metadata, created_at FROM traces WHERE id = %s",
                [_clean(trace_id)],
            ).fetchone()
            if row is None:
                raise TraceNotFound(trace_id)
            rows = conn.execute("SELECT data FROM steps WHERE trace_id = %s ORDER BY position, seq", [_clean(trace_id)]).fetchall()
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
        sql, params = list_query(status=status, agent=None if agent is None else _clean(agent), since=since, labelled=labelled,
                                 limit=limit, offset=offset, mark="%s")
        with self._read() as conn:
            return [summary_from_row(r) for r in conn.execute(sql, params).fetchall()]

    def count_traces(self) -> int:
        with self._read() as conn:
            return _scalar(conn.execute("SELECT COUNT(*) FROM traces"))

    def delete_trace(self, trace_id: str) -> None:
        trace_id = redact_id(trace_id)
        with self._write() as conn:
            conn.execute("DELETE FROM steps WHERE trace_id = %s", [_clean(trace_id)])
            conn.execute("DELETE FROM span_links WHERE trace_id = %s", [_clean(trace_id)])
            conn.execute("DELETE FROM otel_spans WHERE trace_id = %s", [_clean(trace_id)])
            conn.execute("DELETE FROM traces WHERE id = %s", [_clean(trace_id)])

    # -- attributions ------------------------------------------------------
    def save_attribution(self, attribution: Attribution) -> None:
        a = Attribution.model_validate(redact(attribution.model_dump(mode="json")))
        row = {
            "id": a.id, "trace_id": a.trace_id, "method": a.method, "model": a.model, "status": a.status.value,
            "agent": a.agent, "step": a.step, "mode": a.mode, "created_at": a.created_at, "data": a.model_dump_json(),
        }
        with self._write() as conn:
            _upsert(conn, "attributions", row, ("id",))

    def attributions(self, trace_id: str) -> list[Attribution]:
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            rows = conn.execute("SELECT data FROM attributions WHERE trace_id = %s ORDER BY created_at, id", [_clean(trace_id)]).fetchall()
        return [Attribution.model_validate_json(r[0]) for r in rows]

    # -- lessons -----------------------------------------------------------
    def save_lesson(self, lesson: Lesson) -> None:
        lesson = Lesson.model_validate(redact(lesson.model_dump(mode="json")))
        row = {
            "id": lesson.id, "agent": lesson.agent, "mode": lesson.mode, "retired": int(lesson.retired),
            "created_at": lesson.created_at, "updated_at": lesson.updated_at, "data": lesson.model_dump_json(),
        }
        with self._write() as conn:
            _upsert(conn, "lessons", row, ("id",))

    def get_lesson(self, lesson_id: str) -> Lesson:
        with self._read() as conn:
            row = conn.execute("SELECT data FROM lessons WHERE id = %s", [_clean(lesson_id)]).fetchone()
        if row is None:
            raise KeyError(f"no lesson with id {lesson_id!r}")
        return Lesson.model_validate_json(row[0])

    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]:
        where, params = [], []
        if agent is not None:
            where.append("agent = %s")
            params.append(_clean(agent))
        if not include_retired:
            where.append("retired = 0")
        sql = "SELECT data FROM lessons" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, id"
        with self._read() as conn:
            return [Lesson.model_validate_json(r[0]) for r in conn.execute(sql, params).fetchall()]

    # -- jobs (the failed-run queue, see jobs.py) ----------------------------
    def get_job(self, trace_id: str) -> Job | None:
        trace_id = redact_id(trace_id)
        with self._read() as conn:
            row = conn.execute(_JOB_SELECT + " WHERE trace_id = %s", [_clean(trace_id)]).fetchone()
        return None if row is None else Job.from_row(row)

    def job_counts(self) -> dict[str, int]:
        with self._read() as conn:
            return dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())

    def submit_job(self, trace_id: str, *, hold: bool = False, again: bool = False, max_queued: int | None = None, drop_reason: str | None = None) -> Job:
        trace_id = redact_id(trace_id)
        with self._write() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_JOB_SPACE, _clean(trace_id)])
            row = conn.execute(_JOB_SELECT + " WHERE trace_id = %s", [_clean(trace_id)]).fetchone()
            current = None if row is None else Job.from_row(row)
            queued = _scalar(conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'queued'")) if max_queued is not None else 0
            now = _scalar(conn.execute(_NOW))
            job = next_submission(current, trace_id, now, hold=hold, queued=queued, max_queued=max_queued, drop_reason=drop_reason, again=again)
            if job is None:
                assert current is not None
                return current
            _upsert(conn, "jobs", job_row(job), ("trace_id",))
            return job

    def claim_job(self, worker: str, *, lease: float, max_attempts: int) -> Job | None:
        with self._write() as conn:
            now = _scalar(conn.execute(_NOW))
            conn.execute(
                "UPDATE jobs SET state = 'error', finished_at = %(now)s, runs = runs + 1, lease_until = NULL, lost = lost + 1,"
                " error = 'gave up after ' || attempts || ' attempts: the lease of ' || worker || ' ran out ' || (lost + 1) || ' time(s)'"
                " WHERE trace_id IN (SELECT trace_id FROM jobs WHERE state = 'running' AND lease_until < %(now)s"
                " AND lost + 1 >= %(max)s FOR UPDATE SKIP LOCKED)",
                {"now": now, "max": max_attempts},
            )
            row = conn.execute(
                "WITH next AS (SELECT trace_id FROM jobs WHERE (state = 'queued' AND not_before <= %(now)s)"
                " OR (state = 'running' AND lease_until < %(now)s) ORDER BY queued_at, trace_id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " UPDATE jobs SET state = 'running', worker = %(worker)s, attempts = jobs.attempts + 1,"
                " lost = jobs.lost + CASE WHEN jobs.state = 'running' THEN 1 ELSE 0 END,"
                " lease_until = %(until)s, started_at = %(now)s FROM next WHERE jobs.trace_id = next.trace_id"
                f" RETURNING {', '.join('jobs.' + c for c in JOB_COLUMNS)}",
                {"now": now, "worker": worker, "until": now + lease},
            ).fetchone()
        return None if row is None else Job.from_row(row)

    def renew_job(self, job: Job, *, lease: float) -> bool:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET lease_until = EXTRACT(EPOCH FROM clock_timestamp())::float8 + %s"
                " WHERE trace_id = %s AND state = 'running' AND worker = %s AND attempts = %s",
                [lease, _clean(job.trace_id), job.worker, job.attempts],
            )
            return cursor.rowcount == 1

    def finish_job(self, job: Job, *, error: str | None = None, retry_in: float | None = None) -> bool:
        state = "done" if error is None else ("queued" if retry_in is not None else "error")
        with self._write() as conn:
            now = _scalar(conn.execute(_NOW))
            cursor = conn.execute(
                "UPDATE jobs SET state = %s, error = %s, runs = runs + 1, lease_until = NULL, finished_at = %s, not_before = %s"
                " WHERE trace_id = %s AND state = 'running' AND worker = %s AND attempts = %s",
                [state, _clean(None if error is None else redact_text(error)), now, now + (retry_in or 0.0), _clean(job.trace_id), job.worker, job.attempts],
            )
            return cursor.rowcount == 1
