"""The queue's rules, one test each, driven by a FakeClock and a pinned rng.

Every test takes its queue from the `make_queue` fixture, so another backend
runs the very same tests by adding a factory in conftest.py. The fixture's clock
starts at t=1000 with 30-second leases, three attempts and retry ceilings of
2, 4, 8 ... seconds (the rng always draws its maximum)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from labqueue import SCHEMA, InvalidArgument, Job, JobQueue
from labqueue.drivers.sqlite import sql
from labqueue.drivers.sqlite.sql import INDEXES, TABLE

T0 = 1000.0
LEASE = 30.0
RETIRED = "lease expired on the last attempt"


# -- helpers: one job, one claim, one look at its row --------------------------


def add(q: JobQueue, payload: object = None, **options) -> int | None:
    """Enqueue one job of a neutral kind."""
    return q.enqueue("task", {} if payload is None else payload, **options)


def take(q: JobQueue, worker: str = "w") -> Job:
    """Claim exactly one job; fails the test if the claim hands out none or several."""
    (job,) = q.claim(worker)
    return job


def fields(q: JobQueue, *names: str, job_id: int = 1) -> tuple:
    """The named columns of one job's row, in the order asked for."""
    record = q.job(job_id)
    return tuple(getattr(record, name) for name in names)


def field(q: JobQueue, name: str, job_id: int = 1):
    return fields(q, name, job_id=job_id)[0]


def snapshot(q: JobQueue, job_id: int = 1) -> tuple:
    """Every column of the row: for asserting that a refused report changed nothing."""
    return fields(q, *sql.COLUMNS, job_id=job_id)


def states(q: JobQueue) -> list[str]:
    return [record.state for record in q.jobs()]


def in_transaction(db) -> bool:
    """sqlite3's in_transaction, or psycopg's transaction status."""
    info = getattr(db, "info", None)
    return db.in_transaction if info is None else info.transaction_status.name != "IDLE"


def handover(q: JobQueue, clock) -> tuple[Job, Job]:
    """A "slow" holder stalls one second past its lease and a "fresh" worker claims
    the job. Returns (stale claim, current claim)."""
    add(q)
    stale = take(q, "slow")
    clock.advance(LEASE + 1)
    return stale, take(q, "fresh")


def fail_every_attempt(q: JobQueue, clock, attempts: int = 3) -> list[str | None]:
    """Claim and fail the only job `attempts` times, waiting out each retry."""
    outcomes = []
    for _ in range(attempts):
        job = take(q)
        outcomes.append(q.fail(job, f"boom {job.attempts}"))
        clock.advance(100)
    return outcomes


# -- schema -------------------------------------------------------------------


def test_schema_is_importable_and_complete():
    assert SCHEMA == TABLE + INDEXES + sql.KEY_HELD_INDEX + sql.ARCHIVE_CURRENT + sql.PAUSES
    for name in sql.COLUMNS:
        assert f"    {name} " in TABLE


def test_state_is_a_closed_set(q):
    add(q)
    with pytest.raises(Exception, match=r"CHECK constraint failed|violates check constraint"):
        q.db.execute("UPDATE jobs SET state = 'paused' WHERE id = 1")


