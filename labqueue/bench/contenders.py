"""The queues `python -m labqueue.bench` races, each as load / open / drain.

Every contender drains the same workload: `n` no-op jobs numbered 0..n-1, all ready
before the clock starts. `drain` returns the numbers it was handed, one entry per
delivery, so the bench can tell deliveries from distinct jobs. These functions run
in spawned worker processes, so they live here in the package, never in a notebook.

Durability is the same for all: WAL journal, synchronous=NORMAL. litequeue sets both
itself; persist-queue and huey choose WAL themselves and get NORMAL from a subclass
here (their default is FULL); labqueue and the bare-SQLite floors use labqueue's.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import worker
from ..queue import JobQueue

LEASE_SECONDS = 60.0
DB_FILE = "jobs.db"


@dataclass(frozen=True)
class Contender:
    """One queue in the race."""

    key: str
    label: str
    load: Callable[[Path, int], None]  # put n jobs into a fresh store in this folder
    open: Callable[[Path], Any]  # connect (before the clock starts)
    drain: Callable[[Any, str], list[int]]  # take jobs until none is left; their numbers
    acked: str  # how a job is finished: what a crash mid-job costs
    settings: str


# -- labqueue -------------------------------------------------------------------------


def _load_labqueue(folder: Path, n: int) -> None:
    with JobQueue(folder / DB_FILE) as q:
        q.enqueue_many("noop", [{"n": i} for i in range(n)])


def _open_labqueue(folder: Path) -> JobQueue:
    return JobQueue(folder / DB_FILE, lease_seconds=LEASE_SECONDS)


def drain_worker_loop(q: JobQueue, name: str) -> list[int]:
    """labqueue.worker.run, the loop `python -m labqueue.worker` runs, with a no-op
    handler that notes each job; it leaves at the first poll that finds nothing."""
    seen: list[int] = []

    def note(job: Any, queue: JobQueue) -> None:
        seen.append(job.payload["n"])

    path = str(q.path)
    q.close()  # run() opens its own queue, as the worker process does
    worker.run(path, name, LEASE_SECONDS, idle_exit=0, handlers={"noop": note}, stop=worker.StopFlag())
    return seen


def drain_tutorial_style(q: JobQueue, name: str) -> list[int]:
    """The tutorial's drain: claim one job, complete it, repeat."""
    seen: list[int] = []
    try:
        while jobs := q.claim(name):
            q.complete(jobs[0])
            seen.append(jobs[0].payload["n"])
    finally:
        q.close()
    return seen


# -- bare SQLite on labqueue's table: what the file itself allows ----------------------

FLOOR_TAKE = """
UPDATE jobs SET state = 'done', finished_at = ?1
 WHERE id = (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?1
              ORDER BY visible_at, id LIMIT 1)
RETURNING payload
"""

FLOOR_CLAIM = """
UPDATE jobs SET state = 'running', attempts = attempts + 1, visible_at = ?2, lease_token = ?3, worker = ?4
 WHERE id = (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?1
              ORDER BY visible_at, id LIMIT 1)
RETURNING id, lease_token, payload
"""

FLOOR_COMPLETE = """
UPDATE jobs SET state = 'done', finished_at = ?1, lease_token = NULL
 WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
"""


def _open_bare(folder: Path) -> sqlite3.Connection:
    db = sqlite3.connect(folder / DB_FILE, isolation_level=None, timeout=30.0)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def _number(payload: str) -> int:
    # '{"n": 123}': the bare loops skip json to stay a floor
    return int(payload[6:-1])


def drain_floor_take(db: sqlite3.Connection, name: str) -> list[int]:
    """One write transaction per job: take it and mark it done. No lease, no ack."""
    seen: list[int] = []
    cur = db.cursor()
    while True:
        cur.execute("BEGIN IMMEDIATE")
        rows = cur.execute(FLOOR_TAKE, (time.time(),)).fetchall()
        cur.execute("COMMIT")
        if not rows:
            break
        seen.append(_number(rows[0][0]))
    db.close()
    return seen


def drain_floor_two_tx(db: sqlite3.Connection, name: str) -> list[int]:
    """The tutorial's design, bare: claim with RETURNING (one transaction), then a
    fenced complete (a second one)."""
    seen: list[int] = []
    cur = db.cursor()
    while True:
        now = time.time()
        cur.execute("BEGIN IMMEDIATE")
        rows = cur.execute(FLOOR_CLAIM, (now, now + LEASE_SECONDS, secrets.token_hex(16), name)).fetchall()
        cur.execute("COMMIT")
        if not rows:
            break
        job_id, token, payload = rows[0]
        cur.execute("BEGIN IMMEDIATE")
        cur.execute(FLOOR_COMPLETE, (time.time(), job_id, token))
        cur.execute("COMMIT")
        seen.append(_number(payload))
    db.close()
    return seen


def drain_floor_one_tx(db: sqlite3.Connection, name: str) -> list[int]:
    """The worker loop's design, bare: the fenced complete of one job and the claim
    of the next in one transaction."""
    seen: list[int] = []
    cur = db.cursor()
    held: tuple[int, str] | None = None
    while True:
        now = time.time()
        cur.execute("BEGIN IMMEDIATE")
        if held is not None:
            cur.execute(FLOOR_COMPLETE, (now, *held))
        rows = cur.execute(FLOOR_CLAIM, (now, now + LEASE_SECONDS, secrets.token_hex(16), name)).fetchall()
        cur.execute("COMMIT")
        if not rows:
            break
        job_id, token, payload = rows[0]
        held = (job_id, token)
        seen.append(_number(payload))
    db.close()
    return seen


