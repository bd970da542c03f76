"""A migration step: every stored row redacted again with today's rules, ids re-keyed (`stored_id` as it maps them today).

Rows written by an older faultlens were redacted with the rules it knew: a secret
shape learnt since (`github_pat_...`, `hf_...`) stays in clear, and a run whose id
holds one is stored under the raw id, while today's look-ups ask for
`redact_id(id)` and answer 404. `reredact` rewrites each row the way today's
writer would have written it, in the migration's transaction, and leaves a row
that is already so untouched (running it again changes nothing).

Each column is mapped as its writer maps it (`protocol.trace_row`, `step_json`,
`protocol.stored_link`, `sql.SQLStore.save_attribution` / `save_lesson`,
`sql_jobs`): ids through `redact_id`, text through `redact_text`, JSON through
`redact` (which hashes the ids inside it the same way). A row whose key changes
is moved: a run's new row first, then its children (steps, span links, OTel
span ids, attributions, jobs), then the old run's row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .dialect import C, Dialect
from .redact import redact, redact_id, redact_text

_PAGE = 500


def _id(value: Any) -> Any:
    return redact_id(value) if isinstance(value, str) else value


def _text(value: Any) -> Any:
    return redact_text(value) if isinstance(value, str) else value


def _json_with(encode: Callable[[Any], str]) -> Callable[[Any], Any]:
    def column(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            parsed = json.loads(value)
        except ValueError:
            return redact_text(value)  # not JSON after all: redact it as text
        cleaned = redact(parsed)
        # Unchanged content keeps its bytes (an old writer may have spaced its JSON otherwise).
        return value if cleaned == parsed else encode(cleaned)

    return column


# As `protocol.dumps` and `step_json` write JSON columns; `stored_link` writes `describes` with ASCII escapes.
_json = _json_with(lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True))
_ascii_json = _json_with(lambda v: json.dumps(v, sort_keys=True))


@dataclass(frozen=True)
class _Table:
    name: str
    key: tuple[str, ...]
    columns: dict[str, Callable[[Any], Any]]  # column -> how today's writer stores a value of it (others are kept)


_TRACES = _Table("traces", ("id",), {
    "id": _id, "schema_version": _text, "query": _text, "framework": _text, "benchmark": _text, "modality": _text, "format": _text,
    "task": _json, "agents": _json, "outcome": _json, "source": _json, "gold": _json, "metadata": _json,
})
# Tables that hold a run's id; a run's new row exists before they move to it, its old row goes after.
_CHILDREN = (
    _Table("steps", ("trace_id", "key"), {"trace_id": _id, "key": _id, "agent": _id, "kind": _text, "data": _json}),
    _Table("span_links", ("trace_id", "span_id"), {
        "trace_id": _id, "span_id": _id, "parent_id": _id, "agent": _id, "waiting_on": _id,
        "task": _text, "output": _text, "describes": _ascii_json,
    }),
    _Table("otel_spans", ("trace_id", "span_id"), {"trace_id": _id, "span_id": _id}),
    _Table("attributions", ("id",), {
        "id": _id, "trace_id": _id, "method": _text, "model": _text, "agent": _id, "mode": _text, "data": _json,
    }),
    # (a job's `worker` is its holder's name, matched to fence its claim: kept as it is)
    _Table("jobs", ("trace_id",), {"trace_id": _id, "error": _text}),
)
_LESSONS = _Table("lessons", ("id",), {"id": _id, "agent": _id, "mode": _text, "data": _json})


def reredact(dialect: Dialect[C], conn: C) -> None:
    """Redact every row again with today's rules and move rows whose key changes (see the module's docstring)."""
    moved_runs = _rewrite(dialect, conn, _TRACES, keep_old=True)
    for table in (*_CHILDREN, _LESSONS):
        _rewrite(dialect, conn, table, keep_old=False)
    for old_id in moved_runs:
        dialect.execute(conn, "DELETE FROM traces WHERE id = ?", [old_id])


def _rewrite(dialect: Dialect[C], conn: C, table: _Table, *, keep_old: bool) -> list[Any]:
    """Rewrite `table`'s rows that today's rules store otherwise; the old keys of rows that moved when `keep_old`
    (their old row stays, for the caller to delete once nothing refers to it)."""
    names = [str(d[0]) for d in dialect.execute(conn, f"SELECT * FROM {table.name} WHERE 1 = 0").description or ()]
    moved: list[Any] = []
    for row in _rows(dialect, conn, table, names):
        new = {name: table.columns.get(name, _same)(value) for name, value in row.items()}
        if new == row:
            continue
        old_key, new_key = [row[k] for k in table.key], [new[k] for k in table.key]
        if new_key == old_key:
            changed = [name for name in names if new[name] != row[name]]
            _update(dialect, conn, table, changed, new, old_key)
            continue
        if keep_old:
            moved.append(old_key[0])
        else:
            dialect.execute(conn, f"DELETE FROM {table.name} WHERE {_where(table.key)}", old_key)
        dialect.execute(conn, _insert_or_fill(table, names), [new[name] for name in names])
    return moved


def _insert_or_fill(table: _Table, names: list[str]) -> str:
    """Insert a moved row; where a row already has its new key (the same run written since under today's id,
    by a release that knew the secret's shape), that row is kept and only its empty columns take the moved
    row's values (a label or an outcome the old row alone had)."""
    fills = ", ".join(f"{name} = COALESCE({table.name}.{name}, excluded.{name})" for name in names if name not in table.key)
    return (f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
            f" ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {fills}")


def _same(value: Any) -> Any:
    return value


def _where(key: tuple[str, ...]) -> str:
    return " AND ".join(f"{k} = ?" for k in key)


def _update(dialect: Dialect[C], conn: C, table: _Table, changed: list[str], new: dict[str, Any], key: list[Any]) -> None:
    assignments = ", ".join(f"{name} = ?" for name in changed)
    dialect.execute(conn, f"UPDATE {table.name} SET {assignments} WHERE {_where(table.key)}", [*(new[n] for n in changed), *key])


def _rows(dialect: Dialect[C], conn: C, table: _Table, names: list[str]) -> Iterator[dict[str, Any]]:
    """Every row of `table` as a dict, a page at a time in key order (rows written meanwhile may come too: rewriting
    a row twice changes nothing the second time)."""
    order = ", ".join(table.key)
    after: list[Any] | None = None
    while True:
        where = "" if after is None else f" WHERE ({order}) > ({', '.join('?' for _ in table.key)})"
        page = dialect.execute(conn, f"SELECT {', '.join(names)} FROM {table.name}{where} ORDER BY {order} LIMIT {_PAGE}",
                               after or []).fetchall()
        for values in page:
            yield dict(zip(names, values))
        if len(page) < _PAGE:
            return
        after = [page[-1][names.index(k)] for k in table.key]