@pytest.mark.sqlite_only
def test_the_partial_indexes_exist(q):
    names = {name for (name,) in q.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_ready", "jobs_queue_ready", "jobs_exhausted", "jobs_dead"} <= names


def test_reopening_an_existing_queue_keeps_its_jobs(make_queue):
    first = make_queue()
    add(first, {"n": 1})
    first.close()
    assert make_queue().stats()["queued"] == 1


# -- enqueue ------------------------------------------------------------------


def test_enqueue_stores_the_payload_and_returns_the_id(q):
    assert q.enqueue("email", {"to": "ada", "n": [1, 2]}) == 1
    job = take(q)
    assert (job.kind, job.payload) == ("email", {"to": "ada", "n": [1, 2]})


def test_enqueue_uses_the_queue_default_or_its_own_max_attempts(q):
    add(q)
    add(q, max_attempts=7)
    assert [j.max_attempts for j in q.claim("batcher", limit=2)] == [3, 7]


def test_a_repeated_dedupe_key_is_a_no_op(q, clock):
    assert add(q, {"v": 1}, dedupe_key="k") == 1
    before = snapshot(q)
    clock.advance(5)
    assert add(q, {"v": 2}, delay=50, dedupe_key="k") is None
    assert snapshot(q) == before
    assert states(q) == ["queued"]


def test_enqueue_many_adds_every_job_in_one_go(q):
    assert q.enqueue_many("task", ({"n": n} for n in range(4))) == 4
    assert [j.payload["n"] for j in q.claim("batcher", limit=10)] == [0, 1, 2, 3]


# -- claim ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delays", "served"),
    [
        pytest.param([0, 0, 0], [1, 2, 3], id="same-time-oldest-id-first"),
        pytest.param([5, 0], [2, 1], id="earlier-visible_at-first"),
        pytest.param([3, 3, 1], [3, 1, 2], id="visible_at-then-id"),
    ],
)
def test_claims_follow_visible_at_then_id(q, clock, delays, served):
    ids = [add(q, {"n": n}, delay=d) for n, d in enumerate(delays)]
    assert ids == list(range(1, len(delays) + 1))
    clock.advance(max(delays) + 1)
    assert [take(q).id for _ in delays] == served


def test_a_batch_takes_at_most_limit_jobs_and_lists_them_by_id(q, clock):
    for n in range(5):
        add(q, {"n": n}, delay=5 - n)  # later ids are ready earlier
    clock.advance(10)
    first_two = [j.id for j in q.claim("batcher", limit=2)]
    rest = [j.id for j in q.claim("batcher", limit=10)]
    assert (first_two, rest) == ([4, 5], [1, 2, 3])


def test_batch_claim_shares_one_token_and_one_deadline(q):
    q.enqueue_many("task", [{}, {}])
    one, two = q.claim("batcher", limit=2)
    assert one.lease_token == two.lease_token
    assert one.lease_expires_at == two.lease_expires_at == T0 + LEASE


def test_claim_on_an_empty_queue_returns_nothing(q):
    assert q.claim("w") == []


def test_a_delayed_job_is_invisible_until_its_delay_has_passed(q, clock):
    add(q, delay=60)
    seen = []
    for step in (0.0, 59.9, 0.1):
        clock.advance(step)
        seen.append(len(q.claim("w")))
    assert seen == [0, 0, 1]


def test_claiming_records_holder_token_deadline_and_attempt(q):
    add(q)
    job = take(q, "w1")
    assert job.attempts == 1
    assert job.lease_expires_at == T0 + LEASE
    stored = fields(q, "worker", "attempts", "lease_token", "state")
    assert stored == ("w1", 1, job.lease_token, "running")


def test_a_held_job_is_invisible_until_its_deadline(q, clock):
    add(q)
    holder = take(q, "holder")
    clock.now = holder.lease_expires_at - 0.1  # a tenth of a second before the deadline
    assert q.claim("rival") == []
    clock.now = holder.lease_expires_at  # at the deadline the job is free to claim
    assert take(q, "rival").id == holder.id


def test_every_claim_gets_a_fresh_random_token(q, clock):
    add(q)
    tokens = set()
    for _ in range(3):
        tokens.add(take(q).lease_token)
        clock.advance(LEASE + 1)
    assert len(tokens) == 3
    assert all(len(t) == 32 for t in tokens)


def test_a_takeover_is_a_new_attempt_under_a_new_token(q, clock):
    stale, current = handover(q, clock)
    assert [stale.attempts, current.attempts] == [1, 2]
    assert stale.lease_token != current.lease_token
    assert field(q, "worker") == "fresh"


def test_claim_is_one_atomic_statement():
    """Choosing the rows and marking them is one UPDATE with a sub-select: SQLite runs
    one writer at a time, so the pair cannot interleave (notebook 01 races the alternative)."""
    assert sql.CLAIM.strip().startswith("UPDATE jobs")
    assert "WHERE id IN (SELECT id FROM jobs" in sql.CLAIM
    assert "RETURNING" in sql.CLAIM


# -- complete -------------------------------------------------------------------


