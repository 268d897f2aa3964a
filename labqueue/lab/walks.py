"""The course's fake-clock walks. Each prints the same lines as the tutorial,
because a FakeClock and a seeded rng make every figure repeat exactly.

Notebooks run them (and show their source); tests compare their output with
the tutorial's transcript in tests/expected/.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..clock import FakeClock
from ..queue import Effect, Job, JobQueue
from ..worker import error_text
from .scratch import db_path

Folder = str | Path | None

LEASE = 30.0
ADA_EMAIL = {"to": "ada@example.com"}
ADA_GRANT = {"user": "ada", "credits": 10}
MAIL_TIMEOUT = "TimeoutError"
ONE_ROW = "SELECT * FROM jobs WHERE id = ?"

# The lines the walks print, filled in from a job's row (a sqlite3.Row is a mapping).
LEASE_LINE = (
    "{label:<38} state={state:<8} attempts={attempts} visible_at={visible_at:.0f} "
    "token={token:<4} worker={worker}"
)
BRIEF_LINE = "state={state} attempts={attempts}"
FINAL_LINE = "job {id} {kind:<12} state={state:<5} attempts={attempts} last_error={last_error}"


@dataclass
class Scene:
    """One queue on a fake clock, and the few moves every walk is told in."""

    q: JobQueue
    clock: FakeClock

    def at(self, t: float) -> None:
        self.clock.now = float(t)

    def take(self, worker: str) -> Job:
        """`worker` asks for work; in these walks the answer is always exactly one job."""
        (job,) = self.q.claim(worker)
        return job

    def row(self, job_id: int = 1) -> sqlite3.Row:
        return self.q.db.execute(ONE_ROW, (job_id,)).fetchone()

    def brief(self) -> str:
        """The job's state and attempt count, as the zombie walks print them."""
        return BRIEF_LINE.format_map(self.row())

    def show(self, label: str) -> None:
        """One line of the lease walk: the label, then what the row holds now."""
        r = dict(self.row())
        print(LEASE_LINE.format(label=label, token="set" if r.pop("lease_token") else "none", **r))


def _scene(name: str, folder: Folder, *, start: float = 0.0, **settings: object) -> Scene:
    clock = FakeClock(start)
    settings.setdefault("lease_seconds", LEASE)
    return Scene(JobQueue(db_path(name, folder), clock=clock, **settings), clock)  # type: ignore[arg-type]


def _stall_and_replace(s: Scene) -> tuple[Job, Job]:
    """worker-a claims at t=0 and stalls; at t=31, a second after its lease ended,
    worker-b claims the same job. Returns (worker-a's stale claim, worker-b's)."""
    stale = s.take("worker-a")
    s.at(LEASE + 1)
    return stale, s.take("worker-b")


# -- step 2: a lease runs out ------------------------------------------------------


def leases(folder: Folder = None) -> JobQueue:
    """One job: claimed, its lease runs out, claimed again; the late token is refused."""
    s = _scene("leases", folder, start=1000.0)
    s.q.enqueue("email", ADA_EMAIL)
    s.show("t=1000 enqueued")
    first = s.take("worker-a")
    s.show("t=1000 worker-a claims")
    s.at(1010)  # inside worker-a's lease: there is nothing to hand out
    print("t=1010 worker-b claims:", s.q.claim("worker-b"))
    s.at(1031)  # the lease ended at 1030
    second = s.take("worker-b")
    s.show("t=1031 lease ran out, worker-b claims")
    print("same token for both claims:", first.lease_token == second.lease_token)
    for name, job in (("worker-a", first), ("worker-b", second)):
        print(f"{name} complete():", s.q.complete(job))
    s.show("t=1031 worker-b completed")
    return s.q


# -- step 4: the late report of a stale worker ---------------------------------------

# The bug on purpose: the row is chosen by its id and nothing else.
UNFENCED_FAIL = "UPDATE jobs SET last_error = :error, visible_at = :now, state = 'queued' WHERE id = :id"


def unfenced_fail(q: JobQueue, job: Job, error: str) -> None:
    """A failure recorded by job id alone. It never asks whether this worker still
    holds the lease, so a stale report reopens a job that someone else finished."""
    q.db.execute(UNFENCED_FAIL, {"error": error, "now": q.clock(), "id": job.id})


def _email_scene(name: str, folder: Folder) -> Scene:
    s = _scene(name, folder)
    s.q.enqueue("email", ADA_EMAIL)
    return s


