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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any, Generic, Protocol, TypeVar

# A dialect's connection (`sqlite_utils.Database`, `psycopg.Connection`): the store only hands it back to the dialect.
C = TypeVar("C")
T = TypeVar("T")


class Cursor(Protocol):
    """What `Dialect.execute` returns (a DB-API cursor: sqlite3's, psycopg's).

    A row's columns are whatever the database holds: the row readers (`rows`, `jobs.Job.from_row`) give them types.
    """

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Sequence[Sequence[object]] | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Dialect(ABC, Generic[C]):
    name: str  # "sqlite" or "postgresql" (what `migrations.Step.only` names)
    location: str  # for messages: a path, or a URL without its password
    words: dict[str, str]  # the migrations' fields: real, flag, bigint, add_column
    for_update: str  # appended to a SELECT that locks the rows it reads until the transaction ends
    skip_locked: str  # appended to a job pick: rows another worker holds are passed over, not waited for
    max_params: int  # how many values one `in_list` may bind
    remote: bool  # a statement whose result is read costs a round trip to a server

    # -- connections and transactions ----------------------------------------
    @abstractmethod
    def read(self) -> AbstractContextManager[C]:
        """A connection to read with (inside `batch`, the batch's: it sees its own writes)."""

    @abstractmethod
    def write(self) -> AbstractContextManager[C]:
        """One transaction: everything in it lands, or nothing does (inside `batch`, part of the batch's)."""

    @abstractmethod
    def batch(self, keys: Sequence[str]) -> AbstractContextManager[C]:
        """A transaction that `write` joins on this thread; writers naming one of `keys` elsewhere wait for it."""

    @abstractmethod
    def migrating(self) -> AbstractContextManager[C]:
        """The transaction migrations run in, with no other process migrating the same store."""

    @abstractmethod
    def close(self) -> None: ...

    # -- statements ----------------------------------------------------------
    @abstractmethod
    def execute(self, conn: C, sql: str, params: Sequence[object] = ()) -> Cursor:
        """Run `sql` (``?`` placeholders); the cursor (fetchone, fetchall)."""

    @abstractmethod
    def executemany(self, conn: C, sql: str, rows: Sequence[Sequence[object]]) -> None: ...

    @abstractmethod
    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """A condition "`column` is one of `values`" and its parameters (at most `max_params` values)."""

    @abstractmethod
    def lock(self, conn: C, space: int, key: str) -> None:
        """Hold a lock on (`space`, `key`) until `conn`'s transaction ends (where writers do not already take turns)."""

    @abstractmethod
    def now(self, conn: C) -> float:
        """Seconds since the epoch, by the clock every process sharing the store agrees on."""

    @abstractmethod
    def json_set(self, column: str, field: str) -> str | None:
        """An SQL expression: JSON text `column` with its top-level `field` set to a ``?`` string; None where
        the database would rewrite the rest (the store then sets it in Python, keeping the text as it writes it)."""

    @abstractmethod
    def first_per_group(self, columns: Sequence[str], where: str, group: str, order: str) -> str:
        """A SELECT of `columns` from span_links rows matching `where`: for each value of `group`, its row with the least `order`."""

    def chunks(self, values: Sequence[T], *, per_value: int = 1) -> Iterator[Sequence[T]]:
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


def upsert(dialect: Dialect[C], conn: C, table: str, row: Mapping[str, object], pk: tuple[str, ...]) -> None:
    # Plain SQL rather than sqlite-utils' Table.upsert: that commits inside its own
    # methods, which would break the store's all-or-nothing transactions.
    dialect.execute(conn, upsert_sql(table, tuple(row), pk), list(row.values()))