def test_complete_marks_done_and_clears_the_token(q, clock):
    add(q)
    job = take(q)
    clock.advance(3)
    assert q.complete(job) is True
    assert fields(q, "state", "lease_token", "finished_at") == ("done", None, T0 + 3)
    assert q.complete(job) is False  # a second report of the same claim is refused


def test_an_overdue_holder_may_finish_if_nobody_claimed_the_job(q, clock):
    add(q)
    overdue = take(q)
    clock.advance(LEASE + 15)  # well past the deadline, but nobody else asked for work
    assert q.complete(overdue) is True
    assert states(q) == ["done"]


# A replaced holder's report is refused and changes nothing; the current holder's
# identical report is accepted. (report, refused result, accepted result)
REPORTS: dict[str, tuple[Callable[[JobQueue, Job], object], object, object]] = {
    "complete": (lambda q, job: q.complete(job), False, True),
    "fail": (lambda q, job: q.fail(job, "TimeoutError"), None, "queued"),
    "heartbeat": (lambda q, job: q.heartbeat(job), False, True),
}


@pytest.mark.parametrize("report", sorted(REPORTS))
def test_a_replaced_holder_cannot_report(q, clock, report):
    stale, current = handover(q, clock)
    send, refused, accepted = REPORTS[report]
    before = snapshot(q)
    assert send(q, stale) is refused
    assert snapshot(q) == before  # still running, same deadline, same holder
    assert send(q, current) == accepted


def test_done_is_final(q, clock):
    add(q)
    job = take(q)
    q.complete(job)
    clock.advance(1_000_000)
    assert q.claim("w") == []
    assert q.fail(job, "late") is None
    assert q.heartbeat(job) is False


# -- effects ----------------------------------------------------------------------


@pytest.fixture
def audit(q) -> Callable[[], int]:
    """A table the effects write to; returns a function that counts its rows."""
    q.db.execute("CREATE TABLE audit (entry INTEGER NOT NULL)")
    return lambda: q.db.execute("SELECT COUNT(*) FROM audit").fetchone()[0]


def write_entry(db) -> None:
    db.execute("INSERT INTO audit (entry) VALUES (1)")  # no parameter: the same SQL in both dialects


def test_the_effect_runs_inside_the_completing_transaction(q, audit):
    add(q)
    job = take(q)
    seen_in_transaction = []

    def effect(db):
        seen_in_transaction.append(in_transaction(db))
        write_entry(db)

    assert q.complete(job, effect=effect) is True
    assert (seen_in_transaction, audit()) == ([True], 1)


def test_a_replaced_holder_s_effect_never_runs(q, clock, audit):
    stale, _ = handover(q, clock)
    calls = []
    assert q.complete(stale, effect=calls.append) is False
    assert calls == []
    assert audit() == 0


def test_an_effect_that_raises_undoes_its_writes_and_the_job_stays_held(q, audit):
    add(q)
    job = take(q)

    def half_done(db):
        write_entry(db)
        raise RuntimeError("audit service offline")

    with pytest.raises(RuntimeError, match="audit service offline"):
        q.complete(job, effect=half_done)
    assert audit() == 0
    assert fields(q, "state", "lease_token") == ("running", job.lease_token)
    assert not in_transaction(q.db)
    assert q.fail(job, "RuntimeError: audit service offline") == "queued"


# -- fail, backoff, dead letters -----------------------------------------------


def test_a_retry_on_the_top_draw_waits_its_ceiling(q, clock):
    """The rng draws its maximum, so each retry waits its full ceiling: 2 s, then 4 s."""
    add(q)
    for ceiling in (2.0, 4.0):
        job = take(q)
        assert q.fail(job, "boom") == "queued"
        assert fields(q, "state", "lease_token", "last_error") == ("queued", None, "boom")
        assert field(q, "visible_at") == clock.now + ceiling
        clock.advance(ceiling)


def test_backoff_is_full_jitter_under_a_capped_ceiling(make_queue, clock):
    draws = iter([0.5, 0.25, 1.0, 0.0, 0.75, 1.0, 1.0])
    q = make_queue(max_attempts=30, rng=lambda: next(draws))
    add(q)
    waits = []
    while len(waits) < 7:
        q.fail(take(q), "boom")
        waits.append(field(q, "visible_at") - clock.now)
        clock.advance(100)
    # ceilings 2, 4, 8, 16, 32, 60 (capped), 60, each times its draw
    assert waits == [1.0, 1.0, 8.0, 0.0, 24.0, 60.0, 60.0]


