"""Three edges where the course's queue departs from the tutorial's, whose code put back every
dead job for `requeue_dead([])`, leased every ready job for `claim(limit=-1)` (SQLite reads
`LIMIT -1` as no limit) and raised OverflowError in `fail` past about 1,025 attempts."""

from __future__ import annotations

import pytest

from labqueue import FakeClock
from labqueue.tutorial.jobqueue import JobQueue


@pytest.fixture
def q(tmp_path):
    queue = JobQueue(tmp_path / "edges.db", clock=FakeClock(1000.0), rng=lambda: 1.0)
    yield queue
    queue.db.close()


def dead_jobs(q: JobQueue, n: int) -> list[int]:
    ids = [q.enqueue("email", {"n": i}, max_attempts=1) for i in range(n)]
    for job in q.claim("w", limit=n):
        assert q.fail(job, "boom") == "dead"
    return ids


def test_requeue_dead_of_no_ids_puts_back_nothing(q):
    first, second, third = dead_jobs(q, 3)
    assert q.requeue_dead([]) == []
    assert q.stats()["dead"] == 3
    assert q.requeue_dead([second]) == [second]
    assert q.requeue_dead() == [first, third]  # None still means every dead job


@pytest.mark.parametrize("limit", [0, -1, -5, 1.5, "2", None])
def test_claim_refuses_a_limit_below_one_and_names_it(q, limit):
    q.enqueue("email", {})
    q.enqueue("email", {})
    with pytest.raises(ValueError, match=f"limit must be a whole number, 1 or more, got {limit!r}"):
        q.claim("w", limit=limit)
    assert q.stats()["queued"] == 2  # nothing was leased


@pytest.mark.parametrize("attempts", [1024, 1025, 1026, 5000, 10**9])
def test_backoff_stops_at_the_cap_for_any_attempt_number(q, attempts):
    q.enqueue("email", {}, max_attempts=10**10)
    (job,) = q.claim("w")
    q.db.execute("UPDATE jobs SET attempts = ?", (attempts,))
    late = type(job)(**{**job.__dict__, "attempts": attempts})
    assert q.fail(late, "boom") == "queued"
    (visible_at,) = q.db.execute("SELECT visible_at FROM jobs").fetchone()
    assert visible_at == 1000.0 + q.backoff_cap  # rng() is 1.0: the whole ceiling, which is the cap


def test_backoff_still_doubles_below_the_cap(q):
    q.enqueue("email", {})
    delays = []
    for _ in range(4):
        (job,) = q.claim("w")
        assert q.fail(job, "boom") == "queued"
        (visible_at,) = q.db.execute("SELECT visible_at FROM jobs").fetchone()
        delays.append(visible_at - q.clock())
        q.clock.now = visible_at
    assert delays == [1.0, 2.0, 4.0, 8.0]
