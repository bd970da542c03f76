"""The same store on PostgreSQL (psycopg 3 and its connection pool), for many servers and workers on one database.

    store = open_store("postgresql://faultlens@db.internal:5432/faultlens")

The one `sql.SQLStore`, same tables and semantics as `sqlite.SQLiteStore` (one
test suite checks both), through `PostgresDialect`. What PostgreSQL adds is
safe concurrency between processes:

- `batch(trace_ids)` takes a transaction-scoped advisory lock per trace, so
  two servers ingesting spans of the same run take turns (the header a root
  span writes is never overwritten by another server's placeholder);
- `add_steps` locks its trace's row, so step sequence numbers stay distinct;
- `claim_job` picks with ``FOR UPDATE SKIP LOCKED``; leases use the database's
  clock, so the machines' clocks need not agree;
- migrations run under an advisory lock, so servers starting together do not race.

JSON is kept as text, like in SQLite, so a value round-trips byte for byte
(``jsonb`` would reorder keys and refuses ``\\u0000``). PostgreSQL text cannot
hold NUL characters; in the plain columns (ids, agent names, the query shown
in lists) one becomes U+FFFD, while the JSON columns keep the exact value
(JSON text writes a NUL as ``\\u0000``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import FaultlensError
from .dialect import TRACE_LOCKS, Cursor, Dialect
from .protocol import describe
from .sql import SQLStore

# pg_advisory_xact_lock key for migrations; traces and jobs lock in their own spaces (dialect.TRACE_LOCKS, JOB_LOCKS).
_MIGRATION_LOCK = 0x6661756C746C656E  # "faultlen"
_NOW = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"


@lru_cache(maxsize=512)
def _placeholders(sql: str) -> str:
    """The store's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _clean(value: Any) -> Any:
    """A parameter PostgreSQL text can hold: NUL becomes U+FFFD (JSON text never holds a raw NUL)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


class PostgresDialect(Dialect[psycopg.Connection]):
    """PostgreSQL: a pool of autocommit connections; a batch holds one connection in pipeline mode."""

    name = "postgresql"
    words = {"real": "DOUBLE PRECISION", "flag": "SMALLINT", "bigint": "BIGINT", "add_column": "ADD COLUMN IF NOT EXISTS"}
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    max_params = 1 << 30  # `in_list` binds one array, whatever its length
    remote = True

    def __init__(self, url: str, *, pool_size: int, connect_timeout: float):
        self.url = url
        self.location = describe(url)
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._local = threading.local()
        self.pool: ConnectionPool | None = None

    def open_pool(self) -> ConnectionPool:
        self.pool = ConnectionPool(
            self.url, min_size=1, max_size=self._pool_size, kwargs={"autocommit": True}, open=True,
            name=f"faultlens {self.location}", timeout=60,
        )
        return self.pool

    def _connection(self) -> Any:
        assert self.pool is not None, "the pool opens once the tables are migrated"
        return self.pool.connection()

    @contextmanager
    def read(self) -> Iterator[psycopg.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:  # inside batch(): read our own uncommitted writes
            yield conn
            return
        with self._connection() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self._connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def batch(self, keys: Sequence[str]) -> Iterator[psycopg.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        # Pipeline mode: statements whose results are not read go out without waiting for
        # the server, so a request's writes take a few round trips, not a few per span.
        with self._connection() as conn, conn.transaction(), conn.pipeline():
            for key in keys:
                self.lock(conn, TRACE_LOCKS, key)
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def migrating(self) -> Iterator[psycopg.Connection]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=int(self._connect_timeout)) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            yield conn

    def close(self, timeout: float = 5.0) -> None:
        if self.pool is not None and not self.pool.closed:
            self.pool.close(timeout=timeout)

    def execute(self, conn: psycopg.Connection, sql: str, params: Sequence[object] = ()) -> Cursor:
        return conn.execute(_placeholders(sql), [_clean(v) for v in params])

    def executemany(self, conn: psycopg.Connection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(_placeholders(sql), [[_clean(v) for v in row] for row in rows])

    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        return f"{column} = ANY(?)", [list(values)]

    def lock(self, conn: psycopg.Connection, space: int, key: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [space, _clean(key)])

    def now(self, conn: psycopg.Connection) -> float:
        row = conn.execute(_NOW).fetchone()
        if row is None:
            raise FaultlensError("the database returned no row for its clock")
        return row[0]

    def json_set(self, column: str, field: str) -> str | None:
        return None  # JSON is kept as text (see the module docstring); jsonb would reorder its keys

    def first_per_group(self, columns: Sequence[str], where: str, group: str, order: str) -> str:
        listed = ", ".join(columns)
        return f"SELECT {listed} FROM (SELECT DISTINCT ON ({group}) {listed} FROM span_links WHERE {where} ORDER BY {group}, {order}) AS firsts"


class PostgresStore(SQLStore[psycopg.Connection]):
    """A faultlens store in a PostgreSQL database (its tables in the connection's search_path).

    url: a libpq URL, ``postgresql://USER:PASSWORD@HOST:PORT/DATABASE?...``.
    pool_size: most connections this process opens (threads beyond it wait).
    """

    _d: PostgresDialect

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout: float = 10.0):
        self.url = url
        dialect = PostgresDialect(url, pool_size=pool_size, connect_timeout=connect_timeout)
        try:
            super().__init__(dialect)
        except psycopg.OperationalError as exc:
            raise FaultlensError(f"cannot open the PostgreSQL store at {dialect.location}: {str(exc).strip()}") from None
        self._pool = dialect.open_pool()

    def __del__(self) -> None:
        # Close the pool from the thread that drops the store: left to the
        # garbage collector, the pool may be finalised on one of its own
        # threads, which cannot join itself.
        dialect = getattr(self, "_d", None)
        if dialect is not None:
            try:
                dialect.close(timeout=1.0)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