def test_backoff_delay_never_exceeds_the_cap_or_goes_negative(make_queue):
    rng = random.Random(3)
    q = make_queue(backoff_base=0.5, backoff_cap=10.0, rng=rng.random)
    for attempts in range(1, 40):
        assert 0.0 <= q.backoff_delay(attempts) <= min(10.0, 0.5 * 2 ** (attempts - 1))


def test_the_third_failure_dead_letters_the_job(q, clock):
    add(q)
    assert fail_every_attempt(q, clock) == ["queued", "queued", "dead"]
    assert fields(q, "attempts", "state", "lease_token", "last_error") == (3, "dead", None, "boom 3")
    assert field(q, "finished_at") == T0 + 200
    assert q.claim("w") == []


def test_fail_without_retry_is_dead_at_once(q):
    add(q)
    job = take(q)
    assert q.fail(job, "UnknownJobKind: nope", retry=False) == "dead"
    assert fields(q, "state", "attempts") == ("dead", 1)


def test_fail_keeps_at_most_500_characters_of_the_error(q):
    add(q)
    q.fail(take(q), "x" * 2000)
    assert len(field(q, "last_error")) == 500


def test_a_late_failure_cannot_reopen_a_finished_job(q, clock):
    stale, current = handover(q, clock)
    assert q.complete(current) is True
    assert q.fail(stale, "TimeoutError") is None
    assert states(q) == ["done"]
    assert q.claim("anyone") == []


def test_attempts_are_counted_at_claim_so_crashes_use_them_up(q, clock):
    add(q)
    counted = []
    for _ in range(3):
        counted.append(take(q).attempts)  # and the worker dies without a word
        clock.advance(LEASE + 1)
    assert counted == [1, 2, 3]
    assert q.claim("next") == []  # the fourth claim retires the job instead
    assert fields(q, "attempts", "state", "last_error") == (3, "dead", RETIRED)
    assert fields(q, "lease_token", "finished_at") == (None, T0 + 3 * (LEASE + 1))


def test_expired_last_lease_keeps_the_earlier_error_as_context(q, clock):
    add(q)
    q.fail(take(q), "TimeoutError: slow upstream")
    clock.advance(100)
    for _ in range(2):
        take(q)  # attempts 2 and 3 crash
        clock.advance(LEASE + 1)
    q.claim("w")
    assert field(q, "last_error") == f"{RETIRED}; previous error: TimeoutError: slow upstream"


def test_a_live_last_lease_is_not_retired(q, clock):
    add(q)
    for _ in range(2):
        take(q)
        clock.advance(LEASE + 1)
    last = take(q)  # attempt 3 of 3, its lease runs until now + 30
    clock.advance(LEASE - 1)
    assert q.claim("rival") == []
    assert states(q) == ["running"]
    assert q.complete(last) is True


# -- heartbeat ------------------------------------------------------------------


def test_a_heartbeat_moves_the_deadline_one_lease_past_now(q, clock):
    add(q)
    job = take(q, "holder")
    clock.advance(20)
    assert q.heartbeat(job) is True
    renewed = T0 + 20 + LEASE
    assert field(q, "visible_at") == renewed
    clock.now = renewed - 1
    assert q.claim("rival") == []
    clock.now = renewed
    assert take(q, "rival").attempts == 2


# -- requeue_dead and stats -------------------------------------------------------


def test_requeued_dead_jobs_start_over_at_attempt_one(q, clock):
    add(q)
    fail_every_attempt(q, clock)
    assert q.requeue_dead() == [1]
    assert fields(q, "state", "attempts", "finished_at", "visible_at") == ("queued", 0, None, clock.now)
    assert take(q).attempts == 1


def test_requeue_dead_by_id_touches_only_those(q, clock):
    q.enqueue_many("task", [{}] * 3)
    for _ in range(3):
        for job in q.claim("batcher", limit=3):
            q.fail(job, "boom")
        clock.advance(100)
    assert q.stats()["dead"] == 3
    assert q.requeue_dead([3, 1, 99]) == [1, 3]
    assert q.requeue_dead([]) == []
    assert states(q) == ["queued", "dead", "queued"]


