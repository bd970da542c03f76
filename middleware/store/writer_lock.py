"""One writer at a time across processes sharing a SQLite file, woken as soon as the writer before it is done.

SQLite lets one connection write at a time. A process that finds the write
lock taken waits in SQLite's busy handler, which sleeps (1, 2, 5, 10 ms ...)
and looks again, so two processes that write small transactions all the time
(two `faultlens serve` processes, or a traced agent beside the server) spend
most of their waiting asleep after the lock is already free. A blocking
`flock` on a file beside the database wakes the next writer when the lock is
released: two servers on one file went from 8,608-8,665 to 11,361-11,725
stored spans/s (`scripts/load_server.py --requests 2000 --spans 10 --clients 4
--backend sqlite --servers 2`).

The lock file is `<database>-writer.lock`, next to SQLite's own `-wal` and
`-shm` files. It is never the database file itself: closing any descriptor of
a file drops every POSIX lock the process holds on it, SQLite's included.
Where `fcntl` is missing (Windows) there is no such lock and SQLite's busy
handler does the waiting alone. Within a process, the store's own thread lock
already lets one thread in at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class WriterLock:
    """`with lock.held():` around each write transaction of one SQLite database file."""

    def __init__(self, database_path: str):
        self.path = database_path + "-writer.lock"
        self._file: IO[bytes] | None = None
        self._pid = 0

    def _handle(self) -> IO[bytes]:
        # A forked child shares its parent's open file, and with it the lock: it opens its own.
        if self._file is None or self._pid != os.getpid():
            self._file = open(self.path, "ab")  # noqa: SIM115 - held open for the store's lifetime
            self._pid = os.getpid()
        return self._file

    @contextmanager
    def held(self) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        handle = self._handle()
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None
