"""The tutorial's own test suite (its Step 11), run against the queue Part 1 builds,
labqueue.tutorial.jobqueue: every rule on a fake clock with the retry jitter pinned to its
ceiling, then two tests in the real world (four processes racing, a heartbeat thread).

It ships in the package, so an installed course can test a learner's copy too:

    python -m labqueue.tutorial.process --code FOLDER test [PYTEST ARGS]

loads the workspace in FOLDER as labqueue.tutorial.* first, so every import below (and the
racing processes, which load the same folder) gets the learner's code. tests/tutorial runs
it on the course's own modules.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from labqueue import FakeClock
from labqueue.tutorial.jobqueue import JobQueue
from labqueue.tutorial.keepalive import KeepAlive


@pytest.fixture
def clock():
    return FakeClock(1000.0)


@pytest.fixture
def q(tmp_path, clock):
    queue = JobQueue(tmp_path / "jobs.db", lease_seconds=30, max_attempts=3,
                     backoff_base=2.0, backoff_cap=60.0, clock=clock, rng=lambda: 1.0)
    yield queue
    queue.db.close()


def row(q, job_id=1):
    return q.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def taken_over(q, clock):
    """worker-a claims job 1 and goes quiet; after its lease worker-b claims it."""
    q.enqueue("t", {})
    (a,) = q.claim("worker-a")
    clock.now += 31
    (b,) = q.claim("worker-b")
    return a, b


def test_jobs_are_claimed_oldest_first(q):
    ids = [q.enqueue("t", {"n": n}) for n in range(3)]
    assert [job.id for job in q.claim("w", limit=3)] == ids


def test_a_claim_takes_at_most_its_limit(q):
    q.enqueue_many("t", [{"n": n} for n in range(5)])
    assert [job.id for job in q.claim("w", limit=2)] == [1, 2]
    assert [job.id for job in q.claim("w", limit=10)] == [3, 4, 5]


def test_a_second_enqueue_with_the_same_dedupe_key_adds_nothing(q):
    assert q.enqueue("t", {}, dedupe_key="welcome:ada") == 1
    assert q.enqueue("t", {}, dedupe_key="welcome:ada") is None
    assert q.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1


def test_a_delayed_job_waits_for_its_time(q, clock):
    q.enqueue("t", {}, delay=60)
    assert q.claim("w") == []
    clock.now += 60
    assert len(q.claim("w")) == 1


def test_a_claim_counts_the_attempt_and_sets_the_lease(q):
    q.enqueue("t", {"to": "ada"})
    (job,) = q.claim("w1")
    assert (job.attempts, job.lease_expires_at, job.payload) == (1, 1030.0, {"to": "ada"})
    r = row(q)
    assert (r["state"], r["worker"], r["lease_token"]) == ("running", "w1", job.lease_token)


def test_a_leased_job_is_hidden_until_its_lease_ends(q, clock):
    q.enqueue("t", {})
    q.claim("w1")
    clock.now += 29
    assert q.claim("w2") == []
    clock.now += 1  # visible_at <= now: the lease ends at 1030 exactly
    assert len(q.claim("w2")) == 1


def test_a_reclaim_counts_again_with_a_new_token(q, clock):
    a, b = taken_over(q, clock)
    assert (b.attempts, b.lease_token != a.lease_token) == (2, True)


def test_a_late_complete_counts_when_nobody_took_over(q, clock):
    q.enqueue("t", {})
    (a,) = q.claim("worker-a")
    clock.now += 45
    assert q.complete(a) is True
    assert row(q)["state"] == "done"


def test_a_stale_complete_is_refused_after_a_takeover(q, clock):
    a, b = taken_over(q, clock)
    assert q.complete(a) is False
    assert row(q)["state"] == "running"
    assert q.complete(b) is True


def test_a_stale_fail_cannot_bring_a_done_job_back(q, clock):
    a, b = taken_over(q, clock)
    assert q.complete(b) is True
    assert q.fail(a, "TimeoutError") is None
    assert row(q)["state"] == "done"
    assert q.claim("worker-c") == []


def test_an_effect_commits_with_its_completion(q):
    q.db.execute("CREATE TABLE ledger (job_id INTEGER)")
    q.enqueue("t", {})
    (job,) = q.claim("w")
    assert q.complete(job, effect=lambda db: db.execute("INSERT INTO ledger VALUES (?)", (job.id,)))
    assert [tuple(r) for r in q.db.execute("SELECT job_id FROM ledger")] == [(1,)]


def test_an_effect_does_not_run_when_the_lease_was_lost(q, clock):
    a, _ = taken_over(q, clock)
    ran = []
    assert q.complete(a, effect=lambda db: ran.append(True)) is False
    assert ran == []


def test_an_effect_that_raises_rolls_back_and_keeps_the_lease(q):
    q.db.execute("CREATE TABLE ledger (job_id INTEGER)")
    q.enqueue("t", {})
    (job,) = q.claim("w")

    def effect(db):
        db.execute("INSERT INTO ledger VALUES (1)")
        raise RuntimeError("the account service said no")

    with pytest.raises(RuntimeError):
        q.complete(job, effect=effect)
    assert q.db.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 0
    assert row(q)["state"] == "running"
    assert q.fail(job, "RuntimeError: the account service said no") == "queued"


def test_a_heartbeat_pushes_the_lease_out(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w1")
    clock.now += 20
    assert q.heartbeat(job) is True
    assert row(q)["visible_at"] == 1050.0
    clock.now += 15  # past the first lease, inside the renewed one
    assert q.claim("w2") == []


def test_a_heartbeat_after_a_takeover_is_refused(q, clock):
    a, b = taken_over(q, clock)
    assert q.heartbeat(a) is False
    assert q.heartbeat(b) is True


def test_a_failure_retries_at_the_backoff_ceiling(q, clock):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    assert q.fail(job, "boom") == "queued"
    assert row(q)["visible_at"] == 1000.0 + 2.0  # attempt 1: ceiling 2 s; rng pinned to 1.0
    clock.now = 1002.0
    (job,) = q.claim("w")
    assert q.fail(job, "boom") == "queued"
    assert row(q)["visible_at"] == 1002.0 + 4.0  # attempt 2: ceiling 4 s


def test_the_backoff_ceiling_doubles_up_to_the_cap(tmp_path, clock):
    q = JobQueue(tmp_path / "cap.db", max_attempts=10, backoff_base=2.0, backoff_cap=60.0,
                 clock=clock, rng=lambda: 1.0)
    q.enqueue("t", {})
    delays = []
    for _ in range(9):
        (job,) = q.claim("w")
        q.fail(job, "boom")
        due = row(q)["visible_at"]
        delays.append(due - clock.now)
        clock.now = due
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0, 60.0]
    q.db.close()


def test_a_failure_on_the_last_attempt_is_a_dead_letter(q, clock):
    q.enqueue("t", {})
    for _ in range(3):
        (job,) = q.claim("w")
        state = q.fail(job, "boom")
        clock.now += 60
    assert state == "dead"
    r = row(q)
    assert (r["state"], r["attempts"], r["last_error"]) == ("dead", 3, "boom")
    assert q.claim("w") == []


def test_a_lease_that_ends_on_the_last_attempt_is_a_dead_letter(q, clock):
    q.enqueue("t", {})
    for _ in range(3):  # every worker dies with the job: nobody calls fail()
        q.claim("w")
        clock.now += 31
    assert q.claim("w2") == []
    r = row(q)
    assert (r["state"], r["attempts"], r["last_error"]) == ("dead", 3, "lease expired on the last attempt")


def test_stats_count_what_is_ready_including_expired_leases(q, clock):
    for n in range(4):
        q.enqueue("t", {"n": n})
    q.claim("w1")  # job 1: its worker vanishes
    clock.now += 10
    q.claim("w2")  # job 2: a live lease
    clock.now += 21  # job 1's lease has ended, job 2's has not
    s = q.stats()
    assert (s["queued"], s["running"], s["dead"]) == (2, 2, 0)
    assert s["ready_now"] == 3  # jobs 3 and 4, and job 1 whose lease ended
    assert s["oldest_ready_age_s"] == 31.0


def test_requeue_dead_gives_fresh_attempts(q, clock):
    q.enqueue("t", {})
    for _ in range(3):
        (job,) = q.claim("w")
        q.fail(job, "boom")
        clock.now += 60
    assert q.requeue_dead() == [1]
    assert q.stats()["dead"] == 0
    (job,) = q.claim("w")
    assert job.attempts == 1
    assert q.requeue_dead([1]) == []  # only dead jobs go back


CLAIM_UNTIL_EMPTY = """
import sys
from labqueue.tutorial import process
JobQueue = process.tutorial_module("jobqueue", sys.argv[3] or None).JobQueue
q = JobQueue(sys.argv[1], lease_seconds=60, schema=None)
while jobs := q.claim(sys.argv[2]):
    for job in jobs:
        print(job.id)
        q.complete(job)