def zombie_unfenced(folder: Folder = None) -> list[str]:
    """A stale worker's late failure, reported by id: the handler runs three times."""
    print("--- without the fence")
    s = _email_scene("zombie_unfenced", folder)
    stale, current = _stall_and_replace(s)
    print("t=31  worker-b completes:", s.q.complete(current), "->", s.brief())
    s.at(40)  # worker-a's mail server times out at last, and worker-a reports it
    unfenced_fail(s.q, stale, MAIL_TIMEOUT)
    print("t=40  worker-a fails late  ->", s.brief())
    third = s.take("worker-c")  # the finished job is back in the queue
    print("t=40  worker-c claims      ->", s.brief())
    handed = {"worker-a": stale, "worker-b": current, "worker-c": third}
    runs = [f"{name} (attempt {job.attempts})" for name, job in handed.items()]
    print(f"the handler ran {len(handed)} times: {', '.join(runs)}")
    s.q.close()
    return runs


def zombie_fenced(folder: Folder = None) -> None:
    """The same timeline with the token checked: the stale failure is ignored."""
    print("--- with the fence")
    s = _email_scene("zombie_fenced", folder)
    stale, current = _stall_and_replace(s)
    print("t=31  worker-b completes:", s.q.complete(current), "->", s.brief())
    s.at(40)
    outcome = s.q.fail(stale, MAIL_TIMEOUT)  # fenced: refused, since the token is stale
    print("t=40  worker-a q.fail() returned:", outcome, "->", s.brief())
    print("t=40  worker-c claims:", s.q.claim("worker-c"))
    s.q.close()


def zombie_unreplaced(folder: Folder = None) -> None:
    """A slow worker nobody replaced: its late completion still counts."""
    print("--- a slow worker that nobody replaced")
    s = _email_scene("zombie_unreplaced", folder)
    overdue = s.take("worker-a")
    s.at(45)  # 15 s past the deadline, yet no other worker has asked for work since
    print("t=45  worker-a complete():", s.q.complete(overdue), "->", s.brief())
    s.q.close()


def zombie_workers(folder: Folder = None) -> None:
    """The three zombie walks in the tutorial's order, a blank line between them."""
    for k, walk in enumerate((zombie_unfenced, zombie_fenced, zombie_unreplaced)):
        if k:
            print()
        walk(folder)


# -- step 5: the effect inside the completing transaction ------------------------------

ACCOUNTS_TABLE = "CREATE TABLE accounts (user TEXT NOT NULL PRIMARY KEY, credits INTEGER NOT NULL DEFAULT 0)"
GRANT_UPSERT = """
INSERT INTO accounts (user, credits) VALUES (:user, :credits)
ON CONFLICT (user) DO UPDATE SET credits = accounts.credits + excluded.credits
"""


def add_credits(job: Job) -> Effect:
    """The grant job's database effect: add the job's credits to the user's balance.
    It writes through whatever connection it is handed, so complete() can run it
    in the same transaction as the fenced UPDATE that marks the job done."""
    grant = {"user": job.payload["user"], "credits": job.payload["credits"]}

    def effect(db: sqlite3.Connection) -> None:
        db.execute(GRANT_UPSERT, grant)

    return effect


def credits(q: JobQueue, user: str = "ada") -> int:
    balance = "SELECT COALESCE(SUM(credits), 0) FROM accounts WHERE user = ?"
    return q.db.execute(balance, (user,)).fetchone()[0]


def grant_queue(name: str, folder: Folder = None) -> tuple[JobQueue, FakeClock]:
    """A fresh queue at t=0 with an empty accounts table and one job granting ada 10 credits."""
    s = _grant_scene(name, folder)
    return s.q, s.clock


def _grant_scene(name: str, folder: Folder) -> Scene:
    s = _scene(name, folder)
    s.q.db.execute(ACCOUNTS_TABLE)
    s.q.enqueue("grant", ADA_GRANT)
    return s


def _balance(s: Scene) -> int:
    total = credits(s.q)
    print("ada has", total, "credits")
    s.q.close()
    return total


def effect_separate(folder: Folder = None) -> int:
    """Effect, then complete, as two commits: the stale worker's credits land too."""
    print("--- effect first, then complete (two separate commits)")
    s = _grant_scene("effect_separate", folder)
    stale, current = _stall_and_replace(s)
    # worker-b works first; worker-a wakes from its stall afterwards and carries on.
    for name, job in (("worker-b", current), ("worker-a", stale)):
        add_credits(job)(s.q.db)  # committed on its own, whatever complete() says next
        print(f"{name} complete():", s.q.complete(job))
    return _balance(s)


