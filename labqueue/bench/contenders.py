"""The queues `python -m labqueue.bench` races, each as load / open / drain.

Every contender drains the same workload: `n` no-op jobs whose payload is the JSON
object {"n": i}, i in 0..n-1, all ready before the clock starts, and decodes each
payload with json.loads as it takes the job. `drain` returns the numbers it was handed,
one entry per delivery, so the bench can tell deliveries from distinct jobs, and
`left` reads the store afterwards: how many jobs it does not hold as finished. These
functions run in spawned worker processes, so they live here in the package, never in
a notebook.

Durability is the same for all: WAL journal, synchronous=NORMAL. litequeue sets both
itself; persist-queue and huey choose WAL themselves and get NORMAL from a subclass
here (their default is FULL); labqueue and the bare-SQLite floors use labqueue's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, make_dataclass
from pathlib import Path
from typing import Any

from .. import heap, worker
from ..drivers.sqlite import sql
from ..queue import Job, JobQueue
from ..settings import DEFAULT_BATCH

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
    left: Callable[[Path], int]  # after a drain: jobs the store does not hold as finished


# -- labqueue -------------------------------------------------------------------------


def _load_labqueue(folder: Path, n: int) -> None:
    with JobQueue(folder / DB_FILE) as q:
        q.enqueue_many("noop", [{"n": i} for i in range(n)])


def _open_labqueue(folder: Path) -> JobQueue:
    return JobQueue(folder / DB_FILE, lease_seconds=LEASE_SECONDS)


def _left_labqueue(folder: Path) -> int:
    with sqlite3.connect(folder / DB_FILE) as db:
        return db.execute("SELECT COUNT(*) FROM jobs WHERE state != 'done'").fetchone()[0]


def drain_with_worker(location: str, name: str, batch: int = DEFAULT_BATCH) -> list[int]:
    """labqueue.worker.run, the loop `labqueue worker` runs, on `location` (a file or a
    postgresql:// URL) at one batch size, with a no-op handler that notes each job's n; it
    leaves at the first poll that finds nothing. Every bench's labqueue drain is this one."""
    seen: list[int] = []

    def note(job: Any, queue: Any) -> None:
        seen.append(job.payload["n"])

    stop = worker.StopFlag()
    worker.run(location, name, LEASE_SECONDS, idle_exit=0, handlers={"noop": note}, stop=stop, batch=batch)
    return seen


def worker_loop(batch: int) -> Callable[[JobQueue, str], list[int]]:
    """drain_with_worker at one batch size, on the queue the race opened for it."""

    def drain(q: JobQueue, name: str) -> list[int]:
        path = str(q.path)
        q.close()  # run() opens its own queue, as the worker process does
        return drain_with_worker(path, name, batch)

    return drain


class TutorialStatements:
    """The tutorial's own claim and complete, statement for statement, on labqueue's
    table: each claim is one write transaction (retire the leases that ran out on a last
    attempt, then one UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING), taken even
    when the queue is empty, and each fenced complete is another. labqueue's own claim()
    has since changed (it looks before it locks, and reads ids then updates them): this
    is the baseline it is measured against."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")

    def claim(self, worker: str, limit: int = 1) -> list[tuple[int, str, Any]]:
        now = time.time()
        params = {
            "now": now,
            "lease_end": now + LEASE_SECONDS,
            "token": secrets.token_hex(16),
            "worker": worker,
            "limit": limit,
        }
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(sql.RETIRE_EXHAUSTED, {"now": now, "reason": sql.LAST_ATTEMPT_EXPIRED})
            rows = self.db.execute(sql.CLAIM, params).fetchall()
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        # RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at
        return [(row[0], row[5], json.loads(row[2])) for row in sorted(rows)]

    def complete(self, job_id: int, token: str) -> bool:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            changed = self.db.execute(sql.COMPLETE, (time.time(), job_id, token)).rowcount
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return changed == 1

    def close(self) -> None:
        self.db.close()


def _open_tutorial(folder: Path) -> TutorialStatements:
    return TutorialStatements(folder / DB_FILE)


def tutorial_loop(limit: int) -> Callable[[TutorialStatements, str], list[int]]:
    """The tutorial's drain: claim up to `limit` jobs, complete each, repeat."""

    def drain(q: TutorialStatements, name: str) -> list[int]:
        seen: list[int] = []
        try:
            while jobs := q.claim(name, limit):
                for job_id, token, payload in jobs:
                    q.complete(job_id, token)
                    seen.append(payload["n"])
        finally:
            q.close()
        return seen

    return drain


# -- the tutorial's code as it stands ------------------------------------------------------

# The tutorial's queue on its own table (schema version 1: no priority, and the states
# CHECK an IN list), its statements as its step 2 writes them: the retire keeps the first
# error it finds, and the claim takes the oldest ready jobs by (visible_at, id). Its
# complete is the fenced UPDATE on the token (labqueue's COMPLETE adds the deadline test for
# jobs with a concurrency key, a column the tutorial's table does not have).
TUTORIAL_RETIRE = """
UPDATE jobs SET state = 'dead', lease_token = NULL, finished_at = ?,
       last_error = COALESCE(last_error, 'lease expired on the last attempt')
 WHERE state = 'running' AND attempts >= max_attempts AND visible_at <= ?
"""
TUTORIAL_COMPLETE = """
UPDATE jobs SET state = 'done', finished_at = ?, lease_token = NULL
 WHERE id = ? AND lease_token = ? AND state = 'running'
"""
TUTORIAL_CLAIM = """
UPDATE jobs
   SET state = 'running', attempts = attempts + 1, visible_at = ?, lease_token = ?, worker = ?
 WHERE id IN (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?
               ORDER BY visible_at, id LIMIT ?)
RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at
"""


# A claimed job as the tutorial's code makes one: labqueue's Job's fields, in a frozen
# dataclass (whose __init__ sets each field through object.__setattr__).
TutorialJob = make_dataclass("TutorialJob", [(f.name, f.type) for f in fields(Job)], frozen=True)


class TutorialCode:
    """The tutorial's code as a program that follows it runs: its own table (schema
    version 1), a write transaction per claim and per complete, each opened by a
    generator context manager as the tutorial's `_tx`, the time read through an injected
    clock, rows read as sqlite3.Row, each claimed row made a frozen dataclass, uuid4
    tokens. The issue's check races labqueue's worker against this; TutorialStatements
    (the same two transactions per job on labqueue's current table, plain tuples, no
    context manager) is the stricter baseline beside it."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def claim(self, worker: str, limit: int = 1) -> list[TutorialJob]:
        now = self.clock()
        token = uuid.uuid4().hex
        with self._tx() as db:
            db.execute(TUTORIAL_RETIRE, (now, now))
            rows = db.execute(TUTORIAL_CLAIM, (now + LEASE_SECONDS, token, worker, now, limit)).fetchall()
        jobs = [
            TutorialJob(
                id=r["id"],
                kind=r["kind"],
                payload=json.loads(r["payload"]),
                attempts=r["attempts"],
                max_attempts=r["max_attempts"],
                lease_token=r["lease_token"],
                lease_expires_at=r["visible_at"],
            )
            for r in rows
        ]
        return sorted(jobs, key=lambda job: job.id)

    def complete(self, job: TutorialJob) -> bool:
        with self._tx() as db:
            if db.execute(TUTORIAL_COMPLETE, (self.clock(), job.id, job.lease_token)).rowcount != 1:
                return False
        return True


def drain_tutorial_code(q: TutorialCode, name: str) -> list[int]:
    """The tutorial's throughput drain: claim one job, complete it, repeat."""
    seen: list[int] = []
    try:
        while jobs := q.claim(name, 1):
            for job in jobs:
                q.complete(job)
                seen.append(job.payload["n"])
    finally:
        q.db.close()
    return seen


def _load_tutorial_table(folder: Path, n: int) -> None:
    """n jobs in the tutorial's own table, as its enqueue_many writes them."""
    with contextlib.closing(sqlite3.connect(folder / DB_FILE, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.executescript(sql.TABLE_V1 + sql.INDEXES_V1)
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO jobs (kind, payload, max_attempts, visible_at, created_at) VALUES (?, ?, ?, ?, ?)",
            [("noop", _body(i), 5, now, now) for i in range(n)],
        )
        db.execute("COMMIT")


def _open_tutorial_code(folder: Path) -> TutorialCode:
    return TutorialCode(folder / DB_FILE)


# -- bare SQLite on labqueue's table: what the file itself allows ----------------------

# The floors pick the next job in the claim's own order (labqueue.drivers.sqlite.sql.CLAIM_ORDER), which is
# the ready index's: in any other order SQLite sorts every ready row on each claim, and the
# floor measures the sort (tests/test_bench.py reads their plans).
FLOOR_TAKE = f"""
UPDATE jobs SET state = 'done', finished_at = ?1
 WHERE id = (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?1
              ORDER BY {sql.CLAIM_ORDER} LIMIT 1)
RETURNING payload
"""

FLOOR_CLAIM = f"""
UPDATE jobs SET state = 'running', attempts = attempts + 1, visible_at = ?2, lease_token = ?3, worker = ?4
 WHERE id = (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?1
              ORDER BY {sql.CLAIM_ORDER} LIMIT 1)
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


def _body(i: int) -> str:
    """The payload every contender stores, as the same JSON text."""
    return json.dumps({"n": i})


def _number(payload: str | bytes) -> int:
    """Every contender decodes its payload the same way."""
    return json.loads(payload)["n"]


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
            q.put(_body(i))
    q.conn.close()


def _open_litequeue(folder: Path) -> Any:
    from litequeue import LiteQueue

    # sets WAL and synchronous=NORMAL itself; the same 30 s busy timeout as everyone else here
    return LiteQueue(str(folder / DB_FILE), timeout=30.0)


def _left_litequeue(folder: Path) -> int:
    q = _open_litequeue(folder)
    try:
        return q.qsize()  # messages neither done nor failed
    finally:
        q.conn.close()


def drain_litequeue(q: Any, name: str) -> list[int]:
    """pop() marks a message locked (one transaction), done() marks it done (another)."""
    seen: list[int] = []
    while (message := q.pop()) is not None:
        q.done(message.message_id)
        seen.append(_number(message.data))
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
        q.put(_body(i))
    q.close()


def _open_persist_queue(folder: Path) -> Any:
    # auto_resume=False: resuming would hand back jobs that other workers hold right now
    return _persist_queue_class()(str(folder / "pq"), auto_resume=False, timeout=30.0)


def _left_persist_queue(folder: Path) -> int:
    q = _open_persist_queue(folder)
    try:
        return q.active_size()  # ready and unacked: neither acked nor failed
    finally:
        q.close()


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
        seen.append(_number(item["data"]))
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
        storage.enqueue(_body(i).encode())
    storage.close()


def _left_huey(folder: Path) -> int:
    storage = _open_huey(folder)
    try:
        return storage.queue_size()
    finally:
        storage.close()


def drain_huey(storage: Any, name: str) -> list[int]:
    """huey's storage calls alone: dequeue() reads and deletes the row in one
    transaction (no lease, no ack), and nothing of huey's task machinery runs."""
    seen: list[int] = []
    while (data := storage.dequeue()) is not None:
        seen.append(_number(bytes(data)))
    storage.close()
    return seen


# huey's worker path: what its consumer's worker does per task (huey.consumer.Worker.loop):
# Huey.dequeue() (the storage's dequeue, then the task deserialized from huey's pickle)
# and Huey.execute(task), which checks revocation, runs the task and stores its result
# when it returns one (a no-op returns None: nothing stored, huey's default store_none).
_huey_seen: list[int] = []


def _huey_app(folder: Path) -> Any:
    from huey import Huey

    app = Huey("bench", storage_class=_huey_class(), filename=str(folder / DB_FILE), timeout=30)

    @app.task(name="noop")
    def noop(body: str) -> None:
        _huey_seen.append(_number(body))

    app.noop = noop
    return app


def _load_huey_tasks(folder: Path, n: int) -> None:
    app = _huey_app(folder)
    for i in range(n):
        app.noop(_body(i))
    app.storage.close()


def _left_huey_tasks(folder: Path) -> int:
    app = _huey_app(folder)
    try:
        return app.pending_count()
    finally:
        app.storage.close()


def drain_huey_worker(app: Any, name: str) -> list[int]:
    """Until the queue is empty: Huey.dequeue(), then Huey.execute(task), as huey's
    consumer does (its sleep between empty polls left out: the race ends at the first)."""
    _huey_seen.clear()
    while (task := app.dequeue()) is not None:
        app.execute(task)
    app.storage.close()
    return list(_huey_seen)


SAME = "WAL, synchronous=NORMAL"

LEASED = "lease + fenced complete"
PEERS = "WAL (its own), synchronous=NORMAL (set here)"
# The worker loop's default batch, the one the targets judge.
DEFAULT = "labqueue_b10"

CONTENDERS: dict[str, Contender] = {
    c.key: c
    for c in (
        *(
            Contender(
                f"labqueue_b{batch}",
                f"labqueue worker loop, batch {batch}" + (" (default)" if batch == 10 else ""),
                _load_labqueue,
                _open_labqueue,
                worker_loop(batch),
                LEASED,
                SAME,
                _left_labqueue,
            )
            for batch in (1, 10, 100)
        ),
        *(
            Contender(
                f"tutorial_l{limit}",
                f"the tutorial's statements, claim limit {limit}",
                _load_labqueue,
                _open_tutorial,
                tutorial_loop(limit),
                LEASED,
                SAME,
                _left_labqueue,
            )
            for limit in (1, 10)
        ),
        Contender(
            "tutorial_code",
            "the tutorial's code on its own table, claim limit 1",
            _load_tutorial_table,
            _open_tutorial_code,
            drain_tutorial_code,
            LEASED,
            SAME,
            _left_labqueue,
        ),
        Contender(
            "floor_one_tx",
            "bare SQLite: complete + next claim, 1 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_one_tx,
            LEASED,
            SAME,
            _left_labqueue,
        ),
        Contender(
            "floor_two_tx",
            "bare SQLite: claim, fenced complete, 2 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_two_tx,
            LEASED,
            SAME,
            _left_labqueue,
        ),
        Contender(
            "floor_take",
            "bare SQLite: take = done, 1 tx",
            _load_labqueue,
            _open_bare,
            drain_floor_take,
            "none (done when taken)",
            SAME,
            _left_labqueue,
        ),
        Contender(
            "huey",
            "huey SqliteStorage calls alone (storage only)",
            _load_huey,
            _open_huey,
            drain_huey,
            "none (deleted when taken)",
            PEERS,
            _left_huey,
        ),
        Contender(
            "huey_worker",
            "huey worker path: dequeue() + execute()",
            _load_huey_tasks,
            _huey_app,
            drain_huey_worker,
            "none (deleted when taken)",
            PEERS,
            _left_huey_tasks,
        ),
        Contender(
            "persist_queue",
            "persist-queue SQLiteAckQueue",
            _load_persist_queue,
            _open_persist_queue,
            drain_persist_queue,
            "ack, no lease",
            PEERS,
            _left_persist_queue,
        ),
        Contender(
            "litequeue",
            "litequeue",
            _load_litequeue,
            _open_litequeue,
            drain_litequeue,
            "done, no lease",
            "WAL, synchronous=NORMAL (its own)",
            _left_litequeue,
        ),
    )
}


def child(key: str, folder: str, name: str, barrier: Any, results: Any) -> None:
    """A worker process of the race: connect, wait for the start, drain, report. Every
    contender's process keeps its heap's top, as `labqueue worker`'s does (labqueue.heap):
    without it the tutorial's code drained at half speed here, faulting its heap in
    again at every statement, which is glibc's trimming and not the code under test."""
    heap.keep_top()
    contender = CONTENDERS[key]
    handle = contender.open(Path(folder))
    barrier.wait()
    seen = contender.drain(handle, name)
    results.put((name, os.getpid(), time.time(), seen))
