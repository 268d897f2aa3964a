"""Faults from outside the queue: a full disk, a held write lock, wrong files, clock
steps, and rows that name code. Each ends in a clear error or a documented outcome,
with nothing half-written."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from labqueue import (
    ForeignJobsTable,
    JobQueue,
    NotADatabase,
    QueueBusy,
    StorageFull,
    start_worker,
)
from labqueue import worker as worker_loop
from labqueue.lab.demo_handlers import LEDGER_INSERT, LEDGER_TABLE
from labqueue.procs import kill_tree

LEASE = 30.0


def snapshot(q: JobQueue) -> list[tuple]:
    return [tuple(row) for row in q.db.execute("SELECT * FROM jobs ORDER BY id")]


def cap_at_current_size(q: JobQueue) -> int:
    """Let the file grow no further, as if the disk had just filled up."""
    pages = q.db.execute("PRAGMA page_count").fetchone()[0]
    q.db.execute(f"PRAGMA max_page_count = {int(pages)}")
    return pages


def make_room(q: JobQueue, pages: int) -> None:
    q.db.execute(f"PRAGMA max_page_count = {int(pages) + 1000}")


def big_ledger_effect(job_id: int):
    """A ledger row with a 20 kB value: on a capped file it needs pages there are none of."""

    def effect(db: sqlite3.Connection) -> None:
        db.execute(LEDGER_INSERT, (job_id, "x" * 20_000))

    return effect


def ledger_rows(q: JobQueue) -> int:
    return q.db.execute("SELECT COUNT(job_id) FROM ledger").fetchone()[0]


# -- the disk fills up ---------------------------------------------------------------


@pytest.mark.sqlite_only
def test_enqueue_many_on_a_full_disk_adds_none_of_the_batch(q):
    q.enqueue_many("report", [{"n": i} for i in range(10)])
    before = snapshot(q)
    pages = cap_at_current_size(q)
    with pytest.raises(StorageFull, match=r"full.*rolled back"):
        q.enqueue_many("report", [{"text": "y" * 500} for _ in range(200)])
    assert snapshot(q) == before
    make_room(q, pages)
    assert q.enqueue_many("report", [{"text": "y" * 500} for _ in range(200)]) == 200
    assert len(snapshot(q)) == 210


@pytest.mark.sqlite_only
def test_claim_on_a_full_disk_leases_nothing(q):
    q.enqueue_many("report", [{"n": i} for i in range(20)])
    before = snapshot(q)
    pages = cap_at_current_size(q)
    # A long worker name makes every claimed row grow, so the claim needs new pages.
    with pytest.raises(StorageFull, match="full"):
        q.claim("w" * 5000, limit=20)
    assert snapshot(q) == before
    make_room(q, pages)
    assert len(q.claim("w" * 5000, limit=20)) == 20


@pytest.mark.sqlite_only
def test_complete_on_a_full_disk_keeps_the_job_with_its_token(q):
    q.db.execute(LEDGER_TABLE)
    q.enqueue("credit", {})
    job = q.claim("w1")[0]
    pages = cap_at_current_size(q)
    with pytest.raises(StorageFull, match="full"):
        q.complete(job, effect=big_ledger_effect(job.id))
    row = q.db.execute("SELECT state, lease_token FROM jobs WHERE id = ?", (job.id,)).fetchone()
    assert (row["state"], row["lease_token"]) == ("running", job.lease_token)
    assert ledger_rows(q) == 0
    make_room(q, pages)
    assert q.complete(job, effect=big_ledger_effect(job.id)) is True
    assert ledger_rows(q) == 1


# -- another connection holds the write lock --------------------------------------------


WRITES = {
    "enqueue": lambda q, job: q.enqueue("report", {}),
    "enqueue_many": lambda q, job: q.enqueue_many("report", [{}, {}]),
    "claim": lambda q, job: q.claim("w2"),
    "complete": lambda q, job: q.complete(job),
    "fail": lambda q, job: q.fail(job, "boom"),
    "heartbeat": lambda q, job: q.heartbeat(job),
    "requeue_dead": lambda q, job: q.requeue_dead(),
}


@pytest.mark.sqlite_only  # SQLite's one write lock (PostgreSQL's row locks: test_postgres.py)
@pytest.mark.parametrize("operation", sorted(WRITES))
def test_a_held_write_lock_gives_queue_busy_and_changes_nothing(make_queue, operation):
    q = make_queue(timeout=0.05)
    q.enqueue_many("report", [{}, {}])
    job = q.claim("w1")[0]
    before = snapshot(q)
    other = sqlite3.connect(q.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(QueueBusy, match=r"busy timeout of 0\.05 s.*nothing was changed"):
            WRITES[operation](q, job)
        assert q.stats()["running"] == 1  # readers are not blocked in WAL mode
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert snapshot(q) == before
    assert q.complete(job) is True


def test_opening_a_queue_that_needs_its_schema_while_locked_is_queue_busy(tmp_path):
    path = tmp_path / "app.db"
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(QueueBusy, match="busy timeout"):
            JobQueue(path, timeout=0.05)
    finally:
        other.execute("ROLLBACK")
        other.close()
    with JobQueue(path) as q:
        assert q.stats()["queued"] == 0


# -- files that are not a queue ---------------------------------------------------------


def untouched(path: Path, before: bytes) -> bool:
    siblings = sorted(p.name for p in path.parent.iterdir())
    return path.read_bytes() == before and siblings == [path.name]


def test_a_damaged_file_with_an_sqlite_header_is_refused_and_untouched(tmp_path):
    path = tmp_path / "damaged.db"
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    before = path.read_bytes()
    with pytest.raises(NotADatabase, match=r"damaged\.db is not an SQLite database, or its header is dam"):
        JobQueue(path)
    assert untouched(path, before)


@pytest.mark.parametrize("journal_mode", ["delete", "wal"])
def test_a_foreign_jobs_table_is_refused_and_the_file_untouched(tmp_path, journal_mode):
    path = tmp_path / "crm.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA journal_mode = {journal_mode}")
    db.execute("CREATE TABLE jobs (title TEXT, salary REAL, id INTEGER PRIMARY KEY)")
    db.execute("INSERT INTO jobs (title, salary) VALUES ('welder', 41000)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(ForeignJobsTable, match=r"crm\.db already has a 'jobs' table.*missing columns: kind"):
        JobQueue(path)
    assert untouched(path, before)


# -- the clock steps --------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_forward_step_ends_leases_early_and_the_fence_holds(make_queue, clock):
    q = make_queue(lease_seconds=LEASE)
    q.db.execute(LEDGER_TABLE)
    q.enqueue("credit", {})
    first = q.claim("w1")[0]
    clock.advance(3600)  # the host's clock is corrected forward by an hour
    second = q.claim("w2")[0]
    assert (second.id, second.attempts) == (first.id, 2)
    assert q.heartbeat(first) is False
    assert q.complete(first, effect=big_ledger_effect(first.id)) is False
    assert q.complete(second, effect=big_ledger_effect(second.id)) is True
    assert ledger_rows(q) == 1


def test_a_forward_step_brings_delayed_jobs_forward(make_queue, clock):
    q = make_queue()
    q.enqueue("report", {}, delay=600)
    assert q.claim("w1") == []
    clock.advance(600)
    assert len(q.claim("w1")) == 1


def test_a_backward_step_stretches_leases_by_the_step(make_queue, clock):
    q = make_queue(lease_seconds=LEASE)
    q.enqueue("report", {})
    assert q.claim("w1")[0].attempts == 1
    clock.advance(-3600)  # the clock is set back by an hour
    clock.advance(LEASE + 1)
    assert q.claim("w2") == []  # the lease has not run out on the clock's new reading
    clock.advance(3600 - 1)
    assert q.claim("w2")[0].attempts == 2


def test_after_a_backward_step_the_holder_keeps_its_job(make_queue, clock):
    q = make_queue(lease_seconds=LEASE)
    q.enqueue("nightly", {})
    job = q.claim("holder")[0]
    clock.advance(-3600)
    assert q.heartbeat(job) is True  # renewed from the clock's reading: LEASE from now
    assert q.job(job.id).visible_at - clock.now == LEASE
    assert q.complete(job) is True


# -- a row names code ---------------------------------------------------------------------


MARKER_MODULE = "labqueue_fault_marker"
ROW_KINDS = [MARKER_MODULE, f"{MARKER_MODULE}.run", f"{MARKER_MODULE}:run", "os.system", "__import__"]


@pytest.fixture
def marker_module(tmp_path, monkeypatch) -> Path:
    """A module that leaves a file behind if anything ever imports it."""
    folder = tmp_path / "site"
    folder.mkdir()
    marker = tmp_path / "imported.txt"
    (folder / f"{MARKER_MODULE}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\ndef run(*a): pass\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return marker


def assert_given_back_as_unknown(path: Path, worker: str = "w1") -> None:
    """Every row queued again with no attempt counted, saying which worker gave it back and why."""
    with JobQueue(path) as q:
        rows = q.db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    assert [row["kind"] for row in rows] == ROW_KINDS
    for row in rows:
        assert (row["state"], row["attempts"]) == ("queued", 0)
        why = f"no handler for kind {row['kind']!r} on worker {worker}: given back"
        assert row["last_error"].startswith(why)


def test_an_unknown_kind_is_given_back_and_nothing_named_is_imported(tmp_path, marker_module):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        for kind in ROW_KINDS:
            q.enqueue(kind, {"module": MARKER_MODULE})
    handled = worker_loop.run(str(path), "w1", LEASE, idle_exit=0)
    assert handled == 0
    assert_given_back_as_unknown(path)
    assert not marker_module.exists()
    assert MARKER_MODULE not in sys.modules


def test_a_worker_process_imports_nothing_a_row_names(tmp_path, marker_module):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        for kind in ROW_KINDS:
            q.enqueue(kind, {})
    proc = start_worker(path, "w1", LEASE, idle_exit=0.2, handlers=("labqueue.lab.demo_handlers",))
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        kill_tree(proc)
    assert_given_back_as_unknown(path)
    assert not marker_module.exists()
