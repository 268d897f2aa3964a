"""The queue's rules, one test each, driven by a FakeClock and a pinned rng.

Every test takes its queue from the `make_queue` fixture, so another backend
runs the very same tests by adding a factory in conftest.py."""

from __future__ import annotations

import random

import pytest

from labqueue import INDEXES, SCHEMA, TABLE, Job, JobQueue, sql


def row(q: JobQueue, job_id: int = 1):
    return q.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def take_over(q: JobQueue, clock) -> tuple[Job, Job]:
    """worker-a claims, its lease runs out, worker-b claims the same job."""
    q.enqueue("t", {})
    (a,) = q.claim("worker-a")
    clock.advance(31)
    (b,) = q.claim("worker-b")
    return a, b


def fail_until_dead(q: JobQueue, clock, attempts: int = 3) -> None:
    for _ in range(attempts):
        (job,) = q.claim("w")
        q.fail(job, "boom")
        clock.advance(100)


# -- schema -------------------------------------------------------------------


def test_schema_is_importable_and_complete():
    assert SCHEMA == TABLE + INDEXES
    for name in sql.COLUMNS:
        assert f"    {name} " in TABLE


def test_state_is_a_closed_set(q):
    q.enqueue("t", {})
    with pytest.raises(Exception, match="CHECK constraint failed"):
        q.db.execute("UPDATE jobs SET state = 'paused' WHERE id = 1")


