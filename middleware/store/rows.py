"""How a trace becomes rows of the SQL store and back: the columns of a run and a step, the runs-list query.

Everything is redacted before it is written: ids as `ids.StoredId`, text by
`redact`, a step's JSON as `step_json` writes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TypedDict

from ..model.trace import GoldLabel, Step, Trace
from .ids import StoredId, optional_id, stored_id
from .protocol import LinkRow, TraceSummary
from .redact import redact, redact_text
from .step_json import PreparedStep, stored_step


# The columns as read back, in the order the store's SELECTs name them (the database gives them no types).
TraceColumns = tuple[str, str, str | None, str | None, str | None, str | None, str | None, float]  # `trace_from_row`
SummaryColumns = tuple[str, str, int | bool | None, str | None, str | None, str | None, str | None, float, float, int,
                       int | bool, float | None, int | bool | None]  # `summary_from_row`
LinkColumns = tuple[str, str | None, int | None, str | None, str | None, str | None, str | None, str | None]  # `link_from_row`


def dumps(value: object) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def gold_column(gold: GoldLabel | None) -> str | None:
    """A trace's `gold` column: the label redacted and serialised (NULL for none)."""
    return dumps(redact(gold.model_dump(mode="json")) if gold is not None else None)


class TraceRow(TypedDict):
    """A `traces` row as the store writes it (JSON columns as text)."""

    id: StoredId
    schema_version: str
    query: str
    success: int | None
    framework: str | None
    benchmark: str | None
    modality: str | None
    format: str | None
    created_at: float
    updated_at: float
    task: str | None
    agents: str | None
    outcome: str | None
    source: str | None
    gold: str | None
    metadata: str | None


def trace_row(trace: Trace) -> TraceRow:
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


def step_row(trace_id: StoredId, step: Step, seq: int, position: float) -> dict[str, object]:
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


def stored_link(row: LinkRow) -> LinkRow:
    """A `span_links` row (see `spans.SpanLink.row`) as stored, secrets redacted the way `steps` and `traces` keep the same strings.

    Span ids, the agent and `waiting_on` are ids (`StoredId`, so look-ups by them keep
    working); the task and output are text; the agents a span describes are kept as
    `traces.agents` keeps them. Ids read back are already stored ids (`stored_id` leaves
    them as they are), so a row may go through this more than once.
    """
    out = row.copy()
    out["span_id"] = stored_id(row["span_id"])
    out["parent_id"] = optional_id(row.get("parent_id"))
    out["agent"] = optional_id(row.get("agent"))
    out["waiting_on"] = optional_id(row.get("waiting_on"))
    task, output, describes = row.get("task"), row.get("output"), row.get("describes")
    if task is not None:
        out["task"] = redact_text(task)
    if output is not None:
        out["output"] = redact_text(output)
    if describes:
        out["describes"] = json.dumps(redact(json.loads(describes)), sort_keys=True)
    return out


def link_from_row(row: LinkColumns) -> LinkRow:
    """A `span_links` row read back (its columns in `LinkRow`'s order)."""
    span_id, parent_id, start_ns, agent, describes, task, output, waiting_on = row
    return LinkRow(span_id=span_id, parent_id=parent_id, start_ns=start_ns, agent=agent, describes=describes, task=task,
                   output=output, waiting_on=waiting_on)


def trace_from_row(trace_id: str, row: TraceColumns, step_data: Iterable[str]) -> Trace:
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
               limit: int | None, offset: int, mark: str) -> tuple[str, list[object]]:
    """`list_traces`'s SELECT (rows for `summary_from_row`, newest first) and its parameters; `mark` is the
    backend's placeholder (`?`, `%s`)."""
    where: list[str] = []
    params: list[object] = []
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
        " (SELECT COUNT(*) FROM steps WHERE steps.trace_id = traces.id), gold IS NOT NULL, p_failed, suspected FROM traces"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY created_at DESC, id"
    )
    if limit is not None:
        sql += f" LIMIT {mark} OFFSET {mark}"
        params += [limit, offset]
    return sql, params


def summary_from_row(r: SummaryColumns) -> TraceSummary:
    """A TraceSummary from (id, query, success, agents, framework, benchmark, modality, created_at, updated_at, n_steps,
    labelled, p_failed, suspected)."""
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
        p_failed=r[11],
        suspected=bool(r[12]),
    )


STATUS_CLAUSES = {"failed": "success = 0", "succeeded": "success = 1", "unknown": "success IS NULL",
                  # no outcome yet, and the failure detector's p_failed passed the server's threshold
                  "suspected": "success IS NULL AND suspected = 1"}


def status_clause(status: str) -> str:
    if status not in STATUS_CLAUSES:
        raise ValueError(f"status must be one of {sorted(STATUS_CLAUSES)}, not {status!r}")
    return STATUS_CLAUSES[status]