def effect_together(folder: Folder = None) -> int:
    """The effect passed to complete(): it runs only after the fence, in one transaction."""
    print("--- effect passed to complete() (one transaction)")
    s = _grant_scene("effect_together", folder)
    stale, current = _stall_and_replace(s)
    for name, job in (("worker-b", current), ("worker-a", stale)):
        print(f"{name} complete():", s.q.complete(job, effect=add_credits(job)))
    return _balance(s)


def effect_in_transaction(folder: Folder = None) -> None:
    effect_separate(folder)
    print()
    effect_together(folder)


# -- step 7: retries with full jitter, then the dead letter ----------------------------

# kind -> (first attempt that succeeds, or None for never; what it raises until then)
RETRY_KINDS: dict[str, tuple[int | None, type[Exception], str]] = {
    "flaky": (3, TimeoutError, "upstream timed out"),
    "always_fails": (None, ValueError, "payload has no recipient"),
}
# The earliest moment any unfinished job (queued, or running under a lease) is due.
NEXT_DUE = "SELECT MIN(visible_at) FROM jobs WHERE finished_at IS NULL"


def _retry_walk_handler(job: Job) -> None:
    succeeds_from, error, message = RETRY_KINDS[job.kind]
    if succeeds_from is None or job.attempts < succeeds_from:
        raise error(message)


def _attempt(q: JobQueue, job: Job) -> str:
    """Run one attempt of a retry-walk job and report it; returns how it ended."""
    try:
        _retry_walk_handler(job)
    except Exception as exc:
        outcome = q.fail(job, error_text(exc))
        if outcome != "queued":
            return f"failed, state={outcome}"
        wait = q.db.execute(ONE_ROW, (job.id,)).fetchone()["visible_at"] - q.clock()
        return f"failed, retry in {wait:4.1f}s"
    return f"complete={q.complete(job)}"


def retries(folder: Folder = None, seed: int = 7) -> JobQueue:
    """Two jobs on a fake clock with a seeded rng: a flaky one and a hopeless one.
    The clock jumps straight to the next retry each time, so the walk takes no time."""
    s = _scene(
        "retries",
        folder,
        backoff_cap=60.0,
        backoff_base=2.0,
        max_attempts=4,
        rng=random.Random(seed).random,
    )
    for kind in RETRY_KINDS:
        s.q.enqueue(kind, {})
    while (due := s.q.db.execute(NEXT_DUE).fetchone()[0]) is not None:
        s.at(max(s.clock.now, due))
        for job in s.q.claim("sim", limit=10):
            who = f"job {job.id} {job.kind:<12}"
            attempt = f"attempt {job.attempts}/{job.max_attempts}"
            print(f"t={s.clock.now:6.1f}  {who} {attempt}  {_attempt(s.q, job)}")
    print()
    for r in s.q.db.execute("SELECT * FROM jobs ORDER BY id"):
        print(FINAL_LINE.format_map(r))
    return s.q


# -- step 10: what to watch --------------------------------------------------------------


def ops_queue(folder: Folder = None) -> tuple[JobQueue, FakeClock]:
    """Six jobs, one in each situation stats() must tell apart: done (job 1), dead (2),
    a lease that has run out (3), a live lease (4), ready (5) and scheduled for later (6)."""
    s = _scene("ops", folder, start=10_000.0, max_attempts=2, rng=lambda: 0.0)  # rng=0: retry at once
    for n in range(6):
        s.q.enqueue("email", {"n": n}, delay=600 if n == 5 else 0)
    s.q.complete(s.take("w1"))
    for _ in range(2):  # both of job 2's attempts fail, so it ends dead
        s.q.fail(s.take("w1"), "TimeoutError")
    s.take("w1")  # job 3's worker "crashes" and never reports back,
    s.clock.advance(LEASE + 1)  # so its lease runs out
    s.take("w2")  # job 4, next in line, under a live lease
    return s.q, s.clock


def print_stats(q: JobQueue, title: str) -> None:
    print(title)
    for name, value in q.stats().items():
        print(f"  {name:<20} {value}")


def ops(folder: Folder = None) -> JobQueue:
    """stats() of the six jobs, then the dead one requeued and stats() again."""
    q, _ = ops_queue(folder)
    print_stats(q, "stats at t+31 s:")
    revived = q.requeue_dead()
    print(f"requeue_dead(): {revived}")
    print_stats(q, "after requeue_dead():")
    return q