def test_requeue_dead_leaves_live_and_done_jobs_alone(q):
    q.enqueue_many("task", [{}, {}])
    q.complete(take(q))
    assert q.requeue_dead() == []
    assert q.requeue_dead([1, 2]) == []
    assert states(q) == ["done", "queued"]


def test_stats_counts_an_expired_lease_as_ready(q, clock):
    """Five jobs: one done, one whose holder vanished, two waiting, one for later."""
    q.enqueue_many("task", [{"n": n} for n in range(4)])
    add(q, delay=600)
    q.complete(take(q))
    take(q)  # job 2's holder never reports back
    clock.advance(LEASE + 1)
    assert q.stats() == {
        "queued": 3,  # jobs 3 and 4, and the delayed job 5
        "running": 1,  # job 2, whose lease has ended
        "ready_now": 3,  # jobs 2, 3 and 4
        "oldest_ready_age_s": LEASE + 1,
        "dead": 0,
    }


def test_stats_of_an_empty_queue(q):
    assert q.stats() == {"queued": 0, "running": 0, "ready_now": 0, "oldest_ready_age_s": 0.0, "dead": 0}


@pytest.mark.sqlite_only
@pytest.mark.parametrize("statement", sql.STATS_QUERIES)
def test_stats_never_scans_finished_rows(q, statement):
    plan = [r[3] for r in q.db.execute("EXPLAIN QUERY PLAN " + statement, (1.0,) * statement.count("?"))]
    assert plan, statement
    for line in plan:
        if line.startswith(("SCAN jobs", "SEARCH jobs")):
            assert "INDEX jobs_" in line, f"{line!r} reads the whole table"


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("statement", "index"),
    [(sql.CLAIM, "jobs_ready"), (sql.RETIRE_EXHAUSTED, "jobs_exhausted")],
)
def test_claim_path_uses_its_partial_index(q, statement, index):
    params = {"now": 1.0, "lease_end": 2.0, "token": "t", "worker": "w", "limit": 1, "reason": "r"}
    plan = " | ".join(r[3] for r in q.db.execute("EXPLAIN QUERY PLAN " + statement, params))
    assert f"USING INDEX {index}" in plan
    assert "SCAN jobs" not in plan.replace(f"SCAN jobs USING INDEX {index}", "")


# -- connection and transactions ------------------------------------------------


@pytest.mark.sqlite_only
def test_queue_is_a_context_manager_and_uses_wal(make_queue):
    q = make_queue()
    with q as same:
        assert same is q
        assert q.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(Exception, match="closed"):
        q.db.execute("SELECT 1")


@pytest.mark.sqlite_only
def test_rows_come_back_as_sqlite_rows(q):
    add(q)
    assert q.db.execute("SELECT kind FROM jobs").fetchone()["kind"] == "task"


@pytest.mark.sqlite_only
def test_synchronous_setting_is_applied(make_queue):
    assert make_queue(synchronous="full").db.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert make_queue().db.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_a_crash_inside_a_transaction_rolls_it_back(q):
    add(q)
    job = take(q)

    def interrupted(db):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        q.complete(job, effect=interrupted)
    assert states(q) == ["running"]
    assert not in_transaction(q.db)


def test_a_second_connection_sees_committed_work(make_queue):
    producer, consumer = make_queue(), make_queue()
    add(producer, {"n": 1})
    job = take(consumer)
    assert consumer.complete(job)
    assert producer.stats()["queued"] == 0


# -- reading jobs back ---------------------------------------------------------------------


def test_job_reads_one_stored_row_and_none_for_a_missing_id(q, clock):
    job_id = q.enqueue("email", {"to": "ada"}, dedupe_key="welcome:ada")
    record = q.job(job_id)
    assert (record.id, record.kind, record.state, record.attempts) == (job_id, "email", "queued", 0)
    assert json.loads(record.payload) == {"to": "ada"}
    assert (record.dedupe_key, record.created_at, record.visible_at) == ("welcome:ada", clock(), clock())
    assert q.job(job_id + 1) is None


