"""The store's table layout, declared once: each version's steps, applied in order by both backends when a store opens.

A step is SQL written for both SQLite and PostgreSQL, with the few words that
differ left as fields the dialect fills in (`Dialect.words`): ``{real}`` (a
float column), ``{flag}`` (a small integer), ``{bigint}`` and ``{add_column}``
(PostgreSQL adds a column only if it is missing). A step marked for one backend
(`Step.only`) is skipped by the other: a store made at any earlier version
opens and migrates to `STORE_SCHEMA_VERSION` with the tables a new one gets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from .dialect import C, Dialect
from .protocol import STORE_SCHEMA_VERSION, SchemaTooNew
from .reredact import reredact


class RowRewrite(Protocol):
    """A migration step that rewrites rows rather than the layout: called with the dialect and the migration's connection."""

    def __call__(self, dialect: Dialect[C], conn: C, /) -> None: ...


@dataclass(frozen=True)
class Step:
    sql: str = ""
    only: str | None = None  # a dialect's name: the step is that backend's alone
    run: RowRewrite | None = None


def _steps(*items: str | Step) -> tuple[Step, ...]:
    return tuple(item if isinstance(item, Step) else Step(item) for item in items)


MIGRATIONS: dict[int, tuple[Step, ...]] = {
    1: _steps(
        """CREATE TABLE IF NOT EXISTS traces (
            id TEXT PRIMARY KEY, schema_version TEXT, query TEXT, success {flag},
            framework TEXT, benchmark TEXT, modality TEXT, format TEXT,
            created_at {real}, updated_at {real},
            task TEXT, agents TEXT, outcome TEXT, source TEXT, gold TEXT, metadata TEXT)""",
        # Newest first for many servers' lists; SQLite stores have always done without it.
        Step("CREATE INDEX IF NOT EXISTS traces_created ON traces(created_at DESC, id)", only="postgresql"),
        """CREATE TABLE IF NOT EXISTS steps (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            key TEXT NOT NULL, position {real}, seq INTEGER,
            agent TEXT, kind TEXT, error {flag}, data TEXT,
            PRIMARY KEY (trace_id, key))""",
        "CREATE INDEX IF NOT EXISTS steps_agent ON steps(agent)",
        """CREATE TABLE IF NOT EXISTS attributions (
            id TEXT PRIMARY KEY, trace_id TEXT, method TEXT, model TEXT, status TEXT,
            agent TEXT, step INTEGER, mode TEXT, created_at {real}, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS attributions_trace ON attributions(trace_id)",
        """CREATE TABLE IF NOT EXISTS lessons (
            id TEXT PRIMARY KEY, agent TEXT, mode TEXT, retired {flag},
            created_at {real}, updated_at {real}, data TEXT)""",
        "CREATE INDEX IF NOT EXISTS lessons_agent ON lessons(agent)",
    ),
    # The failed-run queue (jobs.py).
    2: _steps(
        """CREATE TABLE IF NOT EXISTS jobs (
            trace_id TEXT PRIMARY KEY, state TEXT NOT NULL, generation INTEGER NOT NULL,
            attempts INTEGER NOT NULL, runs INTEGER NOT NULL, worker TEXT,
            lease_until {real}, not_before {real}, queued_at {real},
            started_at {real}, finished_at {real}, error TEXT)""",
        "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, queued_at)",
    ),
    # Every span's place in its run's tree (steps and the containers that are
    # not steps), so a step's agent is found whatever order spans arrive in
    # (see `middleware.ingest`). `waiting_on`: the ancestor a step's agent waits for.
    3: _steps(
        """CREATE TABLE IF NOT EXISTS span_links (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            span_id TEXT NOT NULL, parent_id TEXT, start_ns {bigint},
            agent TEXT, describes TEXT, task TEXT, output TEXT, waiting_on TEXT,
            PRIMARY KEY (trace_id, span_id))""",
        "CREATE INDEX IF NOT EXISTS span_links_waiting ON span_links(trace_id, waiting_on) WHERE waiting_on IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS span_links_parent ON span_links(trace_id, parent_id)",
    ),
    # Ingest cost that does not grow with the run (issue #20, item 5): the next
    # seq of a run is MAX(seq) of its steps, which without an index scans the
    # whole run, making ingest quadratic in a run's size; and each agent's first
    # span (first_agent_spans), found without reading the whole run.
    4: _steps(
        "CREATE INDEX IF NOT EXISTS steps_trace_seq ON steps(trace_id, seq)",
        "CREATE INDEX IF NOT EXISTS span_links_agent ON span_links(trace_id, agent, start_ns, span_id) WHERE agent IS NOT NULL",
    ),
    # Leases that ran out, counted apart from the handler's failures (jobs.py).
    5: _steps("ALTER TABLE jobs {add_column} lost INTEGER NOT NULL DEFAULT 0"),
    # The OpenTelemetry trace id of a step's span, kept with its run. A run is keyed by
    # `gen_ai.conversation.id` when its spans carry one, so its id is not always an OTel trace id,
    # and one conversation may span several OTel traces; whichever process attributes the run (a
    # `faultlens worker`, another server, this one after a restart) exports the attribution onto
    # the blamed span's own trace. Ingest writes a row only for a span whose OTel trace id is not
    # the run's id (the export falls back to the run's id, `interop.trace_otel_id`).
    6: _steps(
        """CREATE TABLE IF NOT EXISTS otel_spans (
            trace_id TEXT NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
            span_id TEXT NOT NULL, otel_trace_id TEXT NOT NULL,
            PRIMARY KEY (trace_id, span_id))""",
    ),
    # Rows written with older redaction rules (issue #43, finding 6): secrets they did not know stay in
    # clear, and a run whose id holds one is stored under an id today's look-ups never ask for (404).
    # Every row redacted again and re-keyed as today's writer would store it (`reredact`). A later
    # release that teaches the redactor new shapes adds a version with this step again.
    7: (Step(run=reredact),),
    # Runs with no recorded outcome scored by the failure detector (issue #45): `p_failed`, and whether it
    # passed the server's threshold (`suspected`: attributed like a failed run, shown apart until a person
    # confirms or dismisses it).
    8: _steps("ALTER TABLE traces {add_column} p_failed {real}",
              "ALTER TABLE traces {add_column} suspected {flag}"),
}
assert sorted(MIGRATIONS) == list(range(1, STORE_SCHEMA_VERSION + 1)), "one step list per layout version"


def statements(version: int, dialect: Dialect) -> list[str]:
    """Version `version`'s SQL as `dialect` runs it (its steps that rewrite rows, `Step.run`, are not SQL)."""
    return [step.sql.format(**dialect.words) for step in _steps_of(version, dialect) if step.run is None]


def _steps_of(version: int, dialect: Dialect) -> list[Step]:
    return [step for step in MIGRATIONS[version] if step.only in (None, dialect.name)]


def migrate(dialect: Dialect) -> None:
    """Bring the store's tables to `STORE_SCHEMA_VERSION`, in one transaction (all of a migration lands, or none).

    Raises SchemaTooNew for a store written by a newer faultlens.
    """
    with dialect.migrating() as conn:
        run = dialect.execute
        run(conn, "CREATE TABLE IF NOT EXISTS store_schema (version INTEGER PRIMARY KEY, applied_at {real})".format(**dialect.words))
        found = run(conn, "SELECT COALESCE(MAX(version), 0) FROM store_schema").fetchone()[0]
        if found > STORE_SCHEMA_VERSION:
            raise SchemaTooNew(dialect.location, found)
        for version in range(found + 1, STORE_SCHEMA_VERSION + 1):
            for step in _steps_of(version, dialect):
                if step.run is not None:
                    step.run(dialect, conn)
                else:
                    run(conn, step.sql.format(**dialect.words))
            run(conn, "INSERT INTO store_schema (version, applied_at) VALUES (?, ?)", [version, time.time()])