def test_the_three_partial_indexes_exist(q):
    names = {r[0] for r in q.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_ready", "jobs_exhausted", "jobs_dead"} <= names


def test_reopening_an_existing_queue_keeps_its_jobs(make_queue):
    first = make_queue()
    first.enqueue("t", {"n": 1})
    first.close()
    assert make_queue().stats()["queued"] == 1


# -- enqueue ------------------------------------------------------------------


def test_enqueue_stores_the_payload_and_returns_the_id(q):
    assert q.enqueue("email", {"to": "ada", "n": [1, 2]}) == 1
    (job,) = q.claim("w")
    assert (job.kind, job.payload) == ("email", {"to": "ada", "n": [1, 2]})


def test_enqueue_uses_the_queue_default_or_its_own_max_attempts(q):
    q.enqueue("t", {})
    q.enqueue("t", {}, max_attempts=7)
    assert [j.max_attempts for j in q.claim("w", limit=2)] == [3, 7]


def test_dedupe_key_second_enqueue_changes_nothing(q, clock):
    assert q.enqueue("t", {"v": 1}, dedupe_key="k") == 1
    before = tuple(row(q))
    clock.advance(5)
    assert q.enqueue("t", {"v": 2}, delay=50, dedupe_key="k") is None
    assert tuple(row(q)) == before
    assert q.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1


def test_enqueue_many_adds_every_job_in_one_go(q):
    assert q.enqueue_many("t", ({"n": n} for n in range(4))) == 4
    assert [j.payload["n"] for j in q.claim("w", limit=10)] == [0, 1, 2, 3]


# -- claim ----------------------------------------------------------------------


def test_claims_in_fifo_order(q):
    ids = [q.enqueue("t", {"n": n}) for n in range(3)]
    assert [q.claim("w")[0].id for _ in ids] == ids


def test_claim_orders_by_visible_at_before_id(q, clock):
    q.enqueue("t", {}, delay=5)  # id 1, ready later
    q.enqueue("t", {})  # id 2, ready now
    clock.advance(10)
    assert [q.claim("w")[0].id, q.claim("w")[0].id] == [2, 1]


def test_batch_claim_respects_the_limit_and_is_sorted_by_id(q, clock):
    for n in range(5):
        q.enqueue("t", {"n": n}, delay=5 - n)  # later ids are ready earlier
    clock.advance(10)
    first = q.claim("w", limit=2)
    assert [j.id for j in first] == [4, 5]
    assert [j.id for j in q.claim("w", limit=10)] == [1, 2, 3]


def test_batch_claim_shares_one_token_and_one_deadline(q):
    q.enqueue_many("t", [{}, {}])
    a, b = q.claim("w", limit=2)
    assert a.lease_token == b.lease_token
    assert a.lease_expires_at == b.lease_expires_at == 1030.0


def test_claim_on_an_empty_queue_returns_nothing(q):
    assert q.claim("w") == []


def test_delayed_job_waits_for_its_time(q, clock):
    q.enqueue("t", {}, delay=60)
    assert q.claim("w") == []
    clock.advance(59.9)
    assert q.claim("w") == []
    clock.advance(0.1)
    assert len(q.claim("w")) == 1


def test_claim_sets_a_lease_and_counts_the_attempt(q):
    q.enqueue("t", {})
    (job,) = q.claim("w1")
    assert (job.attempts, job.lease_expires_at) == (1, 1030.0)
    r = row(q)
    assert (r["state"], r["worker"], r["lease_token"], r["attempts"]) == (
        "running",
        "w1",
        job.lease_token,
        1,
    )


def test_leased_job_stays_hidden_until_the_lease_ends(q, clock):
    q.enqueue("t", {})
    q.claim("w1")
    clock.now = 1029.9
    assert q.claim("w2") == []
    clock.now = 1030.0
    assert len(q.claim("w2")) == 1


def test_every_claim_gets_a_fresh_random_token(q, clock):
    q.enqueue("t", {})
    tokens = set()
    for _ in range(3):
        tokens.add(q.claim("w")[0].lease_token)
        clock.advance(31)
    assert len(tokens) == 3
    assert all(len(t) == 32 for t in tokens)


def test_reclaim_counts_again_and_issues_a_new_token(q, clock):
    a, b = take_over(q, clock)
    assert (a.attempts, b.attempts) == (1, 2)
    assert b.lease_token != a.lease_token
    assert row(q)["worker"] == "worker-b"


def test_claim_is_one_atomic_statement():
    """The choice of rows and their marking happen in a single UPDATE, so no
    other writer can slip in between (the race notebook measures the alternative)."""
    assert sql.CLAIM.strip().startswith("UPDATE jobs")
    assert "WHERE id IN (SELECT id FROM jobs" in sql.CLAIM
    assert "RETURNING" in sql.CLAIM


# -- complete -------------------------------------------------------------------


def test_complete_marks_done_and_clears_the_token(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    clock.advance(3)
    assert q.complete(job) is True
    r = row(q)
    assert (r["state"], r["lease_token"], r["finished_at"]) == ("done", None, 1003.0)
    assert q.complete(job) is False  # a second report of the same claim is refused


def test_late_complete_wins_when_nobody_took_over(q, clock):
    q.enqueue("t", {})
    (a,) = q.claim("w1")
    clock.advance(45)
    assert q.complete(a) is True
    assert row(q)["state"] == "done"


def test_stale_complete_is_refused_after_takeover(q, clock):
    a, b = take_over(q, clock)
    assert q.complete(a) is False
    assert row(q)["state"] == "running"
    assert q.complete(b) is True


def test_done_is_final(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    q.complete(job)
    clock.advance(1_000_000)
    assert q.claim("w") == []
    assert q.fail(job, "late") is None
    assert q.heartbeat(job) is False


# -- effects ----------------------------------------------------------------------


@pytest.fixture
def ledger(q):
    q.db.execute("CREATE TABLE ledger (n INTEGER)")
    return lambda: q.db.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]


def test_effect_commits_together_with_complete(q, ledger):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    seen_in_transaction = []

    def effect(db):
        seen_in_transaction.append(db.in_transaction)
        db.execute("INSERT INTO ledger VALUES (1)")

    assert q.complete(job, effect=effect) is True
    assert seen_in_transaction == [True]
    assert ledger() == 1


def test_effect_is_skipped_when_the_lease_was_lost(q, clock, ledger):
    a, _ = take_over(q, clock)
    ran = []
    assert q.complete(a, effect=lambda db: ran.append(1)) is False
    assert ran == []
    assert ledger() == 0


def test_failing_effect_rolls_back_and_keeps_the_lease(q, ledger):
    q.enqueue("t", {})
    (job,) = q.claim("w")

    def effect(db):
        db.execute("INSERT INTO ledger VALUES (1)")
        raise RuntimeError("downstream error")

    with pytest.raises(RuntimeError, match="downstream error"):
        q.complete(job, effect=effect)
    assert ledger() == 0
    assert (row(q)["state"], row(q)["lease_token"]) == ("running", job.lease_token)
    assert not q.db.in_transaction
    assert q.fail(job, "RuntimeError: downstream error") == "queued"


# -- fail, backoff, dead letters -----------------------------------------------


def test_fail_schedules_a_retry_at_the_backoff_ceiling(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    assert q.fail(job, "boom") == "queued"
    r = row(q)
    assert (r["state"], r["lease_token"], r["last_error"]) == ("queued", None, "boom")
    assert r["visible_at"] == 1000.0 + 2.0  # attempt 1: ceiling base * 2**0, rng pinned to 1.0
    clock.advance(2.0)
    (job,) = q.claim("w")
    assert q.fail(job, "boom") == "queued"
    assert row(q)["visible_at"] == clock.now + 4.0  # attempt 2: the ceiling doubles


def test_backoff_is_full_jitter_under_a_capped_ceiling(make_queue, clock):
    draws = iter([0.5, 0.25, 1.0, 0.0, 0.75, 1.0, 1.0])
    q = make_queue(max_attempts=30, rng=lambda: next(draws))
    q.enqueue("t", {})
    delays = []
    for _ in range(7):
        (job,) = q.claim("w")
        q.fail(job, "boom")
        delays.append(row(q)["visible_at"] - clock.now)
        clock.advance(100)
    # ceilings 2, 4, 8, 16, 32, 60 (capped), 60, each times its draw
    assert delays == [1.0, 1.0, 8.0, 0.0, 24.0, 60.0, 60.0]


def test_backoff_delay_never_exceeds_the_cap_or_goes_negative(make_queue):
    rng = random.Random(3)
    q = make_queue(backoff_base=0.5, backoff_cap=10.0, rng=rng.random)
    for attempts in range(1, 40):
        assert 0.0 <= q.backoff_delay(attempts) <= min(10.0, 0.5 * 2 ** (attempts - 1))


def test_fail_on_the_last_attempt_is_dead(q, clock):
    q.enqueue("t", {})
    states = []
    for _ in range(3):
        (job,) = q.claim("w")
        states.append(q.fail(job, f"boom {job.attempts}"))
        clock.advance(100)
    assert states == ["queued", "queued", "dead"]
    r = row(q)
    assert (r["state"], r["attempts"], r["last_error"], r["lease_token"]) == ("dead", 3, "boom 3", None)
    assert r["finished_at"] == 1200.0
    assert q.claim("w") == []


def test_fail_without_retry_is_dead_at_once(q):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    assert q.fail(job, "UnknownJobKind: nope", retry=False) == "dead"
    assert (row(q)["state"], row(q)["attempts"]) == ("dead", 1)


def test_fail_keeps_at_most_500_characters_of_the_error(q):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    q.fail(job, "x" * 2000)
    assert len(row(q)["last_error"]) == 500


def test_stale_fail_cannot_resurrect_a_done_job(q, clock):
    a, b = take_over(q, clock)
    assert q.complete(b) is True
    assert q.fail(a, "TimeoutError") is None
    assert row(q)["state"] == "done"
    assert q.claim("w3") == []


def test_attempts_are_counted_at_claim_so_crashes_use_them_up(q, clock):
    q.enqueue("t", {})
    for expected in (1, 2, 3):
        (job,) = q.claim("w")  # the worker dies without reporting
        assert job.attempts == expected
        clock.advance(31)
    assert q.claim("w2") == []
    r = row(q)
    assert (r["state"], r["attempts"], r["last_error"]) == ("dead", 3, "lease expired on the last attempt")
    assert (r["lease_token"], r["finished_at"]) == (None, 1093.0)


def test_expired_last_lease_keeps_the_earlier_error_as_context(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    q.fail(job, "TimeoutError: slow upstream")
    clock.advance(100)
    for _ in range(2):
        q.claim("w")  # attempts 2 and 3 crash
        clock.advance(31)
    q.claim("w")
    assert row(q)["last_error"] == (
        "lease expired on the last attempt; previous error: TimeoutError: slow upstream"
    )


def test_a_live_last_lease_is_not_retired(q, clock):
    q.enqueue("t", {})
    for _ in range(2):
        q.claim("w")
        clock.advance(31)
    (last,) = q.claim("w")  # attempt 3 of 3, lease until now + 30
    clock.advance(29)
    assert q.claim("w2") == []
    assert row(q)["state"] == "running"
    assert q.complete(last) is True


# -- heartbeat ------------------------------------------------------------------


def test_heartbeat_extends_the_lease(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w1")
    clock.advance(20)
    assert q.heartbeat(job) is True
    assert row(q)["visible_at"] == 1050.0
    clock.now = 1049.0
    assert q.claim("w2") == []
    clock.now = 1050.0
    assert len(q.claim("w2")) == 1


def test_heartbeat_after_takeover_is_refused(q, clock):
    a, b = take_over(q, clock)
    deadline = row(q)["visible_at"]
    assert q.heartbeat(a) is False
    assert row(q)["visible_at"] == deadline
    assert q.heartbeat(b) is True


# -- requeue_dead and stats -------------------------------------------------------


def test_requeue_dead_gives_fresh_attempts(q, clock):
    q.enqueue("t", {})
    fail_until_dead(q, clock)
    assert q.requeue_dead() == [1]
    r = row(q)
    assert (r["state"], r["attempts"], r["finished_at"], r["visible_at"]) == ("queued", 0, None, clock.now)
    (job,) = q.claim("w")
    assert job.attempts == 1


def test_requeue_dead_by_id_touches_only_those(q, clock):
    for _ in range(3):
        q.enqueue("t", {})
    for _ in range(3):
        for job in q.claim("w", limit=3):
            q.fail(job, "boom")
        clock.advance(100)
    assert q.stats()["dead"] == 3
    assert q.requeue_dead([3, 1, 99]) == [1, 3]
    assert q.requeue_dead([]) == []
    assert [r["state"] for r in q.db.execute("SELECT state FROM jobs ORDER BY id")] == [
        "queued",
        "dead",
        "queued",
    ]


def test_requeue_dead_leaves_live_and_done_jobs_alone(q):
    q.enqueue_many("t", [{}, {}])
    (a,) = q.claim("w")
    q.complete(a)
    assert q.requeue_dead() == []
    assert q.requeue_dead([1, 2]) == []
    assert [r[0] for r in q.db.execute("SELECT state FROM jobs ORDER BY id")] == ["done", "queued"]


def test_stats_count_ready_expired_and_dead(q, clock):
    for n in range(4):
        q.enqueue("t", {"n": n})
    q.enqueue("t", {}, delay=600)
    (j1,) = q.claim("w")
    q.complete(j1)
    q.claim("w")  # job 2: its lease will run out
    clock.advance(31)
    assert q.stats() == {
        "queued": 3,
        "running": 1,
        "ready_now": 3,
        "oldest_ready_age_s": 31.0,
        "dead": 0,
    }


def test_stats_of_an_empty_queue(q):
    assert q.stats() == {"queued": 0, "running": 0, "ready_now": 0, "oldest_ready_age_s": 0.0, "dead": 0}


@pytest.mark.parametrize("statement", sql.STATS_QUERIES)
def test_stats_never_scans_finished_rows(q, statement):
    plan = [r[3] for r in q.db.execute("EXPLAIN QUERY PLAN " + statement, (1.0,) * statement.count("?"))]
    assert plan, statement
    for line in plan:
        if line.startswith(("SCAN jobs", "SEARCH jobs")):
            assert "INDEX jobs_" in line, f"{line!r} reads the whole table"


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


def test_queue_is_a_context_manager_and_uses_wal(make_queue):
    q = make_queue()
    with q as same:
        assert same is q
        assert q.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(Exception, match="closed"):
        q.db.execute("SELECT 1")


def test_rows_come_back_as_sqlite_rows(q):
    q.enqueue("t", {})
    assert row(q)["kind"] == "t"


def test_synchronous_setting_is_applied(make_queue):
    assert make_queue(synchronous="full").db.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert make_queue().db.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_a_crash_inside_a_transaction_rolls_it_back(q):
    q.enqueue("t", {})
    (job,) = q.claim("w")

    def interrupted(db):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        q.complete(job, effect=interrupted)
    assert row(q)["state"] == "running"
    assert not q.db.in_transaction


def test_a_second_connection_sees_committed_work(make_queue):
    producer, consumer = make_queue(), make_queue()
    producer.enqueue("t", {"n": 1})
    (job,) = consumer.claim("w")
    assert consumer.complete(job)
    assert producer.stats()["queued"] == 0
