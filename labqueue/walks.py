"""The course's fake-clock walks. Each prints the same lines as the tutorial,
because a FakeClock and a seeded rng make every figure repeat exactly.

Notebooks run them (and show their source); tests compare their output with
the tutorial's transcript in tests/expected/.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from .clock import FakeClock
from .queue import Job, JobQueue
from .scratch import db_path

Folder = str | Path | None


def _job_row(q: JobQueue, job_id: int = 1) -> sqlite3.Row:
    return q.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def show_lease(q: JobQueue, label: str) -> None:
    r = _job_row(q)
    token = "set" if r["lease_token"] else "none"
    print(
        f"{label:<38} state={r['state']:<8} attempts={r['attempts']} "
        f"visible_at={r['visible_at']:.0f} token={token:<4} worker={r['worker']}"
    )


def leases(folder: Folder = None) -> JobQueue:
    """One job: claimed, its lease runs out, claimed again; the late token is refused."""
    clock = FakeClock(1000.0)
    q = JobQueue(db_path("leases", folder), lease_seconds=30, clock=clock)
    q.enqueue("email", {"to": "ada@example.com"})
    show_lease(q, "t=1000 enqueued")
    (a,) = q.claim("worker-a")
    show_lease(q, "t=1000 worker-a claims")
    clock.now = 1010
    print("t=1010 worker-b claims:", q.claim("worker-b"))
    clock.now = 1031
    (b,) = q.claim("worker-b")
    show_lease(q, "t=1031 lease ran out, worker-b claims")
    print("same token for both claims:", a.lease_token == b.lease_token)
    print("worker-a complete():", q.complete(a))
    print("worker-b complete():", q.complete(b))
    show_lease(q, "t=1031 worker-b completed")
    return q


def _one_email_queue(name: str, folder: Folder) -> tuple[JobQueue, FakeClock]:
    clock = FakeClock(0.0)
    q = JobQueue(db_path(name, folder), lease_seconds=30, clock=clock)
    q.enqueue("email", {"to": "ada@example.com"})
    return q, clock


def _state(q: JobQueue) -> str:
    r = _job_row(q)
    return f"state={r['state']} attempts={r['attempts']}"


def unfenced_fail(q: JobQueue, job: Job, error: str) -> None:
    """The bug: fail a job by its id alone, without asking who holds the lease."""
    q.db.execute(
        "UPDATE jobs SET state = 'queued', visible_at = ?, last_error = ? WHERE id = ?",
        (q.clock(), error, job.id),
    )


def zombie_unfenced(folder: Folder = None) -> list[str]:
    """A stale worker's late failure, reported by id: the handler runs three times."""
    print("--- without the fence")
    q, clock = _one_email_queue("zombie_unfenced", folder)
    runs = []
    (a,) = q.claim("worker-a")
    runs.append(f"worker-a (attempt {a.attempts})")
    clock.now = 31  # worker-a is still busy, but its 30-second lease has ended
    (b,) = q.claim("worker-b")
    runs.append(f"worker-b (attempt {b.attempts})")
    print("t=31  worker-b completes:", q.complete(b), "->", _state(q))
    clock.now = 40  # worker-a finally hears a timeout from the mail server
    unfenced_fail(q, a, "TimeoutError")
    print("t=40  worker-a fails late  ->", _state(q))
    (c,) = q.claim("worker-c")
    runs.append(f"worker-c (attempt {c.attempts})")
    print("t=40  worker-c claims      ->", _state(q))
    print(f"the handler ran {len(runs)} times: " + ", ".join(runs))
    q.close()
    return runs


def zombie_fenced(folder: Folder = None) -> None:
    """The same timeline with the token checked: the stale failure is ignored."""
    print("--- with the fence")
    q, clock = _one_email_queue("zombie_fenced", folder)
    (a,) = q.claim("worker-a")
    clock.now = 31
    (b,) = q.claim("worker-b")
    print("t=31  worker-b completes:", q.complete(b), "->", _state(q))
    clock.now = 40
    print("t=40  worker-a q.fail() returned:", q.fail(a, "TimeoutError"), "->", _state(q))
    print("t=40  worker-c claims:", q.claim("worker-c"))
    q.close()


def zombie_unreplaced(folder: Folder = None) -> None:
    """A slow worker nobody replaced: its late completion still counts."""
    print("--- a slow worker that nobody replaced")
    q, clock = _one_email_queue("zombie_unreplaced", folder)
    (a,) = q.claim("worker-a")
    clock.now = 45  # the lease ended at t=30, but nobody else has claimed the job
    print("t=45  worker-a complete():", q.complete(a), "->", _state(q))
    q.close()


def zombie_workers(folder: Folder = None) -> None:
    zombie_unfenced(folder)
    print()
    zombie_fenced(folder)
    print()
    zombie_unreplaced(folder)


def _grant_queue(name: str, folder: Folder) -> tuple[JobQueue, FakeClock]:
    clock = FakeClock(0.0)
    q = JobQueue(db_path(name, folder), lease_seconds=30, clock=clock)
    q.db.execute("CREATE TABLE accounts (user TEXT PRIMARY KEY, credits INTEGER NOT NULL)")
    q.enqueue("grant", {"user": "ada", "credits": 10})
    return q, clock


