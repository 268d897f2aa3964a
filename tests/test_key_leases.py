"""A keyed job's lease holds a place of its key, so for keyed jobs the deadline is part of
the fence: once it has passed, the holder's renewals, completions and failures are refused
(the place may have gone to another job of the key). An unkeyed job keeps the tutorial's
rule, a late report accepted while nobody took the job over. And a key runs no more jobs
than the strictest limit among its running jobs, whatever limits its later jobs carry.
Both backends. Real worker processes frozen past their lease: tests/test_key_freeze_soak.py."""

from __future__ import annotations

from collections import Counter

import pytest

from labqueue.core import Finished


def keyed(q, n: int, key: str = "cust:7", limit: int = 1) -> list[int]:
    return [q.enqueue("sync", {"n": i}, concurrency_key=key, concurrency_limit=limit) for i in range(n)]


def test_a_keyed_lease_that_ran_out_cannot_be_renewed_completed_or_failed(make_queue, clock):
    q = make_queue()
    first, second = keyed(q, 2)
    stalled = q.claim_next("a")
    assert stalled.id == first and q.claim_next("b") is None  # limit 1: the key is full
    clock.advance(31)  # a's lease (30 s) ran out while it stalled
    taker = q.claim_next("b")
    assert taker.id == second  # the key's place went to the next job
    # a comes back: nothing it says is accepted any more, though its token still matches
    assert q.heartbeat(stalled) is False
    assert q.extend([stalled]) == []
    assert q.complete(stalled, effect=lambda db: pytest.fail("a lost lease's effect ran")) is False
    assert q.fail(stalled, "late error") is None
    assert q.settle([Finished(stalled)])[0] == ["lost"]
    assert q.job(first).state == "running" and q.job(first).last_error is None
    assert q.complete(taker) is True  # the current holder reports as usual


def test_a_keyed_lease_that_ran_out_is_lost_even_before_anyone_takes_the_key(make_queue, clock):
    q = make_queue()
    (only,) = keyed(q, 1)
    job = q.claim_next("a")
    clock.advance(31)
    assert q.heartbeat(job) is False  # the deadline passed: the lease does not come back to life
    assert q.complete(job) is False
    again = q.claim_next("b")  # the job runs again under a new claim
    assert again.id == only and again.attempts == 2 and q.complete(again)


def test_a_live_keyed_lease_renews_and_completes(make_queue, clock):
    q = make_queue()
    keyed(q, 1)
    job = q.claim_next("a")
    clock.advance(29)
    assert q.heartbeat(job) is True
    clock.advance(29)  # 58 s after the claim, within the renewed lease
    assert q.extend([job])[0].id == job.id
    assert q.settle([Finished(job)])[0] == ["done"]


def test_an_unkeyed_lease_that_ran_out_but_was_not_taken_keeps_the_tutorials_rule(make_queue, clock):
    q = make_queue()
    q.enqueue("plain", {})
    job = q.claim_next("a")
    clock.advance(31)
    assert q.heartbeat(job) is True  # nobody took it over: the token still matches
    assert q.complete(job) is True


def running_keys(q, clock) -> Counter:
    now = clock()
    return Counter(r.concurrency_key for r in q.jobs(state="running") if r.visible_at > now)


@pytest.mark.parametrize("claim", ["claim", "claim_batch", "claim_next"])
def test_a_key_runs_no_more_than_the_strictest_limit_of_its_running_jobs(make_queue, clock, claim):
    q = make_queue()
    strict = keyed(q, 1, limit=1)[0]
    keyed(q, 3, limit=3)

    def take(worker: str) -> list:
        if claim == "claim_next":
            job = q.claim_next(worker)
            return [] if job is None else [job]
        return q.claim(worker, limit=10) if claim == "claim" else q.claim_batch(worker, 10)

    taken = take("a")
    assert [job.id for job in taken] == [strict]  # limit 1 runs alone...
    assert take("b") == [] and take("c") == []  # ...and nothing else of its key starts meanwhile
    assert running_keys(q, clock) == {"cust:7": 1}
    assert q.complete(taken[0])
    assert len(take("b")) + len(take("c")) + len(take("d")) == 3  # then the limit-3 jobs: three


def test_a_stricter_job_waits_until_its_key_runs_fewer_than_its_limit(make_queue, clock):
    q = make_queue()
    loose = keyed(q, 2, limit=3)
    strict = keyed(q, 1, limit=1)[0]
    first = q.claim("a", limit=10)
    assert sorted(job.id for job in first) == loose  # the limit-1 job waits: two run already
    assert q.claim("b", limit=10) == []
    assert q.complete(first[0]) and q.claim("b", limit=10) == []  # one still runs
    assert q.complete(first[1])
    assert [job.id for job in q.claim("b", limit=10)] == [strict]


def test_waiting_on_keys_counts_jobs_held_back_by_a_stricter_running_job(make_queue):
    q = make_queue()
    keyed(q, 1, limit=1)
    keyed(q, 2, limit=5)
    assert len(q.claim("a", limit=10)) == 1
    assert q.waiting_on_keys() == {"cust:7": 2}
