"""The queue operations issue 23 added, on every backend: put_back (a kind this worker
cannot run), note_crash (a supervisor's note on a dead worker's jobs), finished_within
(metrics' throughput) and latest_jobs (newest first)."""

from __future__ import annotations

import pytest

from labqueue.errors import InvalidArgument


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
