"""A throwaway PostgreSQL server for tests and measurements: initdb into a temporary folder, pg_ctl start, torn down after.

    with ThrowawayPostgres() as pg:
        url = pg.url()                 # postgresql://postgres@127.0.0.1:PORT/postgres
        url = pg.fresh_schema_url()    # the same database, tables in a new, empty schema

The server binaries come from PATH or Debian's /usr/lib/postgresql/*/bin
(`apt-get install postgresql`). initdb and pg_ctl refuse to run as root, so
as root they run as the `postgres` user (which the Debian package creates).
The server listens on 127.0.0.1 only, on a free port, with trust
authentication; nothing outlives `stop()`.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl (newest version first), or None."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayPostgres:
    """fast=True turns fsync off (tests); fast=False keeps PostgreSQL's durable defaults (measurements)."""

    def __init__(self, *, fast: bool = True, max_connections: int = 200):
        self.bin = find_bin_dir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
        self.fast = fast
        self.max_connections = max_connections
        self.port = _free_port()
        self.root: Path | None = None
        self._as_user: list[str] = []

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, text=True, cwd="/")

    def start(self) -> ThrowawayPostgres:
        self.root = Path(tempfile.mkdtemp(prefix="faultlens-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--locale=C")
        options = [
            "-c listen_addresses=127.0.0.1", f"-p {self.port}", f"-c unix_socket_directories={self.root}",
            f"-c max_connections={self.max_connections}",
        ]
        if self.fast:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.root / "log"), "-w", "-t", "60", "-o", " ".join(options), "start")
        except subprocess.CalledProcessError as exc:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            self.stop()
            raise RuntimeError(f"pg_ctl start failed: {exc.stderr}\n{log}") from None
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def fresh_schema_url(self) -> str:
        """The server's database with a new empty schema first in the search_path (fast isolation per test)."""
        schema = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return self.url() + f"?options=-csearch_path%3D{schema}"

    def fresh_database_url(self) -> str:
        name = "db_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.root is None:
            return
        data = self.root / "data"
        if (data / "postmaster.pid").exists():
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
