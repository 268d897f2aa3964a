"""Notebook 02's exercises: a lease is one column, visible_at, and one comparison.

1. ``check_first_claim_at``: worker-a claims at t=1000 with a 45-second lease; predict the
   first whole second at which worker-b's claim gets the job.
2. ``check_ready_where``: write the condition that makes a job claimable, the WHERE of the
   claim's sub-select. The checker puts it into the tutorial's CLAIM statement (notebook 02's
   cell, ``labqueue.tutorial.jobqueue.CLAIM``) and claims from six jobs, one in every
   situation: ready, delayed, leased, lease expired, done, dead.

Both play on a fake clock with the tutorial's queue, so the verdicts are exact. The first can
take the learner's own ``JobQueue`` class, so it walks the claim as the learner wrote it.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from ...clock import FakeClock
from ...tutorial import jobqueue as tutorial
from . import Verdict, not_yet, passed, starting_points

START = 1000.0
LEASE = 45.0

#: The condition in the tutorial's CLAIM that exercise 2 asks the learner to write.
READY = "state IN ('queued', 'running') AND visible_at <= :now"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- exercise 1 ---------------------------------------------------------------------------


def first_claim(
    lease_seconds: float = LEASE, until: float = START + 300, queue_class: type | None = None
) -> tuple[float | None, list[str]]:
    """worker-a claims at t=1000; worker-b tries once a second. The first second at which
    worker-b gets the job, and what the tries around it returned. `queue_class` is the
    tutorial's JobQueue unless given (the learner's, from notebook 02's cells)."""
    clock = FakeClock(START)
    make = queue_class or tutorial.JobQueue
    with tempfile.TemporaryDirectory(prefix="nb02_") as scratch:
        q = make(Path(scratch) / "lease.db", lease_seconds=lease_seconds, clock=clock)
        try:
            return _walk(q, clock, until)
        finally:
            q.db.close()


def _walk(q, clock: FakeClock, until: float) -> tuple[float | None, list[str]]:
    q.enqueue("email", {"to": "ada@example.com"})
    (a,) = q.claim("worker-a")
    log = [f"t={START:.0f} worker-a claims: lease until {a.lease_expires_at:.0f}"]
    while clock.now < until:
        clock.advance(1)
        got = q.claim("worker-b")
        if got:
            log.append(f"t={clock.now:.0f} worker-b claims: attempt {got[0].attempts}")
            return clock.now, log
        log.append(f"t={clock.now:.0f} worker-b claims: []")
    return None, log


def check_first_claim_at(first_claim_at: object, queue_class: type | None = None) -> Verdict:
    """Passes when `first_claim_at` is the first second at which worker-b gets the job from
    `queue_class` (the learner's JobQueue; the tutorial's when None)."""
    if not _number(first_claim_at):
        return not_yet(f"first_claim_at must be a time in seconds, such as 1234, got {first_claim_at!r}")
    actual, log = first_claim(LEASE, queue_class=queue_class)
    if actual is None:
        return not_yet(
            f"worker-b never got the job in 300 s ({log[-1]}): does your claim take a job whose"
            " lease ran out?"
        )
    around = "; ".join(log[-2:])
    if first_claim_at == actual:
        return passed(
            f"at t={actual:.0f} the clock reached visible_at ({START:.0f} + {LEASE:.0f}), and "
            f"visible_at <= now let worker-b in ({around})."
        )
    hint = "too early: the lease still hides the job" if first_claim_at < actual else "too late"
    return not_yet(f"{first_claim_at:g} is {hint}. The walk: {around}.")


# -- exercise 2 ---------------------------------------------------------------------------

#: The six jobs of the scene, by id, and which of them a claim at t=1040 may take.
SCENE = {
    1: "lease expired",
    2: "done",
    3: "dead",
    4: "leased (until 1050)",
    5: "ready",
    6: "delayed (until 1140)",
}
CLAIMABLE = {1, 5}


def _scene(folder: Path) -> tuple[tutorial.JobQueue, FakeClock]:
    """Every situation a job can be in at t=1040, built through the tutorial queue's own API."""
    clock = FakeClock(START)
    q = tutorial.JobQueue(folder / "ready.db", lease_seconds=30, clock=clock, rng=lambda: 0.0)
    q.enqueue("email", {"n": 1})
    q.enqueue("email", {"n": 2})
    q.enqueue("email", {"n": 3}, max_attempts=1)
    expired, finished, failed = q.claim("worker-a", limit=3)  # leases until 1030
    q.complete(finished)
    q.fail(failed, "ValueError: bad address")  # its only attempt: dead
    clock.now = START + 20
    q.enqueue("email", {"n": 4})
    (leased,) = q.claim("worker-b")  # job 4, leased until 1050; job 1's lease still runs
    clock.now = START + 40
    q.enqueue("email", {"n": 5})
    q.enqueue("email", {"n": 6}, delay=100)
    assert (expired.id, leased.id) == (1, 4)
    return q, clock


def claim_statement(ready_where: str) -> str:
    """The tutorial's CLAIM with `ready_where` as the sub-select's condition."""
    return tutorial.CLAIM.replace(READY, ready_where)


def check_ready_where(ready_where: object) -> Verdict:
    """Passes when the claim built with `ready_where` takes, at t=1040, exactly the ready
    job and the one whose lease expired."""
    if not isinstance(ready_where, str) or not ready_where.strip():
        return not_yet(f"ready_where must be a SQL condition in a string, got {ready_where!r}")
    with tempfile.TemporaryDirectory(prefix="nb02_") as scratch:
        q, clock = _scene(Path(scratch))
        now = clock.now
        params = {"now": now, "lease_ends": now + 30, "token": "t", "worker": "worker-c", "limit": 10}
        try:
            with q._tx() as db:
                taken = {row["id"] for row in db.execute(claim_statement(ready_where), params).fetchall()}
        except sqlite3.Error as exc:
            return not_yet(f"the claim with your condition did not run: {type(exc).__name__}: {exc}")
        finally:
            q.db.close()

    def named(ids: set[int]) -> str:
        return ", ".join(SCENE[i] for i in sorted(ids)) or "nothing"

    if taken == CLAIMABLE:
        left = named(set(SCENE) - taken)
        return passed(f"at t=1040 your claim took exactly: {named(taken)}; it left {left}.")
    problems = []
    if taken - CLAIMABLE:
        problems.append(f"it also took {named(taken - CLAIMABLE)}")
    if CLAIMABLE - taken:
        problems.append(f"it missed {named(CLAIMABLE - taken)}")
    return not_yet(f"at t=1040 your claim took {named(taken)}: {' and '.join(problems)}.")


CHECKERS = {"first_claim_at": check_first_claim_at, "ready_where": check_ready_where}
STARTERS = {"first_claim_at": {"first_claim_at": None}, "ready_where": {"ready_where": "state = 'queued'"}}
ANSWERS = {"first_claim_at": {"first_claim_at": 1045}, "ready_where": {"ready_where": READY}}
WRONG = {
    "first_claim_at": [{"first_claim_at": 1046}, {"first_claim_at": 1030}, {"first_claim_at": True}],
    "ready_where": [
        {"ready_where": "state IN ('queued', 'running')"},  # takes a job whose lease still runs
        {"ready_where": "visible_at <= :now"},  # takes finished and dead jobs again
        {"ready_where": "state = 'queued' AND visible_at <= :now"},  # never reclaims an expired lease
    ],
}

starting_points(__name__)