# -- peers ----------------------------------------------------------------------------


def _load_litequeue(folder: Path, n: int) -> None:
    from litequeue import LiteQueue

    q = LiteQueue(str(folder / DB_FILE))
    with q.transaction():
        for i in range(n):
            q.put(str(i))
    q.conn.close()


def _open_litequeue(folder: Path) -> Any:
    from litequeue import LiteQueue

    return LiteQueue(str(folder / DB_FILE))  # sets WAL and synchronous=NORMAL itself


def drain_litequeue(q: Any, name: str) -> list[int]:
    """pop() marks a message locked (one transaction), done() marks it done (another)."""
    seen: list[int] = []
    while (message := q.pop()) is not None:
        q.done(message.message_id)
        seen.append(int(message.data))
    q.conn.close()
    return seen


def _persist_queue_class() -> type:
    from persistqueue import SQLiteAckQueue

    class NormalSyncAckQueue(SQLiteAckQueue):
        """SQLiteAckQueue at synchronous=NORMAL, like everyone else here."""

        def _new_db_connection(self, path: str, multithreading: bool, timeout: float) -> sqlite3.Connection:
            conn = super()._new_db_connection(path, multithreading, timeout)
            conn.execute("PRAGMA synchronous = NORMAL")
            return conn

    return NormalSyncAckQueue


def _load_persist_queue(folder: Path, n: int) -> None:
    q = _persist_queue_class()(str(folder / "pq"), auto_resume=False)
    for i in range(n):
        q.put(i)
    q.close()


def _open_persist_queue(folder: Path) -> Any:
    # auto_resume=False: resuming would hand back jobs that other workers hold right now
    return _persist_queue_class()(str(folder / "pq"), auto_resume=False, timeout=30.0)


def drain_persist_queue(q: Any, name: str) -> list[int]:
    """get() selects the next row, then marks it unacked (two statements); ack() marks it acked."""
    from persistqueue import Empty

    seen: list[int] = []
    while True:
        try:
            item = q.get(block=False, raw=True)
        except Empty:
            break
        q.ack(id=item["pqid"])
        seen.append(item["data"])
    q.close()
    return seen


def _huey_class() -> type:
    from huey.storage import SqliteStorage

    class NormalSyncStorage(SqliteStorage):
        """huey's SqliteStorage at synchronous=NORMAL, like everyone else here."""

        def _create_connection(self) -> sqlite3.Connection:
            conn = super()._create_connection()
            conn.execute("PRAGMA synchronous = NORMAL")
            return conn

    return NormalSyncStorage


def _open_huey(folder: Path) -> Any:
    return _huey_class()(name="bench", filename=str(folder / DB_FILE), timeout=30)


def _load_huey(folder: Path, n: int) -> None:
    storage = _open_huey(folder)
    for i in range(n):
        storage.enqueue(str(i).encode())
    storage.close()


def drain_huey(storage: Any, name: str) -> list[int]:
    """dequeue() reads and deletes the row in one transaction: no lease, no ack."""
    seen: list[int] = []
    while (data := storage.dequeue()) is not None:
        seen.append(int(bytes(data)))
    storage.close()
    return seen


SAME = "WAL, synchronous=NORMAL"

CONTENDERS: dict[str, Contender] = {
    c.key: c
    for c in (
        Contender(
            "worker_loop",
            "labqueue worker loop",
            _load_labqueue,
            _open_labqueue,
            drain_worker_loop,
            "lease + fenced complete",
            SAME,
        ),
        Contender(
            "tutorial",
            "labqueue, tutorial-style (claim, complete)",
            _load_labqueue,
            _open_labqueue,
            drain_tutorial_style,
            "lease + fenced complete",
            SAME,
        ),
        Contender(
            "floor_one_tx",
            "bare SQLite: complete + next claim, 1 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_one_tx,
            "lease + fenced complete",
            SAME,
        ),
        Contender(
            "floor_two_tx",
            "bare SQLite: claim, fenced complete, 2 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_two_tx,
            "lease + fenced complete",
            SAME,
        ),
        Contender(
            "floor_take",
            "bare SQLite: take = done, 1 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_take,
            "none (done when taken)",
            SAME,
        ),
        Contender(
            "huey",
            "huey SqliteStorage",
            _load_huey,
            _open_huey,
            drain_huey,
            "none (deleted when taken)",
            "WAL (its own), synchronous=NORMAL (set here)",
        ),
        Contender(
            "persist_queue",
            "persist-queue SQLiteAckQueue",
            _load_persist_queue,
            _open_persist_queue,
            drain_persist_queue,
            "ack, no lease",
            "WAL (its own), synchronous=NORMAL (set here)",
        ),
        Contender(
            "litequeue",
            "litequeue",
            _load_litequeue,
            _open_litequeue,
            drain_litequeue,
            "done, no lease",
            "WAL, synchronous=NORMAL (its own)",
        ),
    )
}


def child(key: str, folder: str, name: str, barrier: Any, results: Any) -> None:
    """A worker process of the race: connect, wait for the start, drain, report."""
    contender = CONTENDERS[key]
    handle = contender.open(Path(folder))
    barrier.wait()
    seen = contender.drain(handle, name)
    results.put((name, os.getpid(), time.time(), seen))
