"""The embedded store: `sql.SQLStore` in one SQLite file (via sqlite-utils), and `open_store`, which picks the backend.

`open_store(target)` opens a store from a path (SQLite, the default) or a
``postgresql://`` URL (`postgres.PostgresStore`, for several servers and
workers sharing one database). Both are the one `sql.SQLStore` with the same
semantics; the code above this module is typed against `Store`.

One file, WAL mode, safe for several threads at once: each thread gets its own
connection, and writes in this process are serialised by a lock so that SQLite
never has to retry; other processes writing the same file take turns on a
lock file beside it (`writer_lock`), which wakes the next writer at once.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import sqlite_utils

from ..errors import FaultlensError, extra_needed
from .dialect import Dialect
from .protocol import (
    DEFAULT_DB,
    STORE_SCHEMA_VERSION,
    PreparedStep,
    SchemaTooNew,
    Store,
    TraceNotFound,
    TraceSummary,
    default_db,
    default_db_path,
    describe,
    store_url,
)
from .sql import SQLStore
from .writer_lock import WriterLock

__all__ = [
    "DEFAULT_DB", "STORE_SCHEMA_VERSION", "PreparedStep", "SQLiteDialect", "SQLiteStore", "SchemaTooNew", "Store", "TraceNotFound",
    "TraceSummary", "default_db", "default_db_path", "describe", "open_store", "store_url",
]


class SQLiteDialect(Dialect[sqlite_utils.Database]):
    """SQLite: a connection per thread, one writer at a time (a lock in this process, `WriterLock` between processes)."""

    name = "sqlite"
    words = {"real": "REAL", "flag": "INTEGER", "bigint": "INTEGER", "add_column": "ADD COLUMN"}
    for_update = ""  # a write transaction already holds the whole file
    skip_locked = ""
    max_params = 500  # SQLite's limit on host parameters is 999 in old builds; stay well under it
    remote = False

    def __init__(self, path: str):
        self.path = self.location = path
        self._memory = path == ":memory:"
        if not self._memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if Path(path).is_dir():
                raise FaultlensError(f"cannot open the SQLite store at {path}: it is a directory; give a file, e.g. {Path(path) / 'faultlens.db'}")
        self._local = threading.local()
        self._lock = threading.RLock()
        self._writer = None if self._memory else WriterLock(path)
        self._shared: sqlite_utils.Database | None = None

    def db(self) -> sqlite_utils.Database:
        """This thread's connection (one shared by all threads for ``:memory:``)."""
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
    def read(self) -> Iterator[sqlite_utils.Database]:
        # `:memory:` has one connection for every thread: a read run while another thread's write transaction is open
        # on it sees that transaction's rows half-written (a job moving between states counted in neither).
        with self._lock if self._memory else nullcontext():
            yield self.db()

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        with self._lock:
            db = self.db()
            if getattr(self._local, "in_transaction", False):
                yield db
                return
            self._local.in_transaction = True
            try:
                # IMMEDIATE takes the write lock at once. A plain (deferred) BEGIN whose transaction reads before it
                # writes cannot wait for another process's writer: SQLite answers "database is locked" at once,
                # busy timeout or not (two `faultlens serve` processes on one file failed 586 of 2,000 exports so).
                with self._writer.held() if self._writer is not None else nullcontext():
                    db.conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield db
                    except BaseException:
                        db.conn.rollback()
                        raise
                    db.conn.commit()
            finally:
                self._local.in_transaction = False

    def batch(self, keys: Sequence[str]) -> AbstractContextManager[sqlite_utils.Database]:
        # The one writer lock already keeps other writers out: the keys are not needed.
        return self.write()

    def migrating(self) -> AbstractContextManager[sqlite_utils.Database]:
        return self.write()

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None
        if self._writer is not None:
            with self._lock:  # not while a thread of this process holds it in `write`
                self._writer.close()

    def execute(self, conn: sqlite_utils.Database, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        return conn.conn.execute(sql, params)

    def executemany(self, conn: sqlite_utils.Database, sql: str, rows: Sequence[Sequence[object]]) -> None:
        conn.conn.executemany(sql, rows)

    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)

    def lock(self, conn: sqlite_utils.Database, space: int, key: str) -> None:
        pass  # writers take turns on the whole file

    def now(self, conn: sqlite_utils.Database) -> float:
        return time.time()

    def json_set(self, column: str, field: str) -> str | None:
        return f"json_set({column}, '$.{field}', ?)"

    def first_per_group(self, columns: Sequence[str], where: str, group: str, order: str) -> str:
        # SQLite takes the bare columns from the row MIN() picked: one pass over the index, no sort.
        picked = ", ".join(f"MIN({c})" if c == order else c for c in columns)
        return f"SELECT {picked} FROM span_links WHERE {where} GROUP BY {group}"


class SQLiteStore(SQLStore[sqlite_utils.Database]):
    """The store in the SQLite file at `path` (default `$FAULTLENS_DB` or `.faultlens/faultlens.db`; ``:memory:`` for none)."""

    _d: SQLiteDialect

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = str(default_db_path() if path is None else path)
        dialect = SQLiteDialect(self.path)
        try:
            super().__init__(dialect)
        except sqlite3.DatabaseError as exc:  # not a SQLite file, unreadable, a broken one
            dialect.close()
            raise FaultlensError(f"cannot open the SQLite store at {self.path}: {exc} (is it a faultlens store?)") from None

    # This thread's connection and a write transaction, for tests and tools that look at the tables.
    def _db(self) -> sqlite_utils.Database:
        return self._d.db()

    def _write(self) -> AbstractContextManager[sqlite_utils.Database]:
        return self._d.write()


def open_store(target: str | os.PathLike[str] | None = None) -> Store:
    """Open (creating if needed) the store at `target`, `$FAULTLENS_DB`, or `.faultlens/faultlens.db`.

    `target` is a SQLite file path (or ``:memory:``), or a ``postgresql://``
    URL for a `PostgresStore` (its tables are created in that database).
    """
    target = default_db() if target is None else target
    url = store_url(target)
    if url is None:
        return SQLiteStore(target)
    with extra_needed("a postgresql:// store"):  # psycopg is imported only for one
        from .postgres import PostgresStore
    return PostgresStore(url)
