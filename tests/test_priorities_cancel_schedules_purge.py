"""Priorities and named queues, cancellation, periodic ticks, retention (purge) and
per-queue figures, in the queue, on both backends."""

from __future__ import annotations

import pytest

from labqueue.errors import CannotCancel, InvalidArgument, JobNotFound
from labqueue.queue import Finished, period_start


def payloads(jobs) -> list:
    return [job.payload for job in jobs]


# -- priorities and named queues -----------------------------------------------------------


def test_the_highest_priority_is_claimed_first_then_the_oldest(q, clock):
    q.enqueue("t", "low")
    clock.advance(1)
    q.enqueue("t", "high-old", priority=5)
    clock.advance(1)
    q.enqueue("t", "high-new", priority=5)
    q.enqueue("t", "negative", priority=-3)
    order = [q.claim("w")[0].payload for _ in range(4)]
    assert order == ["high-old", "high-new", "low", "negative"]


def test_default_priority_keeps_the_tutorials_order(q, clock):
    for n in range(5):
        q.enqueue("t", n, delay=5 - n)  # later jobs become ready earlier
    clock.advance(10)
    assert [q.claim("w")[0].payload for _ in range(5)] == [4, 3, 2, 1, 0]


def test_a_worker_takes_only_from_the_queues_it_is_given(q):
    q.enqueue("t", "mail-1", queue="mail")
    q.enqueue("t", "report-1", queue="reports", priority=9)
    q.enqueue("t", "default-1")
    assert payloads(q.claim("w", queues=["mail"])) == ["mail-1"]
    assert q.claim("w", queues=["mail"]) == []
    assert not q.any_ready(["mail"])
    assert q.any_ready(["reports"])
    assert payloads(q.claim("w", limit=5, queues=["mail", "default"])) == ["default-1"]
    assert payloads(q.claim("w")) == ["report-1"]


def test_several_queues_are_ordered_by_priority_across_them(q):
    q.enqueue("t", "a0", queue="a")
    q.enqueue("t", "b7", queue="b", priority=7)
    q.enqueue("t", "c9", queue="c", priority=9)
    assert [q.claim_batch("w", 1, queues=["a", "b"])[0].payload for _ in range(2)] == ["b7", "a0"]


def test_the_batch_claim_and_settle_respect_queues_and_priorities(q):
    q.enqueue_many("t", range(3), queue="bulk")
    q.enqueue_many("t", ["x", "y"], queue="urgent", priority=10)
    batch = q.claim_batch("w", 2, queues=["urgent", "bulk"])
    assert payloads(batch) == ["x", "y"]
    _, nxt = q.settle([Finished(job) for job in batch], claim_for="w", limit=10, queues=["bulk"])
    assert payloads(nxt) == [0, 1, 2]


