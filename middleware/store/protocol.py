"""What every faultlens store is: the `Store` protocol, its result and error types, and how a trace becomes rows.

`sql.SQLStore` (run as `sqlite.SQLiteStore` or `postgres.PostgresStore`)
implements it; this module holds the protocol the code above it is typed
against, the summary and error types it returns, how a trace and a step become
rows (redacted before anything is written: ids as `ids.StoredId`, a step's JSON
as `step_json` writes it), and how a `--db` value names one backend or the other.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import FaultlensError, NotFound
from .jobs import JobStore
from ..model.trace import AgentInfo, Attribution, GoldLabel, Lesson, Outcome, Step, Trace
from .ids import StoredId, optional_id, stored_id
from .redact import redact, redact_text
from .step_json import PreparedStep, stored_step

DEFAULT_DB = Path(".faultlens") / "faultlens.db"
# The version of the tables' layout (not of the Trace model: that is model.SCHEMA_VERSION).
# Each store applies its missing migrations in order when it opens.
STORE_SCHEMA_VERSION = 7
_URL_SCHEMES = ("postgresql", "postgres")


def default_db_path() -> Path:
    return Path(os.environ.get("FAULTLENS_DB") or DEFAULT_DB)


def default_db() -> str:
    """`$FAULTLENS_DB` as given (a path or a URL), else `.faultlens/faultlens.db`."""
    return os.environ.get("FAULTLENS_DB") or str(DEFAULT_DB)


def store_url(target: str | os.PathLike[str]) -> str | None:
    """The database URL `target` names, or None when it is a file path.

    A URL that went through `pathlib.Path` (as every `--db` option does) has
    lost one slash of ``postgresql://``; it is put back.
    """
    text = os.fspath(target)
    scheme, sep, rest = text.partition(":")
    if not sep or scheme.lower() not in _URL_SCHEMES:
        return None
    if rest.startswith("//"):
        return text
    if rest.startswith("/"):
        return f"{scheme}:/{rest}"
    raise FaultlensError(f"{text!r} is not a database URL: write postgresql://USER@HOST:PORT/DATABASE")


def describe(target: str | os.PathLike[str]) -> str:
    """`target` for messages: a URL without its password."""
    url = store_url(target)
    if url is None:
        return os.fspath(target)
    scheme, _, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{scheme}://{userinfo}{at}{host}"


class SchemaTooNew(FaultlensError):
    def __init__(self, where: str, found: int):
        super().__init__(
            f"the store at {where} has table layout version {found}, newer than this faultlens knows "
            f"({STORE_SCHEMA_VERSION}); upgrade faultlens to use it"
        )


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
    labelled: bool = False  # a person's label (gold) is stored with the run


@runtime_checkable
class Store(JobStore, Protocol):
    """What the rest of faultlens needs from a store: `SQLiteStore` (the default) and `PostgresStore`.

    The shared semantics (one test suite checks both): a step is idempotent by
    span id; `save_traces` and everything inside `batch()` land together or
    not at all; secrets are redacted before they are written; the tables
    carry a layout version and are migrated forward when the store opens.
    """

    location: str

    def batch(self, trace_ids: Iterable[str] = ()) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...
    def save_trace(self, trace: Trace) -> None: ...
    def save_traces(self, traces: Iterable[Trace]) -> int: ...
    def begin_trace(self, trace: Trace) -> None: ...
    # The header only where no run has its id (nothing stored is overwritten); True if written.
    def begin_trace_if_absent(self, trace: Trace) -> bool: ...
    def add_step(self, trace_id: str, step: Step) -> None: ...
    # A batch of steps of one run: serialised before any lock (`prepare_steps`), written in one statement.
    def prepare_steps(self, steps: Sequence[Step]) -> list[PreparedStep]: ...
    # new_run: the caller wrote the run's header in this transaction, having found no run: it has no steps yet.
    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep], *, new_run: bool = False) -> None: ...
    def set_outcome(self, trace_id: str, outcome: Outcome) -> None: ...
    # A person's label of the decisive step (`faultlens traces label`); None removes it.
    def set_gold(self, trace_id: str, gold: GoldLabel | None) -> None: ...
    def has_trace(self, trace_id: str) -> bool: ...
    def get_outcome(self, trace_id: str) -> Outcome | None: ...
    def get_trace(self, trace_id: str) -> Trace: ...
    def iter_traces(self, ids: Iterable[str] | None = None) -> Iterator[Trace]: ...
    def list_traces(self, *, status: str | None = None, agent: str | None = None, limit: int | None = 100, offset: int = 0, since: float | None = None,
                    labelled: bool | None = None) -> list[TraceSummary]: ...
    def count_traces(self) -> int: ...
    def delete_trace(self, trace_id: str) -> None: ...
    def save_attribution(self, attribution: Attribution) -> None: ...
    def attributions(self, trace_id: str) -> list[Attribution]: ...
    def save_lesson(self, lesson: Lesson) -> None: ...
    def get_lesson(self, lesson_id: str) -> Lesson: ...
    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]: ...
    def schema_version(self) -> int: ...
    # The span tree a run's agents are resolved from (see `middleware.ingest`).
    def save_span_links(self, trace_id: str, rows: Iterable[dict[str, Any]]) -> None: ...
    def span_links(self, trace_id: str, *, span_ids: list[str] | None = None, parent_id: str | None = None,
                   describing: bool = False, with_task: bool = False) -> list[dict[str, Any]]: ...
    def first_agent_spans(self, trace_id: str, agents: list[str]) -> dict[str, str]: ...
    def steps_waiting_on(self, trace_id: str, span_ids: list[str]) -> list[tuple[str, str]]: ...
    def set_step_agents(self, trace_id: str, agents: dict[str, str], waiting: dict[str, str | None]) -> None: ...
    def delete_step(self, trace_id: str, key: str) -> None: ...
    def set_run_agents(self, trace_id: str, agents: list[AgentInfo]) -> None: ...
    def fill_run_query(self, trace_id: str, query: str) -> None: ...
    # Migration 6: span id -> OpenTelemetry trace id of a run's steps (what attributions are exported onto).
    def save_otel_trace_ids(self, trace_id: str, otel_trace_ids: Mapping[str, str]) -> None: ...
    def otel_trace_id(self, trace_id: str, span_id: str) -> str | None: ...


class TraceNotFound(NotFound):
    def __init__(self, trace_id: str):
        super().__init__(trace_id)
        self.trace_id = trace_id

    def __str__(self) -> str:
        return f"no trace with id {self.trace_id!r} in the store (try `faultlens traces list`)"


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def gold_column(gold: GoldLabel | None) -> str | None:
    """A trace's `gold` column: the label redacted and serialised (NULL for none)."""
    return dumps(redact(gold.model_dump(mode="json")) if gold is not None else None)


