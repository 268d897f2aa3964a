"""The claim race: three ways to claim a job, raced by real worker processes.

The table is deliberately minimal (id, state, claimed_by), so the only thing that
differs between the runs is the claim itself. Workers are spawned from this module
and, when the race is over, write what they claimed to a results database: the
jobs table cannot show a duplicate, because the last writer's name wins.

    python -m labqueue.lab.race [N_JOBS] [WORKERS]
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InvalidArgument
from ..scratch import db_path

Claim = Callable[[sqlite3.Connection, str], "tuple[int | None, int]"]

RACE_TABLE = """
CREATE TABLE jobs (
    id         INTEGER PRIMARY KEY,
    state      TEXT NOT NULL DEFAULT 'queued',
    claimed_by TEXT
)
"""

RESULTS_TABLES = """
CREATE TABLE IF NOT EXISTS claims (worker TEXT NOT NULL, job_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workers (
    worker      TEXT PRIMARY KEY,
    claims      INTEGER NOT NULL,
    wasted      INTEGER NOT NULL,
    finished_at REAL NOT NULL
);
"""

DEFAULT_JOBS = 4000
DEFAULT_WORKERS = 4
MAX_JOBS = 200_000
MAX_WORKERS = 16


def connect(path: str | Path) -> sqlite3.Connection:
    """Autocommit (isolation_level=None): each statement is its own transaction,
    exactly as a worker that never says BEGIN would run it."""
    db = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def claim_naive(db: sqlite3.Connection, worker: str) -> tuple[int | None, int]:
    """Look first, then write. Another worker can look at the same row in between."""
    row = db.execute("SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1").fetchone()
    if row is None:
        return None, 0
    db.execute("UPDATE jobs SET state = 'running', claimed_by = ? WHERE id = ?", (worker, row[0]))
    return row[0], 0


def claim_cas(db: sqlite3.Connection, worker: str) -> tuple[int | None, int]:
    """Compare and swap: the UPDATE only takes the row if it is still queued;
    a lost race costs one wasted round trip, then we look again."""
    wasted = 0
    while True:
        row = db.execute("SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1").fetchone()
        if row is None:
            return None, wasted
        cur = db.execute(
            "UPDATE jobs SET state = 'running', claimed_by = ? WHERE id = ? AND state = 'queued'",
            (worker, row[0]),
        )
        if cur.rowcount == 1:
            return row[0], wasted
        wasted += 1


def claim_atomic(db: sqlite3.Connection, worker: str) -> tuple[int | None, int]:
    """One statement chooses the row and claims it: SQLite has one writer at a
    time, so nobody can get in between the choice and the write."""
    rows = db.execute(
        "UPDATE jobs SET state = 'running', claimed_by = ? "
        "WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) "
        "RETURNING id",
        (worker,),
    ).fetchall()
    return (rows[0][0] if rows else None), 0


STRATEGIES: dict[str, Claim] = {"naive": claim_naive, "cas": claim_cas, "atomic": claim_atomic}


@dataclass(frozen=True)
class RaceResult:
    strategy: str
    jobs: int
    workers: int
    claims: int
    distinct: int
    duplicates: int
    wasted: int
    seconds: float

    def row(self) -> dict[str, object]:
        return asdict(self)


def check_size(n_jobs: object, workers: object) -> tuple[int, int]:
    """Refuse sizes the race cannot run, naming the value."""
    for name, value, top in (("n_jobs", n_jobs, MAX_JOBS), ("workers", workers, MAX_WORKERS)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise InvalidArgument(f"{name} must be a whole number from 1 to {top}, got {value!r}")
    return n_jobs, workers  # type: ignore[return-value]


def create_race_db(path: str | Path, n_jobs: int) -> None:
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(RACE_TABLE)
    db.execute("BEGIN")
    db.executemany("INSERT INTO jobs (state) VALUES ('queued')", [()] * n_jobs)
    db.execute("COMMIT")
    db.close()


def race_worker(path: str, results: str, strategy: str, worker: str, start: mp.synchronize.Barrier) -> None:
    """One racing process: connect, wait for the others at the barrier, then claim
    until nothing is left. What it claimed is written down only after the race."""
    db = connect(path)
    claim = STRATEGIES[strategy]
    mine: list[int] = []
    wasted = 0
    start.wait(timeout=120)
    while True:
        job_id, retries = claim(db, worker)
        wasted += retries
        if job_id is None:
            break
        mine.append(job_id)
    finished = time.time()
    db.close()
    out = sqlite3.connect(results, isolation_level=None, timeout=60.0)
    out.execute("BEGIN IMMEDIATE")
    out.executemany("INSERT INTO claims (worker, job_id) VALUES (?, ?)", [(worker, j) for j in mine])
    out.execute("INSERT INTO workers VALUES (?, ?, ?, ?)", (worker, len(mine), wasted, finished))
    out.execute("COMMIT")
    out.close()


def race(strategy: str, n_jobs: int = DEFAULT_JOBS, workers: int = DEFAULT_WORKERS) -> RaceResult:
    """Fill a fresh table with `n_jobs` queued rows and let `workers` spawned
    processes claim them all with one strategy, all starting at the same moment."""
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    n_jobs, workers = check_size(n_jobs, workers)
    path = db_path(f"race_{strategy}")
    results = db_path(f"race_{strategy}_results")
    create_race_db(path, n_jobs)
    out = sqlite3.connect(str(results), isolation_level=None)
    out.executescript(RESULTS_TABLES)
    out.close()

    ctx = mp.get_context("spawn")  # a fresh interpreter, as a worker on any platform gets
    start = ctx.Barrier(workers + 1)
    procs = [
        ctx.Process(target=race_worker, args=(str(path), str(results), strategy, f"w{i}", start))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        start.wait(timeout=120)  # every worker is connected and waiting: go
        started = time.time()
        for p in procs:
            p.join(timeout=600)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} race worker(s) exited with codes {failed}")
    return summarize(strategy, n_jobs, results, started)


def summarize(strategy: str, n_jobs: int, results: str | Path, started: float) -> RaceResult:
    """Count claims, distinct jobs and duplicates from what the workers recorded."""
    db = sqlite3.connect(str(results))
    claims, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT job_id) FROM claims").fetchone()
    n_workers, wasted, finished = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(wasted), 0), MAX(finished_at) FROM workers"
    ).fetchone()
    db.close()
    return RaceResult(
        strategy=strategy,
        jobs=n_jobs,
        workers=n_workers,
        claims=claims,
        distinct=distinct,
        duplicates=claims - distinct,
        wasted=wasted,
        seconds=round(max(0.0, (finished or started) - started), 3),
    )


def race_all(
    n_jobs: int = DEFAULT_JOBS,
    workers: int = DEFAULT_WORKERS,
    *,
    enlarge: int = 2,
    progress: bool = True,
) -> list[RaceResult]:
    """Race every strategy once, in the tutorial's order, all at one size.

    A race is a matter of chance: on a quiet or very fast machine the naive run can
    finish without a collision. Then the size is doubled and the naive race run
    again, up to `enlarge` times, and the others run at the size that showed it."""
    n_jobs, workers = check_size(n_jobs, workers)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(STRATEGIES), desc=f"{n_jobs} jobs, {workers} workers", unit="strategy")
    naive = race("naive", n_jobs, workers)
    for _ in range(enlarge):
        if naive.duplicates > 0 or n_jobs * 2 > MAX_JOBS:
            break
        n_jobs *= 2
        if bar is not None:
            bar.set_description(f"no collision yet; {n_jobs} jobs, {workers} workers")
        naive = race("naive", n_jobs, workers)
    results = [naive]
    if bar is not None:
        bar.update(1)
    for name in STRATEGIES:
        if name != "naive":
            results.append(race(name, n_jobs, workers))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return results


def main(argv: list[str]) -> int:
    n_jobs = int(argv[0]) if argv else DEFAULT_JOBS
    workers = int(argv[1]) if len(argv) > 1 else DEFAULT_WORKERS
    print(f"{n_jobs} jobs, {workers} worker processes")
    for r in race_all(n_jobs, workers, progress=False):
        print(
            f"{r.strategy:<7} claims={r.claims:>7} distinct={r.distinct:>7} "
            f"duplicates={r.duplicates:>6} wasted={r.wasted:>6} seconds={r.seconds:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