def test_a_retried_job_is_claimed_alone_in_a_batch(q, clock):
    q.enqueue_many("t", range(4))
    first = q.claim_batch("w", 1)[0]
    q.fail(first, "boom")
    clock.advance(3600)  # past any backoff: job 0 is ready again, after 1-3 and before 4-5
    q.enqueue_many("t", range(4, 6))
    batches = [[(job.payload, job.attempts) for job in q.claim_batch("w", 10)] for _ in range(3)]
    assert batches == [[(1, 1), (2, 1), (3, 1)], [(0, 2)], [(4, 1), (5, 1)]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"priority": 2**31}, "priority must be a whole number from"),
        ({"priority": 1.5}, "priority must be a whole number"),
        ({"priority": True}, "priority must be a whole number"),
        ({"queue": ""}, "queue must be a non-empty string"),
        ({"queue": "a\x00b"}, "queue must not contain a NUL"),
    ],
)
def test_bad_priorities_and_queue_names_are_refused(q, kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        q.enqueue("t", {}, **kwargs)
    assert q.counts()["queued"] == 0


@pytest.mark.parametrize(
    "queues, match",
    [("mail", "a list of queue names"), ([], "at least one queue"), (["a", "a"], "more than once")],
)
def test_bad_queue_lists_are_refused(q, queues, match):
    with pytest.raises(InvalidArgument, match=match):
        q.claim("w", queues=queues)


def test_jobs_and_stats_read_per_queue(q, clock):
    q.enqueue("t", 1, queue="mail")
    q.enqueue("t", 2, queue="mail", delay=60)
    q.enqueue("t", 3)
    clock.advance(2)
    assert [r.id for r in q.jobs(queue="mail")] == [1, 2]
    assert q.job(1).queue == "mail" and q.job(3).queue == "default" and q.job(1).priority == 0
    stats = q.queue_stats()
    assert stats["mail"] == {"queued": 2, "running": 0, "ready_now": 1, "oldest_ready_age_s": 2.0}
    assert stats["default"]["ready_now"] == 1
    q.claim("w", queues=["default"])
    assert "default" in q.queue_stats() and q.queue_stats()["default"]["running"] == 1


# -- cancellation -----------------------------------------------------------------------------


def test_a_cancelled_queued_job_never_runs(q):
    job_id = q.enqueue("t", {})
    assert q.cancel(job_id) == "queued"
    assert q.claim("w") == []
    record = q.job(job_id)
    assert record.state == "cancelled" and record.finished_at is not None


def test_a_cancelled_running_job_is_refused_at_heartbeat_and_completion(q):
    job_id = q.enqueue("t", {})
    job = q.claim("w")[0]
    assert q.cancel(job_id) == "running"
    assert q.heartbeat(job) is False
    effects = []
    assert q.complete(job, effect=lambda db: effects.append("ran")) is False
    assert effects == []
    assert q.fail(job, "late") is None
    assert q.job(job_id).state == "cancelled"


def test_settle_reports_a_cancelled_job_as_cancelled(q):
    q.enqueue("t", 1)
    q.enqueue("t", 2)
    batch = q.claim_batch("w", 2)
    q.cancel(batch[0].id)
    outcomes, _ = q.settle([Finished(batch[0]), Finished(batch[1], error="boom")])
    assert outcomes == ["cancelled", "queued"]


@pytest.mark.parametrize("finish", ["done", "dead", "cancelled"])
def test_a_finished_job_cannot_be_cancelled_and_is_left_as_it_was(q, finish):
    job_id = q.enqueue("t", {})
    if finish == "cancelled":
        q.cancel(job_id)
    else:
        job = q.claim("w")[0]
        q.complete(job) if finish == "done" else q.fail(job, "no", retry=False)
    before = q.job(job_id)
    with pytest.raises(CannotCancel, match=f"job {job_id} is {finish} already"):
        q.cancel(job_id)
    assert q.job(job_id) == before


def test_an_unknown_job_cannot_be_cancelled(q):
    with pytest.raises(JobNotFound, match="no job has id 99"):
        q.cancel(99)
    with pytest.raises(InvalidArgument):
        q.cancel("1")


# -- periodic jobs ----------------------------------------------------------------------------


def test_every_enqueues_one_job_per_period_however_often_it_ticks(make_queue, clock):
    clock.advance(960_000 - clock())  # a period start: periods of 60 s begin at multiples of 60
    schedulers = [make_queue() for _ in range(3)]
    created = []
    for _ in range(4):  # four periods
        for _ in range(5):  # five ticks in each, by every scheduler
            for scheduler in schedulers:
                created.append(scheduler.every("report", 60))
            clock.advance(12)
    ids = [job_id for job_id in created if job_id is not None]
    assert len(ids) == 4
    keys = [schedulers[0].job(job_id).dedupe_key for job_id in ids]
    assert keys == [f"every:report:{960_000 + 60 * p}" for p in range(4)]
    assert period_start(960_059.9, 60) == 960_000


def test_missed_periods_are_skipped_and_the_current_one_runs_once(q, clock):
    assert q.every("report", 60) is not None
    clock.advance(60 * 10)  # ten periods of downtime
    assert q.every("report", 60) is not None
    assert q.every("report", 60) is None
    assert q.counts()["queued"] == 2


def test_two_schedules_of_one_kind_need_names(q):
    assert q.every("report", 60, {"scope": "eu"}, name="report-eu") is not None
    assert q.every("report", 60, {"scope": "us"}, name="report-us") is not None
    assert sorted(r.payload for r in q.jobs()) == ['{"scope": "eu"}', '{"scope": "us"}']


# -- retention --------------------------------------------------------------------------------


def finish_all(q, state: str) -> None:
    while jobs := q.claim("w", limit=100):
        for job in jobs:
            q.complete(job) if state == "done" else q.fail(job, "no", retry=False)


def test_purge_removes_old_finished_jobs_only(q, clock):
    q.enqueue_many("t", range(20))
    finish_all(q, "done")
    q.enqueue_many("t", range(5))
    finish_all(q, "dead")
    q.enqueue("t", "running")
    q.claim("w")
    q.enqueue("t", "queued")
    clock.advance(3600)
    q.enqueue("t", "newest")  # ids are never reused: the newest row always stays
    result = q.purge(60, batch=7)
    assert result.removed == 20 and result.archived == 0 and result.batches >= 3
    assert q.counts() == {"queued": 2, "running": 1, "done": 0, "dead": 5, "cancelled": 0}
    assert q.purge(60, states=("dead",)).removed == 5
    assert q.counts()["dead"] == 0


def test_purge_keeps_what_finished_recently(q, clock):
    q.enqueue_many("t", range(3))
    finish_all(q, "done")
    clock.advance(30)
    q.enqueue("t", "newest")
    assert q.purge(60).removed == 0
    clock.advance(60)
    assert q.purge(60).removed == 3


def test_purge_can_archive_what_it_removes(q, clock):
    q.enqueue_many("t", [{"n": 1}, {"n": 2}])
    finish_all(q, "done")
    clock.advance(100)
    q.enqueue("t", "newest")
    result = q.purge(10, archive=True)
    assert (result.removed, result.archived) == (2, 2)
    count = q.db.execute("SELECT COUNT(*), MIN(state), MIN(queue) FROM jobs_archive").fetchone()
    assert tuple(count) == (2, "done", "default")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"states": ("queued",)}, "queued and running jobs are never purged"),
        ({"states": ()}, "states must be one or more of done, dead, cancelled"),
        ({"batch": 0}, "batch must be a whole number"),
        ({"archive": "yes"}, "archive must be True or False"),
    ],
)
def test_bad_purge_arguments_are_refused(q, kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        q.purge(60, **kwargs)
    with pytest.raises(InvalidArgument, match="older_than"):
        q.purge(-1)


# -- a handler learns of its cancellation ------------------------------------------------------


def test_keepalive_tells_a_cancelled_job_from_a_lost_lease(tmp_path):
    import time

    from labqueue import JobQueue, KeepAlive

    path = tmp_path / "jobs.db"
    with JobQueue(path, lease_seconds=30) as q:
        first, second = q.enqueue("t", 1), q.enqueue("t", 2)
        mine, other = q.claim("w", limit=2)
        with KeepAlive(path, mine, lease_seconds=30, interval=0.01) as hb, KeepAlive(
            path, other, lease_seconds=30, interval=0.01
        ) as hb2:
            q.cancel(first)
            q.db.execute("UPDATE jobs SET lease_token = 'someone else' WHERE id = ?", (second,))
            deadline = time.monotonic() + 10
            while not (hb.lost.is_set() and hb2.lost.is_set()) and time.monotonic() < deadline:
                time.sleep(0.01)
        assert hb.lost.is_set() and hb.cancelled.is_set()
        assert hb2.lost.is_set() and not hb2.cancelled.is_set()


def test_reclaim_space_hands_every_free_page_back_in_one_call(tmp_path, clock):
    from labqueue import JobQueue

    with JobQueue(tmp_path / "jobs.db", clock=clock) as q:
        q.enqueue_many("t", [{"pad": "x" * 500}] * 2000)
        finish_all(q, "done")
        clock.advance(100)
        q.enqueue("t", "newest")
        assert q.purge(10).removed == 2000
        free = q.space()["freelist_count"]
        assert free > 100
        assert q.reclaim_space() == free
        assert q.space()["freelist_count"] == 0
        assert q.reclaim_space() == 0
