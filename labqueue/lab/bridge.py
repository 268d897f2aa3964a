"""Notebook 13: the queue Part 1 built beside labqueue, the production package.

`walk_both` tells the lease walk of notebook 02 on both queues, so a learner sees the same
rules give the same answers; `drain_both` drains the same no-op jobs through one worker
process of each, in alternating rounds of one run, and `plot_drains` puts them on one chart.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..queue import JobQueue as Labqueue
from ..tutorial import process
from ..tutorial.jobqueue import JobQueue as TutorialQueue
from .assets import new_figure
from .demo_handlers import start_demo_worker
from .scratch import db_path

Folder = str | os.PathLike[str] | None
QUEUES = ("your queue", "labqueue")
LEASE = 60.0  # long enough that no lease ends during a drain
IDLE_EXIT = 0.5  # each worker leaves half a second after the last job
MAX_JOBS = 100_000


@dataclass(frozen=True)
class Drain:
    """One worker process draining `jobs` no-op jobs, timed from the database's own
    completion times: the first job's finished_at to the last one's, so the time Python
    takes to start the process is left out for both."""

    queue: str
    round: int
    jobs: int
    seconds: float

    @property
    def jobs_per_s(self) -> float:
        return (self.jobs - 1) / self.seconds if self.seconds > 0 else float("nan")


def walk_both(lease: float = 30.0, folder: Folder = None) -> list[dict[str, Any]]:
    """Notebook 02's walk on each queue: worker-a claims, worker-b asks too early, the lease
    runs out, worker-b claims, both complete. One row per step and queue."""
    rows = []
    for name, cls in zip(QUEUES, (TutorialQueue, Labqueue), strict=True):
        clock = FakeClock(1000.0)
        q = cls(
            db_path(f"bridge_walk_{'tutorial' if cls is TutorialQueue else 'labqueue'}", folder),
            lease_seconds=lease,
            clock=clock,
        )
        q.enqueue("email", {"to": "ada@example.com"})
        (a,) = q.claim("worker-a")
        clock.now = 1010.0
        too_early = q.claim("worker-b")
        clock.now = 1000.0 + lease + 1
        (b,) = q.claim("worker-b")
        steps = {
            "worker-b at 1010 gets": len(too_early),
            "attempts after the reclaim": b.attempts,
            "new token": a.lease_token != b.lease_token,
            "worker-a's late complete()": q.complete(a),
            "worker-b's complete()": q.complete(b),
        }
        rows += [{"step": step, "queue": name, "result": result} for step, result in steps.items()]
        q.db.close()
    return rows


def _span(path: Path) -> tuple[int, float]:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        done, first, last = db.execute(
            "SELECT COUNT(*), MIN(finished_at), MAX(finished_at) FROM jobs WHERE state = 'done'"
        ).fetchone()
    finally:
        db.close()
    return done, (last - first) if done else 0.0


def _drain(queue: str, n_jobs: int, rnd: int, folder: Folder, code: Folder, timeout: float) -> Drain:
    slug = "tutorial" if queue == QUEUES[0] else "labqueue"
    path = db_path(f"bridge_drain_{slug}", folder)
    if queue == QUEUES[0]:
        q = TutorialQueue(path)
        q.enqueue_many("noop", [{}] * n_jobs)
        q.db.close()
        worker = process.start_worker(path, "w1", LEASE, IDLE_EXIT, code=code)
    else:
        with Labqueue(path) as lq:
            lq.enqueue_many("noop", [{}] * n_jobs)
        worker = start_demo_worker(path, "w1", LEASE, IDLE_EXIT)
    try:
        worker.wait(timeout=timeout)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    done, seconds = _span(path)
    if done != n_jobs:
        raise RuntimeError(f"{queue}: {done} of {n_jobs} jobs done after the worker left")
    return Drain(queue, rnd, n_jobs, seconds)


def drain_both(
    n_jobs: int = 2000,
    rounds: int = 2,
    *,
    folder: Folder = None,
    code: Folder = None,
    timeout: float = 120.0,
    progress: bool = True,
) -> list[Drain]:
    """Drain `n_jobs` no-op jobs through one worker of each queue, `rounds` times, the order
    alternating each round so neither always runs on a warmer machine. `code` is the
    learner's workspace (their worker and queue); without it, the course's."""
    if not isinstance(n_jobs, int) or isinstance(n_jobs, bool) or not 2 <= n_jobs <= MAX_JOBS:
        raise InvalidArgument(f"n_jobs must be a whole number from 2 to {MAX_JOBS:,}, got {n_jobs!r}")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= 20:
        raise InvalidArgument(f"rounds must be a whole number from 1 to 20, got {rounds!r}")
    plan = [(rnd, q) for rnd in range(1, rounds + 1) for q in (QUEUES if rnd % 2 else QUEUES[::-1])]
    if progress:
        from tqdm.auto import tqdm

        plan = tqdm(plan, desc="drains", leave=False)
    return [_drain(q, n_jobs, rnd, folder, code, timeout) for rnd, q in plan]


def drains_frame(drains: list[Drain]):
    import pandas as pd

    frame = pd.DataFrame([{**asdict(d), "jobs/s": round(d.jobs_per_s)} for d in drains])
    return frame.round({"seconds": 3})


def median_rates(drains: list[Drain]) -> dict[str, float]:
    from statistics import median

    return {q: median(d.jobs_per_s for d in drains if d.queue == q) for q in QUEUES}


def plot_drains(drains: list[Drain]):
    """Jobs per second of each drain, one bar per round and queue, on one axis."""
    fig, ax = new_figure()
    rounds = sorted({d.round for d in drains})
    width = 0.38
    for i, queue in enumerate(QUEUES):
        rates = [next(d.jobs_per_s for d in drains if d.queue == queue and d.round == r) for r in rounds]
        ax.bar([r + (i - 0.5) * width for r in rounds], rates, width, label=queue)
    ax.set_xticks(rounds, [f"round {r}" for r in rounds])
    ax.set_ylabel("jobs per second")
    ax.set_title(f"{drains[0].jobs:,} no-op jobs, one worker process each")
    ax.legend(loc="upper left")
    return fig


def walk_frame(walk: list[dict[str, Any]]):
    """The walk as a table: one row per step, one column per queue."""
    import pandas as pd

    frame = pd.DataFrame(walk).pivot(index="step", columns="queue", values="result")
    return frame.reindex(index=list(dict.fromkeys(r["step"] for r in walk)), columns=list(QUEUES))
