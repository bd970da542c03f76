"""The one SQL store: traces, steps, the span tree, attributions and lessons, written once for SQLite and PostgreSQL.

`SQLStore` is the `Store` protocol over a `dialect.Dialect`; `sqlite.SQLiteStore`
and `postgres.PostgresStore` only choose the dialect. Its semantics (one test
suite checks both backends):

- a step is idempotent by span id: writing the same span twice replaces it;
  steps of a live run arrive in the order their spans *end*, and a trace read
  back orders them by start time and numbers them 0..n-1;
- `save_traces` and everything inside `batch()` land together or not at all;
- secrets are redacted before anything is written, and every id a row is
  written or looked up by is a `StoredId` (`ids.stored_id`, applied once at
  each method's door), so a run whose id holds a secret is found again;
- the tables carry a layout version and are migrated forward when the store
  opens (`migrations`).

Writes cost what the request holds, not what the run already holds: a batch of
steps is one `executemany` after two indexed look-ups for its sequence numbers
(`add_steps`; on PostgreSQL the statement finds them itself, saving round trips). The failed-run queue's statements are `sql_jobs`'.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from ..model.trace import AgentInfo, Attribution, GoldLabel, Lesson, Outcome, Step, Trace
from .dialect import C, Dialect, upsert, upsert_sql
from .ids import StoredId, optional_id, stored_id, stored_ids
from .migrations import migrate
from .protocol import LinkRow, TraceNotFound, TraceSummary
from .rows import (
    PreparedStep,
    dumps,
    gold_column,
    link_from_row,
    list_query,
    prepare_steps,
    prepared,
    step_row,
    stored_link,
    summary_from_row,
    trace_from_row,
    trace_row,
)
from .redact import redact
from .sql_jobs import JobsSQL

_STEP_COLUMNS = ("trace_id", "key", "position", "seq", "agent", "kind", "error", "data")
_LINK_COLUMNS = ("span_id", "parent_id", "start_ns", "agent", "describes", "task", "output", "waiting_on")
_TRACE_COLUMNS = "schema_version, task, agents, outcome, source, gold, metadata, created_at"

# A step's seq is the one it already has (same span again) or the next; a live step
# is ordered by when its span started, one without a clock by arrival. Statements of
# one transaction see each other's rows, so a batch of them numbers steps in order.
# (`WHERE true`: SQLite's parser needs it between INSERT ... SELECT and ON CONFLICT.)
_ADD_STEP = """WITH s AS (SELECT COALESCE(
        (SELECT seq FROM steps WHERE trace_id = ? AND key = ?),
        (SELECT COALESCE(MAX(seq), -1) + 1 FROM steps WHERE trace_id = ?)) AS seq)
