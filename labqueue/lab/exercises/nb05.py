"""Notebook 05's exercise: where the job's effect is committed.

The learner writes ``finish(q, job, effect)``, what a worker does once its handler has
returned the grant's effect. The checker plays two timelines on a fake clock with it:
the stale worker of notebook 04 (Ada must end with one grant, 10 credits), and an effect
that writes and then raises (nothing may stay written, and the job must still be the
worker's, so ``fail()`` can schedule the retry). Both run on the JobQueue class the
notebook passes (the learner's); without one, the tutorial's.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...tutorial.jobqueue import Job, JobQueue
from ..effects import LedgerClosed, grant_queue
from ..walks import LEASE, add_credits, credits
from . import Verdict, not_yet, passed, starting_points

Effect = Callable[[sqlite3.Connection], object]
Finish = Callable[[JobQueue, Job, Effect], object]


def starter_finish(q: JobQueue, job: Job, effect: Effect) -> bool:
    effect(q.db)  # the credits, committed on their own
    return q.complete(job)  # then the completion, in a second commit


def answer_finish(q: JobQueue, job: Job, effect: Effect) -> bool:
    return q.complete(job, effect=effect)  # behind the fence, in the completing transaction


def wrong_finish(q: JobQueue, job: Job, effect: Effect) -> bool:
    """The fence first, the effect after it: right for the stale worker, but two commits."""
    accepted = q.complete(job)
    if accepted:
        effect(q.db)
    return accepted


def _credits_then_raise(job: Job) -> Effect:
    grant = add_credits(job)

    def effect(db: sqlite3.Connection) -> None:
        grant(db)
        raise LedgerClosed("the ledger is closed for the night")

    return effect


def _stale_worker(finish: Finish, folder: Path, queue_class: type | None) -> str | None:
    """worker-a stalls past its lease; worker-b takes over at t=31 and finishes first."""
    q, clock = grant_queue("nb05_stale", folder, queue_class)
    try:
        (a,) = q.claim("worker-a")
        clock.now = LEASE + 1
        (b,) = q.claim("worker-b")
        said_b = finish(q, b, add_credits(b))
        clock.now = 40.0
        said_a = finish(q, a, add_credits(a))
        balance = credits(q)
    finally:
        q.db.close()
    if balance != 10:
        why = "the stale worker's credits landed too" if balance > 10 else "worker-b's grant must land"
        return (
            f"worker-b's finish returned {said_b!r}, stale worker-a's {said_a!r}, and ada has {balance} "
            f"credits for one grant of 10: {why}."
        )
    if said_a or not said_b:
        return f"ada has 10 credits, but finish returned {said_b!r} for worker-b and {said_a!r} for worker-a."
    return None


def _effect_raises(finish: Finish, folder: Path, queue_class: type | None) -> str | None:
    """The grant writes the credits, then raises: nothing may stay, and the job stays ours."""
    q, _clock = grant_queue("nb05_raises", folder, queue_class)
    try:
        (a,) = q.claim("worker-a")
        raised = "nothing"
        try:
            finish(q, a, _credits_then_raise(a))
        except LedgerClosed as exc:
            raised = f"{type(exc).__name__}: {exc}"
        if q.db.in_transaction:  # a finish that left its transaction open: end it as a crash would
            q.db.execute("ROLLBACK")
        balance = credits(q)
        (state,) = q.db.execute("SELECT state FROM jobs WHERE id = ?", (a.id,)).fetchone()
        retry = q.fail(a, raised) if state == "running" else None
    finally:
        q.db.close()
    if state != "running":
        return (
            f"the grant's effect raised ({raised}), yet the job is {state} (ada has {balance} credits): "
            "the completion was committed apart from its effect, so a failed effect is never retried."
        )
    if balance != 0:
        return (
            f"the grant's effect wrote the credits and then raised ({raised}); the credits stayed "
            f"(ada has {balance}), so the retry will grant them a second time."
        )
    if retry != "queued":
        return f"after the effect raised, fail() returned {retry!r}: the job should still be ours to retry."
    return None


def check_finish(finish: object, queue_class: type | None = None) -> Verdict:
    """Passes when `finish(q, job, effect)` lets only the lease holder's effect land, and
    an effect that raises leaves no trace and the job still leased to its worker. The
    timelines run on `queue_class`, the learner's JobQueue (the tutorial's without one)."""
    if not callable(finish):
        return not_yet(f"finish must be a function finish(q, job, effect), got {finish!r}")
    try:
        with tempfile.TemporaryDirectory(prefix="nb05_") as scratch:
            for timeline in (_stale_worker, _effect_raises):
                problem = timeline(finish, Path(scratch), queue_class)
                if problem:
                    return not_yet(problem)
    except Exception as exc:  # the learner's code raised: report it, never raise it
        return not_yet(f"your finish raised {type(exc).__name__}: {exc}")
    return passed(
        "only worker-b's grant landed (ada has 10 credits), and a grant that raised left nothing "
        "behind, with the job still leased to its worker for fail() to retry: one transaction."
    )


CHECKERS = {"finish": check_finish}
STARTERS = {"finish": {"finish": starter_finish}}
ANSWERS = {"finish": {"finish": answer_finish}}
WRONG = {"finish": [{"finish": wrong_finish}, {"finish": lambda q, job, effect: q.complete(job)}]}

starting_points(__name__)
