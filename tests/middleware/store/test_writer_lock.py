"""The cross-process writer lock beside a SQLite file (`middleware.store.writer_lock`)."""

import subprocess
import sys
import time

from faultlens.middleware import open_store
from faultlens.middleware.store.writer_lock import WriterLock

_HOLDER = """
import sys, time
from faultlens.middleware.store.writer_lock import WriterLock
log = sys.argv[2]
with WriterLock(sys.argv[1]).held():
    open(log, "a").write("child in\\n")
    time.sleep(0.5)
    open(log, "a").write("child out\\n")
"""


def test_a_second_process_waits_until_the_first_writer_is_done(tmp_path):
    db, log = str(tmp_path / "f.db"), tmp_path / "order.log"
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, db, str(log)])
    deadline = time.monotonic() + 30
    while not (log.exists() and "child in" in log.read_text()):
        assert time.monotonic() < deadline and child.poll() is None, "the child never took the lock"
        time.sleep(0.01)
    with WriterLock(db).held():
        log.write_text(log.read_text() + "parent in\n")
    assert child.wait(30) == 0
    assert log.read_text().splitlines() == ["child in", "child out", "parent in"]


def test_the_store_keeps_its_lock_file_beside_the_database(tmp_path):
    store = open_store(tmp_path / "f.db")  # opening it writes its schema, under the lock
    assert (tmp_path / "f.db-writer.lock").exists()
    store.close()