INSERT INTO steps (trace_id, key, position, seq, agent, kind, error, data)
SELECT ?, ?, COALESCE(CAST(? AS {real}), CAST(s.seq AS {real})), s.seq, ?, ?, ?, ? FROM s WHERE true
ON CONFLICT (trace_id, key) DO UPDATE SET position = excluded.position, seq = excluded.seq,
    agent = excluded.agent, kind = excluded.kind, error = excluded.error, data = excluded.data"""


class SQLStore(JobsSQL[C]):
    """A faultlens store in a SQL database, through `dialect`; its tables are migrated to the current layout on open."""

    location: str

    def __init__(self, dialect: Dialect[C]):
        self._d = dialect
        self.location = dialect.location
        self._add_step = _ADD_STEP.format(**dialect.words)
        migrate(dialect)

    @contextmanager
    def batch(self, trace_ids: Iterable[str] = ()) -> Iterator[SQLStore[C]]:
        """Everything this thread writes inside lands in one transaction, or nothing does.

        `trace_ids` are the runs the batch reads and writes: writers (in any
        process) that name one of them wait for this batch to commit, so a batch
        decides what to write knowing no other server is halfway through them.
        """
        # One order everywhere: no deadlock between batches.
        with self._d.batch(sorted(set(stored_ids(trace_ids)))):
            yield self

    def close(self) -> None:
        self._d.close()

    def schema_version(self) -> int:
        with self._d.read() as conn:
            return self._d.execute(conn, "SELECT COALESCE(MAX(version), 0) FROM store_schema").fetchone()[0]

    # -- traces ------------------------------------------------------------
    def save_trace(self, trace: Trace) -> None:
        """Store a whole trace, replacing any earlier version of it atomically."""
        self.save_traces([trace])

    def save_traces(self, traces: Iterable[Trace]) -> int:
        """Store many whole traces in one transaction: all of them land, or none."""
        count = 0
        run = self._d.execute
        with self._d.write() as conn:
            for trace in traces:
                header = trace_row(trace)
                trace_id = header["id"]
                run(conn, "DELETE FROM steps WHERE trace_id = ?", [trace_id])
                upsert(self._d, conn, "traces", header, ("id",))
                rows = [tuple(step_row(trace_id, step, step.index, float(step.index)).values()) for step in trace.steps]
                if rows:
                    self._d.executemany(conn, upsert_sql("steps", _STEP_COLUMNS, ("trace_id", "key")), rows)
                count += 1
        return count

    def begin_trace(self, trace: Trace) -> None:
        """Write a trace's header (task, agents, source) without touching its steps."""
        with self._d.write() as conn:
            upsert(self._d, conn, "traces", trace_row(trace), ("id",))

    def begin_trace_if_absent(self, trace: Trace) -> bool:
        """Write a run's header only if no run has its id; True if it was written.

        What is stored is kept whole (above all an outcome posted before the
        run's first step): a check then a write would let another writer slip in between."""
        row = trace_row(trace)
        columns = ", ".join(row)
        sql = f"INSERT INTO traces ({columns}) VALUES ({', '.join('?' for _ in row)}) ON CONFLICT (id) DO NOTHING RETURNING id"
        with self._d.write() as conn:
            return bool(self._d.execute(conn, sql, list(row.values())).fetchall())

    def add_step(self, trace_id: str, step: Step) -> None:
        """Add or replace one step (idempotent by span id). The trace header must exist."""
        self.add_steps(trace_id, [step])

    # Serialising steps is the costly part of writing them: done before a transaction opens.
    prepare_steps = staticmethod(prepare_steps)

    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep], *, new_run: bool = False) -> None:
        """Add or replace steps of one trace in one transaction (idempotent by span id).

        A new step gets the next arrival number (`seq`); a step written again
        keeps its own. The trace header must exist (a missing one fails the
        foreign key). new_run: the header was written in this transaction for a
        run not stored before (its `updated_at` is fresh).
        """
        if not steps:
            return
        sid = stored_id(trace_id)
        rows = prepared(steps)
        with self._d.write() as conn:
            if self._d.remote and not new_run:
                # The run's row lock makes concurrent writers of one run take turns, so seq stays
                # distinct; the database numbers the steps, so no result is read: inside a batch,
                # nothing here waits for a round trip.
                self._d.execute(conn, f"SELECT 1 FROM traces WHERE id = ?{self._d.for_update}", [sid])
                self._d.executemany(conn, self._add_step, [(sid, p.key, sid, sid, p.key, p.started_at, p.agent, p.kind, p.error, p.data) for p in rows])
            else:
                # In process, two indexed reads cost less than two subqueries a row; a new run has nothing to read.
                self._d.executemany(conn, upsert_sql("steps", _STEP_COLUMNS, ("trace_id", "key")), self._numbered(conn, sid, rows, new_run))
            if not new_run:
                self._d.execute(conn, "UPDATE traces SET updated_at = ? WHERE id = ?", [time.time(), sid])

    def _numbered(self, conn: C, trace_id: StoredId, steps: list[PreparedStep], new_run: bool) -> list[tuple[object, ...]]:
        """`steps` as `steps` rows numbered here: a step stored before keeps its seq, a new one gets the next."""
        next_seq = 0
        known: dict[str, int] = {}
        if not new_run:
            next_seq = self._d.execute(conn, "SELECT COALESCE(MAX(seq), -1) + 1 FROM steps WHERE trace_id = ?", [trace_id]).fetchone()[0]
        if next_seq > 0:  # a run with no steps yet has no keys to look up
            for chunk in self._d.chunks(list(dict.fromkeys(p.key for p in steps))):
                condition, values = self._d.in_list("key", chunk)
                known.update(self._d.execute(conn, f"SELECT key, seq FROM steps WHERE trace_id = ? AND {condition}", [trace_id, *values]).fetchall())
        out: list[tuple[object, ...]] = []
        for p in steps:
            seq = known.get(p.key)
            if seq is None:
                seq = known[p.key] = next_seq
                next_seq += 1
            # A live step is ordered by when its span started; one without a clock by arrival.
            out.append((trace_id, p.key, p.started_at if p.started_at is not None else float(seq), seq, p.agent, p.kind, p.error, p.data))
        return out

    # -- span links: the tree a run's agents are resolved from (middleware.ingest) --
    def save_span_links(self, trace_id: str, rows: Iterable[LinkRow]) -> None:
        sid = stored_id(trace_id)
        values = [(sid, *map(stored_link(row).get, _LINK_COLUMNS)) for row in rows]
        if not values:
            return
        with self._d.write() as conn:
            self._d.executemany(conn, upsert_sql("span_links", ("trace_id", *_LINK_COLUMNS), ("trace_id", "span_id")), values)

    def span_links(
        self, trace_id: str, *, span_ids: list[str] | None = None, parent_id: str | None = None, describing: bool = False, with_task: bool = False
    ) -> list[LinkRow]:
        """Stored links of a run: those of `span_ids`, the children of `parent_id`, those that name or describe agents, or those that state a task."""
        where: list[str] = ["trace_id = ?"]
        params: list[object] = [stored_id(trace_id)]
        if parent_id is not None:
            where.append("parent_id = ?")
            params.append(stored_id(parent_id))
        if with_task:
            where.append("task IS NOT NULL")
        if span_ids is None:
            return self._links(where, params, describing)
        found: list[LinkRow] = []
        for chunk in self._d.chunks(stored_ids(span_ids)):
            condition, values = self._d.in_list("span_id", chunk)
            found += self._links([*where, condition], [*params, *values], describing)
        return found

    def _links(self, where: list[str], params: list[object], describing: bool) -> list[LinkRow]:
        columns, condition = ", ".join(_LINK_COLUMNS), " AND ".join(where)
        sql = f"SELECT {columns} FROM span_links WHERE {condition}"
        if describing:
            # Each agent's first span, and the spans that describe agents.
            firsts = self._d.first_per_group(_LINK_COLUMNS, f"{condition} AND agent IS NOT NULL", "agent", "start_ns")
            sql = f"{firsts} UNION ALL {sql} AND describes IS NOT NULL"
            params = params + params
        with self._d.read() as conn:
            return [link_from_row(row) for row in self._d.execute(conn, sql, params).fetchall()]

    def first_agent_spans(self, trace_id: str, agents: list[str]) -> dict[str, str]:
        """agent → span id of its first stored span (by start time, then span id), for those of `agents` that have one."""
        sid = stored_id(trace_id)
        found: dict[str, str] = {}
        named = list(enumerate(stored_ids(agents)))
        with self._d.read() as conn:
            for chunk in self._d.chunks(named, per_value=2):
                # One indexed look-up per agent (span_links_agent), all in one statement.
                values = ", ".join("(?, ?)" for _ in chunk)
                rows = self._d.execute(
                    conn,
                    "SELECT v.column1, (SELECT span_id FROM span_links WHERE trace_id = ? AND agent = v.column2"
                    f" ORDER BY start_ns, span_id LIMIT 1) FROM (VALUES {values}) AS v",
                    [sid, *(x for pair in chunk for x in pair)],
                ).fetchall()
                # By position, so the names come back as given (a NUL in one is stored as U+FFFD on PostgreSQL).
                found.update((agents[n], span_id) for n, span_id in rows if span_id is not None)
        return found

    def steps_waiting_on(self, trace_id: str, span_ids: list[str]) -> list[tuple[str, str]]:
        """(step span id, the ancestor it waits on) for steps waiting on any of `span_ids`."""
        sid = stored_id(trace_id)
        found: list[tuple[str, str]] = []
        with self._d.read() as conn:
            for chunk in self._d.chunks(stored_ids(span_ids)):
                condition, values = self._d.in_list("waiting_on", chunk)
                rows = self._d.execute(conn, f"SELECT span_id, waiting_on FROM span_links WHERE trace_id = ? AND {condition}", [sid, *values])
                found += [(a, b) for a, b in rows.fetchall()]
        return found

    def set_step_agents(self, trace_id: str, agents: dict[str, str], waiting: dict[str, str | None]) -> None:
        """Give stored steps (by span id) their agent once the span tree names it, and move what the others wait on."""
        sid = stored_id(trace_id)
        named = {stored_id(span_id): stored_id(agent) for span_id, agent in agents.items()}
        with self._d.write() as conn:
            for span_id, waiting_on in waiting.items():
                self._d.execute(conn, "UPDATE span_links SET waiting_on = ? WHERE trace_id = ? AND span_id = ?",
                                [optional_id(waiting_on), sid, stored_id(span_id)])
            if named:
                self._set_agents(conn, sid, named)
            self._d.execute(conn, "UPDATE traces SET updated_at = ? WHERE id = ?", [time.time(), sid])

    def _set_agents(self, conn: C, trace_id: StoredId, agents: dict[StoredId, StoredId]) -> None:
        """Steps' agent column and the agent in their JSON, by step key."""
        expression = self._d.json_set("data", "agent")
        if expression is not None:
            self._d.executemany(conn, f"UPDATE steps SET agent = ?, data = {expression} WHERE trace_id = ? AND key = ?",
                                [(agent, agent, trace_id, key) for key, agent in agents.items()])
            return
        for chunk in self._d.chunks(list(agents)):
            condition, values = self._d.in_list("key", chunk)
            found = self._d.execute(conn, f"SELECT key, data FROM steps WHERE trace_id = ? AND {condition}{self._d.for_update}",
                                    [trace_id, *values]).fetchall()
            for key, data in found:
                step = json.loads(data)
                step["agent"] = agents[key]
                self._d.execute(conn, "UPDATE steps SET agent = ?, data = ? WHERE trace_id = ? AND key = ?",
                                [agents[key], dumps(step), trace_id, key])

    def delete_step(self, trace_id: str, key: str) -> None:
        """Remove one step (by span id), e.g. a chain step that turned out to repeat its tool's output."""
        with self._d.write() as conn:
            self._d.execute(conn, "DELETE FROM steps WHERE trace_id = ? AND key = ?", [stored_id(trace_id), stored_id(key)])

    def set_run_agents(self, trace_id: str, agents: list[AgentInfo]) -> None:
        data = redact([a.model_dump(mode="json") for a in agents])
        with self._d.write() as conn:
            self._d.execute(conn, "UPDATE traces SET agents = ?, updated_at = ? WHERE id = ?", [dumps(data), time.time(), stored_id(trace_id)])

    def fill_run_query(self, trace_id: str, query: str) -> None:
        """Set a run's task query if it has none yet (a task given by the run itself is kept)."""
        if not query:
            return
        sid = stored_id(trace_id)
        if not self._lacks_query(sid):
            return  # a read, so that every model call of a run does not take the write lock
        query = redact(query)
        with self._d.write() as conn:
            row = self._d.execute(conn, f"SELECT query, task FROM traces WHERE id = ?{self._d.for_update}", [sid]).fetchone()
            if row is None or row[0]:
                return
            task = json.loads(row[1]) if row[1] else {}
            task["query"] = query
            self._d.execute(conn, "UPDATE traces SET query = ?, task = ?, updated_at = ? WHERE id = ?", [query, dumps(task), time.time(), sid])

    def _lacks_query(self, trace_id: StoredId) -> bool:
        with self._d.read() as conn:
            row = self._d.execute(conn, "SELECT query FROM traces WHERE id = ?", [trace_id]).fetchone()
        return row is not None and not row[0]

    def set_outcome(self, trace_id: str, outcome: Outcome) -> None:
        self._update_run(trace_id, "outcome = ?, success = ?", [dumps(redact(outcome.model_dump(mode="json"))), int(outcome.success)])

    def set_detection(self, trace_id: str, p_failed: float | None, suspected: bool) -> None:
        """Keep the failure detector's verdict on a run with no outcome (`suspected`: it passed the threshold)."""
        self._update_run(trace_id, "p_failed = ?, suspected = ?", [p_failed, int(suspected)])

    def detection(self, trace_id: str) -> tuple[float | None, bool]:
        """(p_failed, suspected) of a run: (None, False) if the detector has not scored it; TraceNotFound if there is no run."""
        with self._d.read() as conn:
            row = self._d.execute(conn, "SELECT p_failed, suspected FROM traces WHERE id = ?", [stored_id(trace_id)]).fetchone()
        if row is None:
            raise TraceNotFound(stored_id(trace_id))
        return row[0], bool(row[1])

    def set_gold(self, trace_id: str, gold: GoldLabel | None) -> None:
        self._update_run(trace_id, "gold = ?", [gold_column(gold)])

    def _update_run(self, trace_id: str, assignments: str, values: list[object]) -> None:
        """Set columns of a stored run (and its `updated_at`); TraceNotFound if there is none."""
        sid = stored_id(trace_id)
        with self._d.write() as conn:
            found = self._d.execute(conn, f"UPDATE traces SET {assignments}, updated_at = ? WHERE id = ? RETURNING id",
                                    [*values, time.time(), sid]).fetchall()
            if not found:
                raise TraceNotFound(sid)

    # Readers take the id a caller knows (perhaps one holding a secret) and look
    # up the id it was stored under; stored_id is the identity on clean ids.
    def has_trace(self, trace_id: str) -> bool:
        with self._d.read() as conn:
            return self._d.execute(conn, "SELECT 1 FROM traces WHERE id = ?", [stored_id(trace_id)]).fetchone() is not None

    def get_outcome(self, trace_id: str) -> Outcome | None:
        """A run's outcome without reading its steps (None if not recorded yet). Raises TraceNotFound."""
        sid = stored_id(trace_id)
        with self._d.read() as conn:
            row = self._d.execute(conn, "SELECT outcome FROM traces WHERE id = ?", [sid]).fetchone()
        if row is None:
            raise TraceNotFound(sid)
        return Outcome.model_validate_json(row[0]) if row[0] else None

    def get_trace(self, trace_id: str) -> Trace:
        sid = stored_id(trace_id)
        with self._d.read() as conn:
            row = self._d.execute(conn, f"SELECT {_TRACE_COLUMNS} FROM traces WHERE id = ?", [sid]).fetchone()
            if row is None:
                raise TraceNotFound(sid)
            steps = self._d.execute(conn, "SELECT data FROM steps WHERE trace_id = ? ORDER BY position, seq", [sid]).fetchall()
        return trace_from_row(sid, row, [data for (data,) in steps])

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
        sql, params = list_query(status=status, agent=optional_id(agent), since=since, labelled=labelled, limit=limit, offset=offset, mark="?")
        with self._d.read() as conn:
            return [summary_from_row(r) for r in self._d.execute(conn, sql, params).fetchall()]

    def count_traces(self) -> int:
        with self._d.read() as conn:
            return self._d.execute(conn, "SELECT COUNT(*) FROM traces").fetchone()[0]

    def delete_trace(self, trace_id: str) -> None:
        sid = stored_id(trace_id)
        with self._d.write() as conn:
            for sql in ("DELETE FROM steps WHERE trace_id = ?", "DELETE FROM span_links WHERE trace_id = ?", "DELETE FROM otel_spans WHERE trace_id = ?",
                        "DELETE FROM traces WHERE id = ?"):
                self._d.execute(conn, sql, [sid])

    # -- OpenTelemetry trace ids of steps' spans (migration 6) -------------
    def save_otel_trace_ids(self, trace_id: str, otel_trace_ids: Mapping[str, str]) -> None:
        """Record span id -> OTel trace id for a run's spans (what its attributions are exported onto)."""
        sid = stored_id(trace_id)
        rows = [(sid, stored_id(span_id), otel_id) for span_id, otel_id in otel_trace_ids.items()]
        if rows:
            with self._d.write() as conn:
                self._d.executemany(conn, upsert_sql("otel_spans", ("trace_id", "span_id", "otel_trace_id"), ("trace_id", "span_id")), rows)

    def otel_trace_id(self, trace_id: str, span_id: str) -> str | None:
        with self._d.read() as conn:
            row = self._d.execute(conn, "SELECT otel_trace_id FROM otel_spans WHERE trace_id = ? AND span_id = ?",
                                  [stored_id(trace_id), stored_id(span_id)]).fetchone()
        return None if row is None else row[0]

    # -- attributions ------------------------------------------------------
    def save_attribution(self, attribution: Attribution) -> None:
        a = Attribution.model_validate(redact(attribution.model_dump(mode="json")))
        row = {
            "id": stored_id(a.id), "trace_id": stored_id(a.trace_id), "method": a.method, "model": a.model, "status": a.status.value,
            "agent": a.agent, "step": a.step, "mode": a.mode, "created_at": a.created_at, "data": a.model_dump_json(),
        }
        with self._d.write() as conn:
            upsert(self._d, conn, "attributions", row, ("id",))

    def attributions(self, trace_id: str) -> list[Attribution]:
        with self._d.read() as conn:
            rows = self._d.execute(conn, "SELECT data FROM attributions WHERE trace_id = ? ORDER BY created_at, id", [stored_id(trace_id)]).fetchall()
        return [Attribution.model_validate_json(r[0]) for r in rows]

    # -- lessons -----------------------------------------------------------
    def save_lesson(self, lesson: Lesson) -> None:
        lesson = Lesson.model_validate(redact(lesson.model_dump(mode="json")))
        row = {
            "id": stored_id(lesson.id), "agent": stored_id(lesson.agent), "mode": lesson.mode, "retired": int(lesson.retired),
            "created_at": lesson.created_at, "updated_at": lesson.updated_at, "data": lesson.model_dump_json(),
        }
        with self._d.write() as conn:
            upsert(self._d, conn, "lessons", row, ("id",))

    def get_lesson(self, lesson_id: str) -> Lesson:
        with self._d.read() as conn:
            row = self._d.execute(conn, "SELECT data FROM lessons WHERE id = ?", [stored_id(lesson_id)]).fetchone()
        if row is None:
            raise KeyError(f"no lesson with id {lesson_id!r}")
        return Lesson.model_validate_json(row[0])

    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]:
        where: list[str] = []
        params: list[object] = []
        if agent is not None:
            where.append("agent = ?")
            params.append(stored_id(agent))
        if not include_retired:
            where.append("retired = 0")
        sql = "SELECT data FROM lessons" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, id"
        with self._d.read() as conn:
            return [Lesson.model_validate_json(r[0]) for r in self._d.execute(conn, sql, params).fetchall()]