"""


def code_folder() -> str:
    """The folder this run's jobqueue.py was loaded from when it is a workspace (the
    learner's copy), so the racing processes load it too; "" for the package's own."""
    folder = Path(sys.modules[JobQueue.__module__].__file__).resolve().parent
    return "" if folder == Path(__file__).resolve().parent else str(folder)


def test_four_processes_never_claim_the_same_job(tmp_path):
    path = tmp_path / "race.db"
    q = JobQueue(path)
    q.enqueue_many("t", [{}] * 300)
    procs = [
        subprocess.Popen([sys.executable, "-c", CLAIM_UNTIL_EMPTY, str(path), f"w{i}", code_folder()],
                         stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    claimed = [int(line) for p in procs for line in p.communicate(timeout=120)[0].split()]
    assert sorted(claimed) == list(range(1, 301))
    assert q.stats() == {"queued": 0, "running": 0, "ready_now": 0, "oldest_ready_age_s": 0.0, "dead": 0}
    q.db.close()


def test_a_keepalive_thread_keeps_a_short_lease_alive(tmp_path):
    path = tmp_path / "hb.db"
    a = JobQueue(path, lease_seconds=1.0)
    b = JobQueue(path, lease_seconds=1.0)
    a.enqueue("t", {})
    (job,) = a.claim("w1")
    with KeepAlive(path, job, lease_seconds=1.0, interval=0.1) as hb:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert b.claim("w2") == [], "the lease ran out while its heartbeat was alive"
            time.sleep(0.05)
    assert hb.beats > 0 and not hb.lost.is_set()
    assert a.complete(job) is True
    a.db.close()
    b.db.close()
