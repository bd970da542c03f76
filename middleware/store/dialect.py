"""What `sql.SQLStore` asks of a database: the few things SQLite and PostgreSQL do differently, and nothing else.

The store writes its SQL once, with ``?`` placeholders; a dialect runs it
(`execute`, `executemany`: PostgreSQL's turns ``?`` into ``%s``), and answers
for connections and transactions (`read`, `write`, `batch`, `migrating`),
locking (`lock`, `for_update`, `skip_locked`), the clock leases are measured by
(`now`), a list parameter (`in_list`), setting one field of a JSON column
(`json_set`) and the words its migrations differ by (`words`).
`sqlite.SQLiteDialect` and `postgres.PostgresDialect` are the two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any


class Dialect(ABC):
    name: str  # "sqlite" or "postgresql" (what `migrations.Step.only` names)
    location: str  # for messages: a path, or a URL without its password
    words: dict[str, str]  # the migrations' fields: real, flag, bigint, add_column
    for_update: str  # appended to a SELECT that locks the rows it reads until the transaction ends
    skip_locked: str  # appended to a job pick: rows another worker holds are passed over, not waited for
    max_params: int  # how many values one `in_list` may bind
    remote: bool  # a statement whose result is read costs a round trip to a server

    # -- connections and transactions ----------------------------------------
    @abstractmethod
    def read(self) -> AbstractContextManager[Any]:
        """A connection to read with (inside `batch`, the batch's: it sees its own writes)."""

    @abstractmethod
    def write(self) -> AbstractContextManager[Any]:
        """One transaction: everything in it lands, or nothing does (inside `batch`, part of the batch's)."""

    @abstractmethod
    def batch(self, keys: Sequence[str]) -> AbstractContextManager[Any]:
        """A transaction that `write` joins on this thread; writers naming one of `keys` elsewhere wait for it."""

    @abstractmethod
    def migrating(self) -> AbstractContextManager[Any]:
        """The transaction migrations run in, with no other process migrating the same store."""

    @abstractmethod
    def close(self) -> None: ...

    # -- statements ----------------------------------------------------------
    @abstractmethod
    def execute(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run `sql` (``?`` placeholders); the cursor (fetchone, fetchall)."""

    @abstractmethod
    def executemany(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    @abstractmethod
    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition "`column` is one of `values`" and its parameters (at most `max_params` values)."""

    @abstractmethod
    def lock(self, conn: Any, space: int, key: str) -> None:
        """Hold a lock on (`space`, `key`) until `conn`'s transaction ends (where writers do not already take turns)."""

    @abstractmethod
    def now(self, conn: Any) -> float:
        """Seconds since the epoch, by the clock every process sharing the store agrees on."""

    @abstractmethod
    def json_set(self, column: str, field: str) -> str | None:
        """An SQL expression: JSON text `column` with its top-level `field` set to a ``?`` string; None where
        the database would rewrite the rest (the store then sets it in Python, keeping the text as it writes it)."""

    @abstractmethod
    def first_per_group(self, columns: Sequence[str], where: str, group: str, order: str) -> str:
        """A SELECT of `columns` from span_links rows matching `where`: for each value of `group`, its row with the least `order`."""

    def chunks(self, values: Sequence[Any], *, per_value: int = 1) -> Iterator[Sequence[Any]]:
        """`values` in pieces one statement can bind (each value taking `per_value` parameters)."""
        size = self.max_params // per_value
        for start in range(0, len(values), size):
            yield values[start : start + size]


# Lock spaces (`Dialect.lock`): the runs a batch reads and writes, and the queue's jobs.
TRACE_LOCKS = 1
JOB_LOCKS = 2


@lru_cache(maxsize=64)
def upsert_sql(table: str, columns: tuple[str, ...], pk: tuple[str, ...]) -> str:
    """Insert a row, or update the one with its primary key `pk` (the same SQL on both backends)."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in pk)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
        f" ON CONFLICT ({', '.join(pk)}) DO UPDATE SET {updates}"
    )


def upsert(dialect: Dialect, conn: Any, table: str, row: dict[str, Any], pk: tuple[str, ...]) -> None:
    # Plain SQL rather than sqlite-utils' Table.upsert: that commits inside its own
    # methods, which would break the store's all-or-nothing transactions.
    dialect.execute(conn, upsert_sql(table, tuple(row), pk), list(row.values()))
