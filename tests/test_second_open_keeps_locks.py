"""Opening a queue a second time in one process keeps SQLite's locks (issue 34).

POSIX advisory locks belong to a process and a file: closing any descriptor of the database,
its -wal or its -shm releases every lock the process holds on it, SQLite's own included. The
queue used to check a file by opening and closing it from Python, so a second open (every
KeepAlive, every reconnect) dropped the first connection's locks: committed completions were
lost, and concurrent openers saw disk I/O errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labqueue import JobQueue

pytestmark = [pytest.mark.sqlite_only, pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks")]

# Another process asks whether anybody holds a lock on some bytes of a file: an exclusive
# try fails when someone holds them shared. Two ranges matter (SQLite's unix VFS): the
# -shm's DMS byte (offset 128), which every connection with the wal-index mapped holds, and
# the database file's SHARED range (510 bytes from 2**30 + 2), which every connection in
# WAL mode holds while it is open; a connection that closes and can lock that range
# exclusively takes itself for the last one, checkpoints and deletes the write-ahead log.
LOCK_HELD = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    start, length = int(sys.argv[2]), int(sys.argv[3])
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
    except OSError:
        print("held")
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
        print("free")
    """
)
SHARED_FIRST, SHARED_SIZE = 2**30 + 2, 510

# Another process opens, reads and closes plain connections on the file, over and over.
READER = textwrap.dedent(
    """
    import sqlite3, sys, time
    stop = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < stop:
        db = sqlite3.connect(sys.argv[1], timeout=30)
        db.execute("SELECT COUNT(*) FROM jobs").fetchone()
        db.close()
    """
)


def lock_on(file: str | Path, start: int, length: int) -> str:
    command = [sys.executable, "-c", LOCK_HELD, str(file), str(start), str(length)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def dms_lock(path: Path) -> str:
    return lock_on(f"{path}-shm", 128, 1)


def shared_lock(path: Path) -> str:
    return lock_on(path, SHARED_FIRST, SHARED_SIZE)


def test_a_second_open_keeps_the_first_connections_lock_on_the_wal_index(tmp_path):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("t", {})
        assert dms_lock(path) == "held"
        second = JobQueue(path, create=False)
        second.close()
        assert dms_lock(path) == "held", "the second open dropped the first connection's locks"
        q.enqueue("t", {})
        assert q.stats()["queued"] == 2


def test_a_second_open_keeps_the_first_connections_shared_lock_on_the_database_file(tmp_path):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("t", {})
        assert shared_lock(path) == "held"
        JobQueue(path, create=False).close()
        assert shared_lock(path) == "held", "the second open dropped the first connection's lock on the file"


def test_the_retention_lab_s_copy_of_a_held_queue_keeps_the_holder_s_locks(tmp_path):
    """The lab copied a queue's file with shutil.copyfile: a descriptor of the file, closed."""
    from labqueue.lab import retention

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.db.execute("PRAGMA wal_autocheckpoint = 0").fetchall()  # the jobs stay in the write-ahead log
        q.enqueue_many("t", [{}] * 50)
        copy = retention.copy_queue(path, "copy", tmp_path / "copies")
        assert (shared_lock(path), dms_lock(path)) == ("held", "held"), "copying the file dropped the locks"
    with JobQueue(copy, create=False) as copied:
        assert copied.stats()["queued"] == 50, "the copy lacks the jobs still in the write-ahead log"


def test_a_second_open_in_a_loop_beside_a_busy_opener_loses_nothing(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), "60"])
    try:
        for n in range(300):
            q.enqueue("t", {"n": n})
            JobQueue(path, create=False).close()
    finally:
        reader.kill()
        reader.wait()
    assert q.stats()["queued"] == 300
    q.close()
    with JobQueue(path, create=False) as again:
        assert again.stats()["queued"] == 300


HANDLERS = """
from labqueue import KeepAlive, handler

@handler("kept")
def kept(job, queue):
    with KeepAlive(queue.path, job, lease_seconds=30):
        pass
"""


def test_a_pool_whose_handlers_use_keepalive_finishes_every_job_once_beside_a_reader(tmp_path):
    path = tmp_path / "jobs.db"
    (tmp_path / "kept_handlers.py").write_text(HANDLERS)
    with JobQueue(path) as q:
        q.enqueue_many("kept", [{"n": n} for n in range(200)])
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), "120"])
    try:
        worker = subprocess.run(
            [sys.executable, "-m", "labqueue", "worker", str(path), "--handlers", "kept_handlers",
             "--concurrency", "2", "--idle-exit", "1s"],
            cwd=tmp_path, capture_output=True, text=True, timeout=180,
        )
    finally:
        reader.kill()
        reader.wait()
    assert worker.returncode == 0, worker.stderr[-2000:]
    with JobQueue(path, create=False) as q:
        states = dict(q.db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        attempts = q.db.execute("SELECT MAX(attempts) FROM jobs").fetchone()[0]
    assert states == {"done": 200}, states
    assert attempts == 1, "a job ran twice: a completion was lost"
