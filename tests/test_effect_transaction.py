"""An effect cannot end the transaction that completes its job: an effect that would begin,
commit or roll back (by any statement or call) is refused and its writes rolled back, the
job stays its worker's, and a worker fails such a job and carries on. Savepoints inside
the transaction are allowed. SQLite, whose connection an effect is handed."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from labqueue import JobQueue
from labqueue import worker as worker_loop
from labqueue.errors import EffectEndedTransaction

LEDGER = "CREATE TABLE IF NOT EXISTS ledger (job_id INTEGER PRIMARY KEY)"
WRITE = "INSERT INTO ledger (job_id) VALUES (1)"


def effect_that(how: str):
    def effect(db: sqlite3.Connection) -> None:
        db.execute(WRITE)
        if how == "executescript":
            db.executescript("INSERT INTO ledger (job_id) VALUES (2);")
        elif how == "commit()":
            db.commit()
        elif how == "rollback()":
            db.rollback()
        else:
            db.execute(how)
        db.execute("INSERT INTO ledger (job_id) VALUES (3)")

    return effect


SPLITTERS = [
    "executescript",
    "commit()",
    "rollback()",
    "COMMIT",
    "END",
    "ROLLBACK",
    "BEGIN",
    "BEGIN EXCLUSIVE",
]


@pytest.fixture
def q(tmp_path):
    with JobQueue(tmp_path / "jobs.db") as queue:
        queue.db.execute(LEDGER)
        queue.enqueue("t", {})
        queue.enqueue("t", {})
        yield queue


def ledger(q: JobQueue) -> list[int]:
    return [n for (n,) in q.db.execute("SELECT job_id FROM ledger ORDER BY job_id")]


def snapshot(q: JobQueue) -> list[tuple]:
    return [tuple(r) for r in q.db.execute("SELECT id, state, attempts, lease_token FROM jobs ORDER BY id")]


@pytest.mark.parametrize("how", SPLITTERS)
@pytest.mark.parametrize("path", ["complete", "complete_and_claim"])
def test_an_effect_that_would_end_the_transaction_is_refused_and_rolled_back(q, how, path):
    job = q.claim_next("w")
    before = snapshot(q)
    with pytest.raises(EffectEndedTransaction, match=f"the effect of job {job.id} .* tried to begin, commit"):
        if path == "complete":
            q.complete(job, effect_that(how))
        else:
            q.complete_and_claim(job, "w", effect_that(how))
    assert not q.db.in_transaction
    assert (snapshot(q), ledger(q)) == (before, [])
    assert q.complete(job, effect_that_writes) is True  # still ours, and a proper effect works
    assert ledger(q) == [1]


def effect_that_writes(db: sqlite3.Connection) -> None:
    db.execute(WRITE)


def test_an_effect_that_swallows_the_refusal_is_still_refused(q):
    def sly(db: sqlite3.Connection) -> None:
        db.execute(WRITE)
        with contextlib.suppress(sqlite3.DatabaseError):
            db.execute("COMMIT")

    job = q.claim_next("w")
    with pytest.raises(EffectEndedTransaction):
        q.complete(job, sly)
    assert ledger(q) == []


def test_an_effect_may_use_savepoints_inside_the_transaction(q):
    def nested(db: sqlite3.Connection) -> None:
        db.execute("SAVEPOINT inner")
        db.execute("INSERT INTO ledger (job_id) VALUES (5)")
        db.execute("ROLLBACK TO inner")
        db.execute(WRITE)
        db.execute("RELEASE inner")

    job = q.claim_next("w")
    assert q.complete(job, nested) is True
    assert ledger(q) == [1]


def test_a_worker_fails_the_job_whose_effect_would_commit_and_carries_on(q):
    job = q.claim_next("w")
    outcome = worker_loop.handle(q, job, {"t": lambda job, q: effect_that("COMMIT")})
    assert outcome == "queued"
    assert q.job(job.id).last_error.startswith("EffectEndedTransaction: the effect of job")
    assert ledger(q) == []


def test_in_a_batch_only_the_job_whose_effect_would_commit_fails_the_rest_are_done(q):
    """The whole report rolls back; the worker fails that one job and reports the batch again."""
    q.enqueue("t", {})
    batch = q.claim_batch("w", 3)

    def handler(job, q):
        if job.id == 2:
            return effect_that("COMMIT")
        return lambda db: db.execute("INSERT INTO ledger (job_id) VALUES (?)", (10 + job.id,))

    outcomes: list[str] = []
    ran, _ = worker_loop.work_batch(
        q, batch, {"t": handler}, claim_for=lambda ran: None, stop=worker_loop.StopFlag(), outcomes=outcomes
    )
    assert ran == 3 and outcomes == ["done", "queued", "done"]
    assert q.job(2).last_error.startswith("EffectEndedTransaction: the effect of job 2")
    assert ledger(q) == [11, 13]


def test_a_commit_run_on_the_connection_before_is_refused_in_an_effect_too(q):
    """sqlite3 caches the statement "COMMIT" once anyone has run it on this connection."""
    q.db.execute("BEGIN")
    q.db.execute("COMMIT")
    job = q.claim_next("w")
    with pytest.raises(EffectEndedTransaction):
        q.complete(job, effect_that("COMMIT"))
    assert ledger(q) == [] and q.job(job.id).state == "running"
