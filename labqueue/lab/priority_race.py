"""Notebook 15: the claim race again, now with priorities and named queues.

Worker processes claim from one queue file full of jobs of mixed priorities and queues,
each with its own scope (every queue, one queue, several, or taking turns), all released
at the same moment. Each writes down what it claimed, batch by batch, once the race is
over. Two things are counted: jobs claimed twice (there must be none), and priority
inversions, a racer taking a lower-priority job of a queue before a higher one of the
same queue (there must be none either: no job arrives during the race, so each claim
takes the best job left in its scope).

It needs no pandas, so each racer process starts quickly.

    python -m labqueue.lab.priority_race [N_JOBS]
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import random
import sqlite3
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InvalidArgument
from ..fairness import QueueTurns
from ..queue import JobQueue
from .race import _ignore_interrupts, _run_racers
from .scratch import db_path
from .walks import Folder

QUEUES = ("mail", "webhooks", "reports")
PRIORITIES = (0, 5, 10)
DEFAULT_JOBS = 2000
MAX_JOBS = 100_000
LEASE = 600.0  # no lease runs out during a race

#: Each racer: its name, the queues it claims from (None: every queue; "turns": it takes
#: turns between all three, as a fair worker does), and how many jobs it takes per claim.
RACERS: tuple[tuple[str, list[str] | str | None, int], ...] = (
    ("every queue", None, 1),
    ("mail only", ["mail"], 1),
    ("webhooks+reports, 5 at a time", ["webhooks", "reports"], 5),
    ("turns between all three", "turns", 1),
)

RESULTS = """
CREATE TABLE IF NOT EXISTS claims (
    racer TEXT NOT NULL, batch INTEGER NOT NULL, job_id INTEGER NOT NULL,
    queue TEXT NOT NULL, priority INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class PriorityRace:
    jobs: int
    racers: int
    claims: int
    distinct: int
    duplicates: int
    inversions: int
    by_racer: dict[str, int]

    def row(self) -> dict[str, object]:
        return asdict(self)


def fill(path: Path, n_jobs: int, seed: int) -> None:
    """`n_jobs` queued jobs, each of a random queue and priority, enqueued in random order."""
    rng = random.Random(seed)
    classes = [(queue, priority) for queue in QUEUES for priority in PRIORITIES]
    with JobQueue(path, synchronous="OFF", wake=False) as q:
        for _ in range(n_jobs):
            queue, priority = rng.choice(classes)
            q.enqueue("race", {}, priority=priority, queue=queue)


def racer(path: str, results: str, name: str, scope: list[str] | str | None, limit: int, start) -> None:
    """One racing process: claim in its scope until a claim finds nothing, then write down
    each batch (job id, queue, priority)."""
    _ignore_interrupts()
    taken: list[tuple[int, int, str, int]] = []
    with JobQueue(path, lease_seconds=LEASE, wake=False, timeout=120) as q:
        turns = QueueTurns(list(QUEUES)) if scope == "turns" else None
        start.wait(timeout=120)
        batch = 0
        while True:
            scopes = [[queue] for queue in turns.order()] if turns else [scope]
            jobs = []
            for queues in scopes:
                jobs = q.claim(name, limit=limit, queues=queues)
                if jobs:
                    break
            if not jobs:
                break
            for job in jobs:
                row = q.job(job.id)
                taken.append((batch, job.id, row.queue, row.priority))
            batch += 1
    out = sqlite3.connect(results, isolation_level=None, timeout=60.0)
    out.execute("BEGIN IMMEDIATE")
    out.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", [(name, *t) for t in taken])
    out.execute("COMMIT")
    out.close()


def inversions(rows: list[tuple[str, int, int, str, int]]) -> int:
    """Per racer and queue, the times a batch held a job of higher priority than a job of an
    earlier batch (rows: racer, batch, job id, queue, priority)."""
    lowest_so_far: dict[tuple[str, str], int] = {}
    found = 0
    by_batch: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for name, batch, _job, queue, priority in rows:
        by_batch[(name, queue, batch)].append(priority)
    for (name, queue, _batch), priorities in sorted(by_batch.items()):
        key = (name, queue)
        if key in lowest_so_far and max(priorities) > lowest_so_far[key]:
            found += 1
        lowest_so_far[key] = min(lowest_so_far.get(key, max(priorities)), min(priorities))
    return found


def race(n_jobs: int = DEFAULT_JOBS, *, seed: int = 14, folder: Folder = None) -> PriorityRace:
    """Fill a queue with `n_jobs` mixed jobs and race the RACERS, spawned processes that
    all start claiming at once, until nothing is left."""
    __tracebackhide__ = True
    if not isinstance(n_jobs, int) or isinstance(n_jobs, bool) or not 1 <= n_jobs <= MAX_JOBS:
        raise InvalidArgument(f"n_jobs must be a whole number from 1 to {MAX_JOBS:,}, got {n_jobs!r}")
    path = db_path("priority_race", folder)
    results = db_path("priority_race_results", folder)
    fill(path, n_jobs, seed)
    out = sqlite3.connect(str(results), isolation_level=None)
    out.executescript(RESULTS)
    out.close()
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(len(RACERS) + 1)
    procs = [
        ctx.Process(target=racer, args=(str(path), str(results), name, scope, limit, start))
        for name, scope, limit in RACERS
    ]
    _run_racers(procs, start)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} racer(s) exited with codes {failed}")
    with contextlib.closing(sqlite3.connect(str(results))) as db:
        rows = db.execute(
            "SELECT racer, batch, job_id, queue, priority FROM claims ORDER BY rowid"
        ).fetchall()
    ids = [row[2] for row in rows]
    by_racer = {name: sum(1 for row in rows if row[0] == name) for name, _, _ in RACERS}
    return PriorityRace(
        jobs=n_jobs,
        racers=len(RACERS),
        claims=len(ids),
        distinct=len(set(ids)),
        duplicates=len(ids) - len(set(ids)),
        inversions=inversions(rows),
        by_racer=by_racer,
    )


def main(argv: list[str]) -> int:
    n_jobs = int(argv[0]) if argv else DEFAULT_JOBS
    result = race(n_jobs)
    print(result)
    return 0 if result.duplicates == 0 and result.inversions == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
