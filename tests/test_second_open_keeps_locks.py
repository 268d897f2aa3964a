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

# Another process asks whether anybody holds a lock on the -shm's DMS byte (offset 128):
# every connection with the wal-index mapped holds it shared, so an exclusive try fails.
DMS_HELD = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
    except OSError:
        print("held")
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 128)
        print("free")
    """
)

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


def dms_lock(path: Path) -> str:
    shm = f"{path}-shm"
    probe = subprocess.run([sys.executable, "-c", DMS_HELD, shm], capture_output=True, text=True, check=True)
    return probe.stdout.strip()


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