def test_jobs_filters_by_state_and_kind_in_id_order(q):
    q.enqueue_many("a", [{}, {}, {}])
    q.enqueue("b", {})
    first, _ = q.claim("w", limit=2)
    q.complete(first)
    assert [r.id for r in q.jobs()] == [1, 2, 3, 4]
    assert [r.id for r in q.jobs(state="queued")] == [3, 4]
    assert [r.id for r in q.jobs(state=("done", "running"))] == [1, 2]
    assert [r.id for r in q.jobs(state="queued", kind="a")] == [3]
    assert [r.id for r in q.jobs(limit=2)] == [1, 2]
    assert q.counts() == {"queued": 2, "running": 1, "done": 1, "dead": 0, "cancelled": 0}


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.job("1"),
        lambda q: q.jobs(state="finished"),
        lambda q: q.jobs(state=[]),
        lambda q: q.jobs(kind=""),
        lambda q: q.jobs(limit=-1),
    ],
)
def test_reading_back_refuses_bad_filters_by_name(q, call):
    with pytest.raises(InvalidArgument):
        call(q)


# -- what pools and metrics ask: put_back, note_crash, finished_within, latest_jobs ----------
# put_back: a kind this worker cannot run; note_crash: a supervisor's note on a dead worker's
# jobs; finished_within: metrics' throughput; latest_jobs: newest first.


def test_put_back_returns_the_attempt_hides_the_job_and_says_why(q, clock):
    q.enqueue("mystery", {})
    (job,) = q.claim("w1")
    assert q.put_back([job], 5.0, "no handler for kind 'mystery' on worker w1") == 1
    record = q.job(job.id)
    assert (record.state, record.attempts, record.worker) == ("queued", 0, None)
    assert record.last_error == "no handler for kind 'mystery' on worker w1"
    assert q.claim("w2") == []  # hidden for the delay
    clock.advance(5.0)
    (again,) = q.claim("w2")
    assert (again.id, again.attempts) == (job.id, 1)


def test_put_back_is_fenced_by_the_lease(q, clock):
    q.enqueue("mystery", {})
    (job,) = q.claim("w1")
    clock.advance(31)  # the lease ran out; another worker took the job
    (taken,) = q.claim("w2")
    assert q.put_back([job], 5.0, "too late") == 0
    assert (q.job(job.id).state, q.job(job.id).worker) == ("running", "w2")
    with pytest.raises(InvalidArgument, match="delay"):
        q.put_back([taken], -1, "x")


def test_note_crash_touches_only_rows_still_running_under_that_worker(q):
    for n in range(3):
        q.enqueue("t", {"n": n})
    a, b = q.claim("pool/1", limit=2)
    (c,) = q.claim("pool/2")
    assert q.note_crash("pool/1", "worker crashed (exit code 3) while running this job") == [a.id, b.id]
    assert q.job(a.id).last_error == "worker crashed (exit code 3) while running this job"
    assert q.job(c.id).last_error is None
    assert q.job(a.id).state == "running"  # the lease is left to run out as before
    q.complete(b)
    assert q.note_crash("pool/1", "again") == [a.id]
    assert q.note_crash("nobody", "x") == []


def test_finished_within_counts_recent_endings_per_queue_and_state(q, clock):
    for name in ("mail", "mail", "reports"):
        q.enqueue("t", {}, queue=name)
    old = q.claim("w", queues=["mail"])[0]
    q.complete(old)
    clock.advance(120)
    recent = q.claim("w", queues=["mail"])[0]
    q.complete(recent)
    q.cancel(3)
    assert q.finished_within(60) == {"mail": {"done": 1}, "reports": {"cancelled": 1}}
    assert q.finished_within(600) == {"mail": {"done": 2}, "reports": {"cancelled": 1}}


def test_latest_jobs_reads_newest_first_with_the_same_filters(q):
    for n in range(5):
        q.enqueue("a" if n % 2 else "b", {"n": n})
    assert [r.id for r in q.latest_jobs(limit=3)] == [5, 4, 3]
    assert [r.id for r in q.latest_jobs(kind="a")] == [4, 2]
    assert [r.id for r in q.latest_jobs(state="queued", limit=1)] == [5]
    assert [r.id for r in q.jobs(limit=2)] == [1, 2]