def trace_row(trace: Trace) -> dict[str, Any]:
    """A trace's header as a `traces` row, secrets redacted."""
    # Every stored string goes through redaction, the id and columns included.
    data = redact(trace.model_dump(mode="json", exclude={"steps"}))
    return {
        "id": stored_id(trace.id),
        "schema_version": data["schema_version"],
        "query": data["task"]["query"],
        "success": None if trace.outcome is None else int(trace.outcome.success),
        "framework": data["source"]["framework"],
        "benchmark": data["source"]["benchmark"],
        "modality": data["source"]["modality"],
        "format": data["source"]["format"],
        "created_at": trace.created_at,
        "updated_at": time.time(),
        "task": dumps(data["task"]),
        "agents": dumps(data["agents"]),
        "outcome": dumps(data["outcome"]),
        "source": dumps(data["source"]),
        "gold": dumps(data["gold"]),
        "metadata": dumps(data["metadata"]),
    }


def prepare_steps(steps: Sequence[Step]) -> list[PreparedStep]:
    """Steps serialised and redacted for storage (`step_json.stored_step`), without touching a database.

    The costly part of writing a step; done before a transaction opens, it
    keeps the write lock short (other requests wait only for the SQL).
    """
    return [stored_step(step) for step in steps]


def prepared(steps: Sequence[Step | PreparedStep]) -> list[PreparedStep]:
    """`steps` as PreparedSteps (those already prepared kept as they are)."""
    return [s if isinstance(s, PreparedStep) else stored_step(s) for s in steps]


