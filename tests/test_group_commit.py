"""Group commit: a worker claims a batch, runs it, and reports it in one write transaction
that also claims the next batch. Every rule still holds per job: the fence, the effect
with its own completion, attempts counted at claim, retries and dead letters, the lease
renewed for the rest of the batch, and a stop that strands nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from labqueue import InvalidArgument, JobQueue
from labqueue.lab.demo_handlers import LEDGER_INSERT, ledger_effect
from labqueue.queue import Finished
from labqueue.worker import StopFlag, run, work_batch

# The fake-clock rules, the SQLite ledger effect and the trace of COMMITs are SQLite's; the
# PostgreSQL backend's batch API is exercised by the worker tests that run on both.
pytestmark = pytest.mark.sqlite_only


def ledger(q: JobQueue) -> list[tuple[int, int]]:
    return [tuple(r) for r in q.db.execute("SELECT job_id, attempt FROM ledger ORDER BY job_id")]


def by_state(q: JobQueue) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for record in q.jobs():
        found.setdefault(record.state, []).append(record.id)
    return found


def commits_during(q: JobQueue, action):
    """Run `action` and return what it returned and how many COMMITs the queue sent."""
    sent: list[str] = []
    q.db.set_trace_callback(sent.append)
    try:
        result = action()
    finally:
        q.db.set_trace_callback(None)
    return result, sum(1 for statement in sent if statement.strip().upper().startswith("COMMIT"))


def always(size: int):
    return lambda ran: ("w", size)


# -- claiming a batch -----------------------------------------------------------------------


def test_claim_batch_leases_the_oldest_ready_jobs_with_attempts_counted(q):
    q.enqueue_many("noop", [{}] * 5)
    batch = q.claim_batch("w", 3)
    assert [job.id for job in batch] == [1, 2, 3]
    assert all(job.attempts == 1 for job in batch)
    assert by_state(q) == {"running": [1, 2, 3], "queued": [4, 5]}


def test_a_shallow_queue_gives_what_is_ready_without_waiting(q):
    q.enqueue("noop", {})
    assert [job.id for job in q.claim_batch("w", 10)] == [1]
    assert q.claim_batch("w", 10) == []


def test_a_job_handed_out_before_is_claimed_alone(q, clock):
    q.enqueue_many("noop", [{}] * 5)
    q.claim_batch("crashed", 2)  # jobs 1 and 2; their worker dies
    clock.advance(31)  # their leases run out: both are ready again, ahead of nothing
    q.enqueue_many("noop", [{}] * 2)  # jobs 6 and 7 arrive
    # In (visible_at, id) order: 3, 4, 5 (never handed out), then 1, 2 (possible poison), 6, 7.
    assert [job.id for job in q.claim_batch("w", 10)] == [3, 4, 5]
    assert [job.id for job in q.claim_batch("w", 10)] == [1]
    assert [job.id for job in q.claim_batch("w", 10)] == [2]
    assert [job.id for job in q.claim_batch("w", 10)] == [6, 7]


def test_claim_batch_refuses_a_bad_size(q):
    with pytest.raises(InvalidArgument, match="limit"):
        q.enqueue("noop", {}) and q.claim_batch("w", 0)


# -- settling a batch -----------------------------------------------------------------------


def test_a_batch_and_the_next_claim_commit_in_one_transaction(q):
    q.enqueue_many("noop", [{}] * 6)
    batch = q.claim_batch("w", 3)
    (outcomes, nxt), commits = commits_during(
        q, lambda: q.settle([Finished(job) for job in batch], claim_for="w", limit=3)
    )
    assert commits == 1
    assert outcomes == ["done"] * 3
    assert [job.id for job in nxt] == [4, 5, 6]
    assert by_state(q) == {"done": [1, 2, 3], "running": [4, 5, 6]}


def test_a_stale_token_rejects_that_job_only_and_runs_no_effect_for_it(q, clock):
    q.enqueue_many("credit", [{}] * 3)
    batch = q.claim_batch("a", 3)
    clock.advance(31)
    (taken_over,) = q.claim_batch("b", 1)  # job 1 changes hands
    clock.advance(-31)  # (back in time only so jobs 2 and 3 are still a's)
    outcomes, _ = q.settle([Finished(job, effect=ledger_effect(job)) for job in batch])
    assert outcomes == ["lost", "done", "done"]
    assert ledger(q) == [(2, 1), (3, 1)]
    assert q.job(1).worker == "b" and q.job(1).state == "running"
    assert taken_over.id == 1


def test_a_failing_effect_undoes_its_own_completion_only(q):
    q.enqueue_many("credit", [{}] * 3)
    batch = q.claim_batch("w", 3)

    def broken(db):
        db.execute(LEDGER_INSERT, (2, 1))  # written, then undone with the completion
        raise LookupError("no such account")

    reports = [
        Finished(batch[0], effect=ledger_effect(batch[0])),
        Finished(batch[1], effect=lambda db: (ledger_effect(batch[1])(db), broken(db))),
        Finished(batch[2], effect=ledger_effect(batch[2])),
    ]
    outcomes, _ = q.settle(reports)
    assert outcomes == ["done", "queued", "done"]
    assert ledger(q) == [(1, 1), (3, 1)]
    assert q.job(2).last_error == "LookupError: no such account"


def test_failures_in_a_batch_are_retried_or_dead_lettered(make_queue):
    q = make_queue(max_attempts=2)
    q.enqueue_many("x", [{}] * 3)
    batch = q.claim_batch("w", 3)
    outcomes, _ = q.settle(
        [
            Finished(batch[0], error="ValueError: once"),
            Finished(batch[1], error="UnknownJobKind: no handler", retry=False),
            Finished(batch[2]),
        ]
    )
    assert outcomes == ["queued", "dead", "done"]
    assert q.job(1).attempts == 1 and q.job(1).visible_at > q.clock()


def test_extend_renews_the_leases_still_held_and_drops_the_rest(q, clock):
    q.enqueue_many("noop", [{}] * 2)
    batch = q.claim_batch("a", 2)
    clock.advance(31)
    q.claim_batch("b", 1)  # job 1 is b's now
    kept = q.extend(batch)
    assert [job.id for job in kept] == [2]
    assert kept[0].lease_expires_at == clock() + 30


def test_release_gives_back_an_unstarted_job_and_its_attempt(q):
    q.enqueue_many("noop", [{}] * 2)
    batch = q.claim_batch("w", 2)
    assert q.release(batch[1:]) == 1
    record = q.job(2)
    assert (record.state, record.attempts, record.lease_token, record.visible_at) == (
        "queued",
        0,
        None,
        q.clock(),
    )


# -- the worker's batch loop ------------------------------------------------------------------


def test_work_batch_renews_the_leases_of_the_rest_of_a_long_batch(q, clock):
    q.enqueue_many("slow", [{}] * 3)

    def slow(job, queue):
        clock.advance(20)  # each job takes two thirds of the 30 s lease

    ran, _ = work_batch(q, q.claim_batch("w", 3), {"slow": slow}, claim_for=lambda ran: None, stop=StopFlag())
    assert ran == 3
    assert by_state(q) == {"done": [1, 2, 3]}


def test_work_batch_commits_early_when_the_interval_has_passed(q):
    q.enqueue_many("step", [{}] * 3)
    seen = []
    ticks = iter(range(100))

    def step(job, queue):
        seen.append(queue.job(1).state)  # what job 1 looks like when each job starts

    work_batch(
        q,
        q.claim_batch("w", 3),
        {"step": step},
        claim_for=lambda ran: None,
        stop=StopFlag(),
        commit_interval=1,
        monotonic=lambda: next(ticks),
    )
    assert seen == ["running", "done", "done"]


def test_a_warm_stop_mid_batch_gives_back_the_jobs_not_started(q):
    q.enqueue_many("stop", [{}] * 4)
    stop = StopFlag()

    def request_stop(job, queue):
        stop.requested = True

    ran, nxt = work_batch(q, q.claim_batch("w", 4), {"stop": request_stop}, claim_for=always(4), stop=stop)
    assert (ran, nxt) == (1, [])
    assert by_state(q) == {"done": [1], "queued": [2, 3, 4]}
    assert [q.job(i).attempts for i in (2, 3, 4)] == [0, 0, 0]


def test_run_drains_a_deep_queue_in_batches(tmp_path):
    path = tmp_path / "deep.db"
    with JobQueue(path) as q:
        q.enqueue_many("noop", [{}] * 25)
    assert run(str(path), "w", 30, idle_exit=0, handlers={"noop": lambda job, q: None}, batch=10) == 25
    with JobQueue(path) as q:
        assert q.counts()["done"] == 25


def test_run_refuses_a_bad_batch_size(tmp_path):
    with pytest.raises(InvalidArgument, match="batch"):
        run(str(tmp_path / "x.db"), "w", 30, idle_exit=0, batch=0)


# -- a crash re-runs at most one batch ---------------------------------------------------------

CRASHER = textwrap.dedent(
    """
    import os
    from labqueue.lab.demo_handlers import ledger_effect

    def mark(job, q):
        with open(os.environ["RUNS_FILE"], "a") as f:
            f.write(f"{job.id}\\n")
        if job.payload.get("crash") and job.attempts == 1:
            os._exit(1)  # no except or finally runs: the batch in flight is never reported
        return ledger_effect(job)

    HANDLERS = {"mark": mark}
    """
)


def test_a_crash_mid_batch_re_runs_at_most_that_batch_and_no_effect_twice(tmp_path):
    (tmp_path / "crasher.py").write_text(CRASHER)
    path, runs = tmp_path / "crash.db", tmp_path / "runs.txt"
    batch = 5
    with JobQueue(path) as q:
        q.enqueue_many("mark", [{"crash": n == 8} for n in range(1, 21)])
    env = {"PYTHONPATH": str(tmp_path), "RUNS_FILE": str(runs)}
    worker = [sys.executable, "-m", "labqueue.worker", "--handlers", "crasher", "--batch", str(batch)]
    worker += ["--commit-interval", "60", "--", str(path)]
    crashed = subprocess.run([*worker, "w1", "0.5", "0"], env={**os.environ, **env}, timeout=60)
    assert crashed.returncode == 1
    done = subprocess.run([*worker, "w2", "0.5", "3"], env={**os.environ, **env}, timeout=60)
    assert done.returncode == 0
    counts: dict[int, int] = {}
    for line in runs.read_text().split():
        counts[int(line)] = counts.get(int(line), 0) + 1
    re_run = sorted(job_id for job_id, n in counts.items() if n > 1)
    assert re_run == [6, 7, 8]  # the crashed batch (6-10) up to the crash, and nothing else
    assert len(re_run) <= batch
    with JobQueue(path) as q:
        assert q.counts()["done"] == 20
        assert [job_id for job_id, _ in ledger(q)] == list(range(1, 21))  # one effect per job