def add_credits(job: Job):
    """The job's effect: add its credits to the user's account (an upsert)."""

    def effect(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO accounts (user, credits) VALUES (?, ?) "
            "ON CONFLICT (user) DO UPDATE SET credits = credits + excluded.credits",
            (job.payload["user"], job.payload["credits"]),
        )

    return effect


def credits(q: JobQueue, user: str = "ada") -> int:
    row = q.db.execute("SELECT credits FROM accounts WHERE user = ?", (user,)).fetchone()
    return 0 if row is None else row[0]


def effect_separate(folder: Folder = None) -> int:
    """Effect, then complete, as two commits: the stale worker's credits land too."""
    print("--- effect first, then complete (two separate commits)")
    q, clock = _grant_queue("effect_separate", folder)
    (a,) = q.claim("worker-a")
    clock.now = 31  # worker-a stalls past its lease
    (b,) = q.claim("worker-b")
    add_credits(b)(q.db)
    print("worker-b complete():", q.complete(b))
    add_credits(a)(q.db)  # worker-a wakes up and does its work anyway
    print("worker-a complete():", q.complete(a))
    total = credits(q)
    print("ada has", total, "credits")
    q.close()
    return total


def effect_together(folder: Folder = None) -> int:
    """The effect passed to complete(): it runs only after the fence, in one transaction."""
    print("--- effect passed to complete() (one transaction)")
    q, clock = _grant_queue("effect_together", folder)
    (a,) = q.claim("worker-a")
    clock.now = 31
    (b,) = q.claim("worker-b")
    print("worker-b complete():", q.complete(b, effect=add_credits(b)))
    print("worker-a complete():", q.complete(a, effect=add_credits(a)))
    total = credits(q)
    print("ada has", total, "credits")
    q.close()
    return total


def effect_in_transaction(folder: Folder = None) -> None:
    effect_separate(folder)
    print()
    effect_together(folder)


def _retry_handler(job: Job) -> None:
    if job.kind == "flaky" and job.attempts < 3:
        raise TimeoutError("upstream timed out")
    if job.kind == "always_fails":
        raise ValueError("payload has no recipient")


def retries(folder: Folder = None, seed: int = 7) -> JobQueue:
    """Two jobs on a fake clock with a seeded rng: a flaky one and a hopeless one."""
    clock = FakeClock(0.0)
    q = JobQueue(
        db_path("retries", folder),
        lease_seconds=30,
        max_attempts=4,
        backoff_base=2.0,
        backoff_cap=60.0,
        clock=clock,
        rng=random.Random(seed).random,
    )
    q.enqueue("flaky", {})
    q.enqueue("always_fails", {})
    next_due = "SELECT MIN(visible_at) FROM jobs WHERE state IN ('queued', 'running')"
    while (due := q.db.execute(next_due).fetchone()[0]) is not None:
        clock.now = max(clock.now, due)
        for job in q.claim("sim", limit=10):
            label = (
                f"t={clock.now:6.1f}  job {job.id} {job.kind:<12} attempt {job.attempts}/{job.max_attempts}"
            )
            try:
                _retry_handler(job)
            except Exception as exc:
                state = q.fail(job, f"{type(exc).__name__}: {exc}")
                if state == "queued":
                    retry_at = _job_row(q, job.id)["visible_at"]
                    print(f"{label}  failed, retry in {retry_at - clock.now:4.1f}s")
                else:
                    print(f"{label}  failed, state={state}")
            else:
                print(f"{label}  complete={q.complete(job)}")
    print()
    for r in q.db.execute("SELECT id, kind, state, attempts, last_error FROM jobs ORDER BY id"):
        print(
            f"job {r['id']} {r['kind']:<12} state={r['state']:<5} "
            f"attempts={r['attempts']} last_error={r['last_error']}"
        )
    return q


def ops_queue(folder: Folder = None) -> tuple[JobQueue, FakeClock]:
    """Six jobs in every state: done, dead, an expired lease, a live lease, ready, delayed."""
    clock = FakeClock(10_000.0)
    q = JobQueue(db_path("ops", folder), lease_seconds=30, max_attempts=2, clock=clock, rng=lambda: 0.0)
    for n in range(5):
        q.enqueue("email", {"n": n})  # jobs 1 to 5
    q.enqueue("email", {"n": 5}, delay=600)  # job 6, for later
    (j1,) = q.claim("w1")
    q.complete(j1)  # job 1: done
    (j2,) = q.claim("w1")
    q.fail(j2, "TimeoutError")  # job 2 fails; rng=0 makes the retry immediate
    (j2,) = q.claim("w1")
    q.fail(j2, "TimeoutError")  # its last attempt fails too: dead
    q.claim("w1")  # job 3: this worker "crashes" and never reports
    clock.now += 31  # ... so its lease runs out
    q.claim("w2")  # job 4: next in line, a live lease
    return q, clock


def print_stats(q: JobQueue, title: str) -> None:
    print(title)
    for key, value in q.stats().items():
        print(f"  {key:<20} {value}")


def ops(folder: Folder = None) -> JobQueue:
    q, _ = ops_queue(folder)
    print_stats(q, "stats at t+31 s:")
    print("requeue_dead():", q.requeue_dead())
    print_stats(q, "after requeue_dead():")
    return q