def step_row(trace_id: StoredId, step: Step, seq: int, position: float) -> dict[str, Any]:
    """A step as a `steps` row, secrets redacted."""
    p = stored_step(step)
    return {
        "trace_id": trace_id,
        "key": p.key,
        "position": position,
        "seq": seq,
        "agent": p.agent,
        "kind": p.kind,
        "error": p.error,
        "data": p.data,
    }


def stored_link(row: Mapping[str, Any]) -> dict[str, Any]:
    """A `span_links` row (see `spans.SpanLink.row`) as stored, secrets redacted the way `steps` and `traces` keep the same strings.

    Span ids, the agent and `waiting_on` are ids (`StoredId`, so look-ups by them keep
    working); the task and output are text; the agents a span describes are kept as
    `traces.agents` keeps them. Ids read back are already stored ids (`stored_id` leaves
    them as they are), so a row may go through this more than once.
    """
    out = dict(row)
    for column in ("span_id", "parent_id", "agent", "waiting_on"):
        out[column] = optional_id(out.get(column))
    for column in ("task", "output"):
        if out.get(column) is not None:
            out[column] = redact_text(out[column])
    if out.get("describes"):
        out["describes"] = json.dumps(redact(json.loads(out["describes"])), sort_keys=True)
    return out


def trace_from_row(trace_id: str, row: Any, step_data: Iterable[str]) -> Trace:
    """A Trace from its `traces` columns (schema_version, task, agents, outcome, source, gold, metadata, created_at) and its steps' data in order."""
    steps = []
    for index, data in enumerate(step_data):
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


def list_query(*, status: str | None, agent: StoredId | None, since: float | None, labelled: bool | None,
               limit: int | None, offset: int, mark: str) -> tuple[str, list[Any]]:
    """`list_traces`'s SELECT (rows for `summary_from_row`, newest first) and its parameters; `mark` is the
    backend's placeholder (`?`, `%s`)."""
    where: list[str] = []
    params: list[Any] = []
    if status is not None:
        where.append(status_clause(status))
    if agent is not None:
        where.append(f"id IN (SELECT trace_id FROM steps WHERE agent = {mark})")
        params.append(agent)
    if since is not None:
        where.append(f"updated_at >= {mark}")
        params.append(since)
    if labelled is not None:
        where.append("gold IS NOT NULL" if labelled else "gold IS NULL")
    sql = (
        "SELECT id, query, success, agents, framework, benchmark, modality, created_at, updated_at,"
        " (SELECT COUNT(*) FROM steps WHERE steps.trace_id = traces.id), gold IS NOT NULL FROM traces"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY created_at DESC, id"
    )
    if limit is not None:
        sql += f" LIMIT {mark} OFFSET {mark}"
        params += [limit, offset]
    return sql, params


def summary_from_row(r: Any) -> TraceSummary:
    """A TraceSummary from (id, query, success, agents, framework, benchmark, modality, created_at, updated_at, n_steps,
    labelled)."""
    return TraceSummary(
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
        labelled=bool(r[10]),
    )


STATUS_CLAUSES = {"failed": "success = 0", "succeeded": "success = 1", "unknown": "success IS NULL"}


def status_clause(status: str) -> str:
    if status not in STATUS_CLAUSES:
        raise ValueError(f"status must be one of {sorted(STATUS_CLAUSES)}, not {status!r}")
    return STATUS_CLAUSES[status]
