"""The worker loop's fast path keeps every rule of the tutorial's claim and complete.

JobQueue.any_ready, claim_next and complete_and_claim do in fewer round trips what
claim() and complete() do; the property test drives both paths through the same
random histories and asserts the tables stay identical, row for row."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labqueue import FakeClock, JobQueue, QueueBusy
from labqueue.core import Finished
from labqueue.drivers.sqlite import sql
from labqueue.lab.demo_handlers import HANDLERS, LEDGER_TABLE
from labqueue.worker import StopFlag, run, work_batch

ROW = (
    "SELECT id, state, attempts, visible_at, worker, last_error, finished_at, lease_token IS NULL "
    "FROM jobs ORDER BY id"
)


def rows(q: JobQueue) -> list[tuple]:
    return [tuple(r) for r in q.db.execute(ROW)]


def state(q: JobQueue, job_id: int) -> tuple:
    """(state, attempts, worker) of one job."""
    record = q.job(job_id)
    return record.state, record.attempts, record.worker


# A row written straight into the table, behind the queue's back.
RAW_INSERT = "INSERT INTO jobs (created_at, visible_at, kind, payload) VALUES (0, 0, ?, '{}')"


# -- the idle poll ----------------------------------------------------------------


def test_any_ready_sees_what_a_claim_would_find(q, clock):
    assert not q.any_ready()
    q.enqueue("t", {}, delay=10)
    assert not q.any_ready()  # not yet visible
    clock.advance(10)
    assert q.any_ready()
    q.claim("w")
    assert not q.any_ready()  # leased, lease still running
    clock.advance(31)
    assert q.any_ready()  # the lease ran out: claimable again


def test_any_ready_is_true_for_an_expired_last_attempt_to_retire(make_queue, clock):
    q = make_queue(max_attempts=1)
    q.enqueue("t", {})
    q.claim("w")
    clock.advance(31)
    assert q.any_ready()
    assert q.claim_next("w") is None
    assert state(q, 1)[0] == "dead"
    assert not q.any_ready()


def test_the_idle_poll_takes_no_write_lock(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path, timeout=0)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(RAW_INSERT, ("t",))
        assert not q.any_ready()  # reads the last commit while the writer holds the lock
        assert q.claim("w") == []  # claim() looks before it locks: an empty queue needs no lock
        writer.execute("COMMIT")
        assert q.any_ready()
        writer.execute("BEGIN IMMEDIATE")
        with pytest.raises(QueueBusy):
            q.claim("w")  # a ready job: now the claim needs the write lock, which the writer holds
        writer.execute("ROLLBACK")
        # and the poll leaves no read transaction behind: a checkpoint can reset the WAL
        busy, _, _ = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
        assert not q.db.in_transaction
    finally:
        writer.close()
        q.close()


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("statement", "indexes"),
    [
        (sql.READY_PROBE, {"jobs_ready"}),
        (sql.RETIRE_EXHAUSTED, {"jobs_exhausted"}),
        (sql.READY_ROWS, {"jobs_ready", "jobs_exhausted"}),  # the rows, and whether to retire
        (sql.claim_ids(10), set()),  # by primary key
        (sql.CLAIM_ID_RUN, set()),
        (sql.COMPLETE_ID_RUN, set()),
    ],
)
def test_fast_path_statements_read_only_their_partial_indexes(q, statement, indexes):
    params = {"now": 1.0, "lease_end": 2.0, "token": "t", "worker": "w", "limit": 1, "reason": "r"}
    args = {
        sql.READY_PROBE: (1.0,),
        sql.RETIRE_EXHAUSTED: {"now": 1.0, "reason": "r"},
        sql.claim_ids(10): (2.0, "t", "w", 1.0, *range(10)),
        sql.CLAIM_ID_RUN: (2.0, "t", "w", 1.0, 1, 10),
        sql.COMPLETE_ID_RUN: (2.0, 1, 10, "t"),
    }.get(statement, params)
    plan = [r[3] for r in q.db.execute("EXPLAIN QUERY PLAN " + statement, args)]
    for index in indexes:
        assert any(f"USING INDEX {index}" in line for line in plan), plan
    for line in plan:
        if line.startswith(("SCAN jobs", "SEARCH jobs")):
            assert "INDEX jobs_" in line or "PRIMARY KEY" in line, f"{line!r} reads the whole table"


@pytest.mark.sqlite_only
def test_a_batch_claim_returns_exactly_the_rows_it_leased(q, clock):
    """The batch claim reads the rows, then leases them without RETURNING: what it hands
    out must be what the file now holds, attempts and deadline included."""
    q.enqueue_many("t", [{"n": n} for n in range(4)])
    jobs = q.claim_batch("w", 3)
    rows = {
        r[0]: r[1:]
        for r in q.db.execute("SELECT id, state, attempts, visible_at, lease_token, worker FROM jobs")
    }
    assert [j.id for j in jobs] == [1, 2, 3]
    for job in jobs:
        assert rows[job.id] == ("running", job.attempts, job.lease_expires_at, job.lease_token, "w")
        assert job.attempts == 1 and job.lease_expires_at == clock.now + 30
    assert rows[4][:2] == ("queued", 0)


@pytest.mark.sqlite_only
def test_a_row_something_else_keeps_from_being_leased_is_not_handed_out(q):
    """Only a trigger beside labqueue can stop a row READY_ROWS read under the write lock
    from being leased; the claim then hands out the rows that hold its token, no others."""
    q.enqueue_many("t", [{"n": n} for n in range(3)])
    q.db.execute(
        "CREATE TRIGGER keep_two BEFORE UPDATE OF lease_token ON jobs WHEN OLD.id = 2 "
        "BEGIN SELECT RAISE(IGNORE); END"
    )
    jobs = q.claim_batch("w", 3)
    assert [j.id for j in jobs] == [1, 3]
    assert state(q, 2)[0] == "queued"
    assert {state(q, j.id)[0] for j in jobs} == {"running"}


@pytest.mark.parametrize(
    ("ids", "run"),
    [
        ([4, 5, 6], (4, 6)),
        ([1, 2], (1, 2)),
        ([7], None),  # one id: a plain seek already
        ([], None),
        ([1, 3, 4], None),  # a gap
        ([3, 2, 1], None),  # not ascending
        ([1, 2, 2, 3], None),  # a job reported twice
        ([1, 2.5], None),
        ([1.0, 2.0], None),
        (["1", "2"], None),
        ([True, 2], None),
    ],
)
def test_id_run_names_only_exactly_consecutive_ids(ids, run):
    assert sql.id_run(ids) == run


@pytest.mark.sqlite_only
def test_a_batch_claim_and_its_completion_touch_exactly_their_ids_with_or_without_a_run(q, clock):
    """Consecutive ids go in as a range, others as a list: either way exactly those rows."""
    q.enqueue_many("t", [{"n": n} for n in range(6)])
    q.db.execute("UPDATE jobs SET visible_at = visible_at + 100 WHERE id = 2")  # not ready yet
    first = q.claim_batch("w", 3)
    assert [j.id for j in first] == [1, 3, 4]  # a list: 2 is not ready
    assert state(q, 2)[0] == "queued"
    second = q.claim_batch("w", 2)
    assert [j.id for j in second] == [5, 6]  # a run
    outcomes, _ = q.settle([Finished(first[0]), Finished(first[2])])  # 1 and 4, not 3
    assert outcomes == ["done", "done"]
    outcomes, _ = q.settle([Finished(second[0])])  # 5 alone: its batch-mate 6 keeps running
    assert outcomes == ["done"]
    assert [state(q, i)[0] for i in range(1, 7)] == ["done", "queued", "running", "done", "done", "running"]
    outcomes, _ = q.settle([Finished(first[1]), Finished(second[1])])  # 3 and 6: two tokens
    assert outcomes == ["done", "done"]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("consecutive", [True, False], ids=["range", "list"])
def test_a_batch_with_a_job_no_longer_ours_completes_exactly_the_others(q, consecutive):
    """Plain completions, one fenced statement per claim: of a batch whose jobs were
    cancelled or taken over meanwhile, exactly the others are done. The job that changed
    hands keeps its new lease and the cancelled one stays cancelled."""
    q.enqueue_many("t", [{}] * 5)
    if not consecutive:
        q.db.execute("UPDATE jobs SET visible_at = visible_at + 100 WHERE id = 2")
    batch = q.claim_batch("a", 4)
    ids = [j.id for j in batch]
    q.cancel(ids[1])
    q.db.execute("UPDATE jobs SET visible_at = 0 WHERE id = ?", (ids[2],))  # its lease alone ran out
    (taken,) = q.claim_batch("b", 1)
    assert taken.id == ids[2]
    before = rows(q)
    outcomes, _ = q.settle([Finished(j) for j in batch] + [Finished(batch[0])])  # one reported twice
    assert outcomes == ["done", "cancelled", "lost", "done", "lost"]
    assert [q.job(i).state for i in ids] == ["done", "cancelled", "running", "done"]
    assert q.job(ids[2]).worker == "b" and q.job(ids[2]).lease_token == taken.lease_token
    after = {row[0]: row for row in rows(q)}
    for row in before:  # every row but the two completed is as it was
        if row[0] not in (ids[0], ids[3]):
            assert after[row[0]] == row


@pytest.mark.sqlite_only
def test_the_lease_statement_builds_no_temporary_index_per_row(tmp_path):
    """Version 4's states CHECK is comparisons: SQLite codes an IN list of more than two
    constants in a CHECK as a temporary index built again for every row an UPDATE writes
    (version 3's table shows it), and the worker's lease writes ten rows a batch."""

    def ephemeral(table_sql: str) -> int:
        db = sqlite3.connect(":memory:")
        db.executescript(table_sql + sql.INDEXES)
        ops = [row[1] for row in db.execute("EXPLAIN " + sql.CLAIM_ID_RUN, (2.0, "t", "w", 1.0, 1, 10))]
        return ops.count("OpenEphemeral")

    assert ephemeral(sql.TABLE) == 0
    assert (
        ephemeral(sql.TABLE_TEMPLATE.format(name="jobs", extra=sql.RESULT_COLUMNS, states=sql.STATES_IN_LIST))
        == 1
    )


# -- claim_next -------------------------------------------------------------------


def test_claim_next_retires_every_expired_last_attempt_and_claims_a_live_job(make_queue, clock):
    q = make_queue(max_attempts=1)
    for n in range(3):
        q.enqueue("t", {"n": n})
    q.claim("a", limit=2)  # jobs 1 and 2 on their last attempt
    clock.advance(31)
    q.db.execute("UPDATE jobs SET last_error = 'TimeoutError: slow' WHERE id = 2")
    job = q.claim_next("b")
    assert job is not None and job.id == 3 and job.attempts == 1 and job.payload == {"n": 2}
    assert q.db.execute("SELECT last_error FROM jobs WHERE id = 1").fetchone()[0] == sql.LAST_ATTEMPT_EXPIRED
    assert q.db.execute("SELECT last_error FROM jobs WHERE id = 2").fetchone()[0] == (
        f"{sql.LAST_ATTEMPT_EXPIRED}; previous error: TimeoutError: slow"
    )
    assert [state(q, i)[0] for i in (1, 2, 3)] == ["dead", "dead", "running"]


def test_claim_next_gives_a_fresh_token_and_hides_the_job_for_its_lease(q, clock):
    q.enqueue("t", {})
    first = q.claim_next("a")
    assert first is not None and first.lease_expires_at == clock.now + 30
    assert q.claim_next("b") is None
    clock.advance(30)
    second = q.claim_next("b")
    assert second is not None and second.id == first.id
    assert second.lease_token != first.lease_token and second.attempts == 2
    assert not q.complete(first) and q.complete(second)


# -- complete_and_claim -----------------------------------------------------------


def first_attempt_of_job_1(db) -> None:
    """Job 1's ledger row, in SQL both backends read alike (no parameters)."""
    db.execute(LEDGER_TABLE)
    db.execute("INSERT INTO ledger (job_id, attempt) VALUES (1, 1)")


def test_complete_and_claim_commits_the_effect_with_the_completion(q):
    q.db.execute(LEDGER_TABLE)
    q.enqueue_many("t", [{}, {}])
    job = q.claim_next("w")
    accepted, nxt = q.complete_and_claim(job, "w", effect=first_attempt_of_job_1)
    assert accepted and nxt is not None and nxt.id == 2
    assert [tuple(r) for r in q.db.execute("SELECT job_id, attempt FROM ledger")] == [(1, 1)]
    assert state(q, 1)[0] == "done" and state(q, 2)[0] == "running"


def test_a_stale_complete_and_claim_runs_no_effect_but_still_claims(q, clock):
    q.enqueue("t", {})
    stale = q.claim_next("a")
    clock.advance(31)
    assert q.claim_next("b").id == 1  # takes job 1 over
    q.enqueue("t", {})
    ran = []
    accepted, nxt = q.complete_and_claim(stale, "a", effect=lambda db: ran.append(1))
    assert not accepted and not ran
    assert nxt is not None and nxt.id == 2 and state(q, 1) == ("running", 2, "b")


def test_an_effect_that_raises_rolls_back_completion_and_claim_together(q):
    q.enqueue_many("t", [{}, {}])
    job = q.claim_next("w")

    def effect(db):
        db.execute("INSERT INTO jobs (created_at, visible_at, kind, payload) VALUES (0, 0, 'x', '{}')")
        raise RuntimeError("ledger is down")

    with pytest.raises(RuntimeError, match="ledger is down"):
        q.complete_and_claim(job, "w", effect=effect)
    assert state(q, 1) == ("running", 1, "w") and state(q, 2) == ("queued", 0, None)
    assert len(rows(q)) == 2
    assert q.complete(job)  # the lease is still ours


def test_a_late_completion_is_accepted_when_nobody_took_over(q, clock):
    q.enqueue("t", {})
    job = q.claim_next("w")
    clock.advance(45)
    assert q.complete_and_claim(job, "w") == (True, None)
    assert state(q, 1)[0] == "done"


# -- the same history through both paths -------------------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from([0.0, 5.0, 50.0]), st.integers(1, 3)),
        st.tuples(st.just("advance"), st.sampled_from([1.0, 10.0, 31.0, 100.0])),
        st.tuples(st.just("claim"), st.sampled_from(["a", "b"])),
        st.tuples(st.sampled_from(["complete", "complete_claim", "fail", "heartbeat"]), st.integers(0, 5)),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_the_fast_path_leaves_the_same_table_as_claim_and_complete(steps):
    """Queue `slow` uses claim() and complete(); queue `fast` uses claim_next() and
    complete_and_claim(). Same clock readings, same rng: the same rows after each step."""
    with tempfile.TemporaryDirectory() as folder:
        clocks = FakeClock(1000.0), FakeClock(1000.0)
        slow, fast = (
            JobQueue(Path(folder) / f"{name}.db", lease_seconds=30, max_attempts=3, clock=c, rng=lambda: 0.5)
            for name, c in zip(("slow", "fast"), clocks, strict=True)
        )
        held: list[tuple] = []  # (slow's Job, fast's Job) for the same job id
        try:
            for step in steps:
                op = step[0]
                if op == "enqueue":
                    for q in (slow, fast):
                        q.enqueue("t", {}, delay=step[1], max_attempts=step[2])
                elif op == "advance":
                    for c in clocks:
                        c.advance(step[1])
                elif op == "claim":
                    got = slow.claim(step[1])
                    nxt = fast.claim_next(step[1])
                    assert [j.id for j in got] == ([nxt.id] if nxt else [])
                    if nxt:
                        held.append((got[0], nxt))
                elif held:
                    a, b = held[step[1] % len(held)]
                    if op == "complete":
                        assert slow.complete(a) == fast.complete(b)
                    elif op == "fail":
                        assert slow.fail(a, "boom") == fast.fail(b, "boom")
                    elif op == "heartbeat":
                        assert slow.heartbeat(a) == fast.heartbeat(b)
                    else:
                        accepted = slow.complete(a)
                        got = slow.claim("a")
                        accepted_fast, nxt = fast.complete_and_claim(b, "a")
                        assert accepted == accepted_fast
                        assert [j.id for j in got] == ([nxt.id] if nxt else [])
                        if nxt:
                            held.append((got[0], nxt))
                assert rows(slow) == rows(fast), step
                assert slow.stats() == fast.stats()
        finally:
            slow.close()
            fast.close()


# -- the worker loop ----------------------------------------------------------------


def test_an_idle_worker_leaves_without_touching_the_write_lock(tmp_path):
    path = tmp_path / "idle.db"
    JobQueue(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # held for the whole run
        naps: list[float] = []
        assert run(str(path), "w", 30, idle_exit=0, sleep=naps.append) == 0
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_stop_during_a_job_completes_it_without_claiming_the_next(tmp_path):
    path = tmp_path / "stop.db"
    with JobQueue(path) as q:
        q.enqueue_many("stopper", [{}, {}])
    stop = StopFlag()

    def stopper(job, q):
        stop.requested = True  # as the first SIGTERM would, while the job runs

    assert run(str(path), "w", 30, idle_exit=0, stop=stop, handlers={"stopper": stopper}) == 1
    with JobQueue(path) as q:
        assert state(q, 1) == ("done", 1, "w") and state(q, 2) == ("queued", 0, None)


def test_max_jobs_claims_no_job_beyond_the_last(tmp_path):
    path = tmp_path / "max.db"
    with JobQueue(path) as q:
        q.enqueue_many("noop", [{}] * 3)
    assert run(str(path), "w", 30, idle_exit=0, max_jobs=2, handlers=HANDLERS) == 2
    with JobQueue(path) as q:
        assert [state(q, i)[0] for i in (1, 2, 3)] == ["done", "done", "queued"]
        assert state(q, 3)[1] == 0


def test_the_report_of_a_raising_handler_fails_it_and_claims_the_next_in_one_transaction(q):
    q.enqueue_many("bad", [{}, {}])
    job = q.claim_next("w")
    ran, nxt = work_batch(q, [job], HANDLERS, claim_for=lambda ran: ("w", 1), stop=StopFlag())
    assert ran == 1 and [j.id for j in nxt] == [2]
    assert state(q, 1)[:2] == ("queued", 1) and state(q, 2) == ("running", 1, "w")
