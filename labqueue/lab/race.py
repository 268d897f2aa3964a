"""The claim race: naive, compare-and-swap and atomic claims, each raced by real
worker processes on the learner's own code.

The claims are the learner's: notebook 01's saved `# race.py` cells, kept in the kernel's
workspace (`labqueue.tutorial.workspace`). Each racing process loads them with
`labqueue.tutorial.process.tutorial_module("race", code)`, so a claim edited in the notebook
is the claim that races; without `code`, the course's `labqueue.tutorial.race` races.

The table is deliberately minimal (id, state, claimed_by), so the only thing that
differs between the runs is the claim itself. Workers are spawned from this module
and, when the race is over, write what they claimed to a results database: the
jobs table cannot show a duplicate, because the last writer's name wins.

    python -m labqueue.lab.race [N_JOBS] [WORKERS]
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InvalidArgument
from ..tutorial.process import tutorial_module
from .scratch import db_path

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

#: The tutorial's three claims, in its order: the keys of `STRATEGIES` in `race.py`.
STRATEGY_NAMES = ("naive", "cas", "atomic")


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
    """A fresh table in WAL mode holding jobs 1 to `n_jobs`, all queued."""
    with contextlib.closing(sqlite3.connect(str(path))) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(RACE_TABLE)
        with db:  # every row in one transaction
            db.executemany("INSERT INTO jobs (id) VALUES (?)", ((n,) for n in range(1, n_jobs + 1)))


def race_worker(
    path: str,
    results: str,
    strategy: str,
    worker: str,
    start: mp.synchronize.Barrier,
    statements: tuple[str | None, str] | None = None,
    cap: int | None = None,
    code: str | None = None,
) -> None:
    """One racing process: load `race.py` (the learner's from the folder `code`, or the
    course's), connect with its `connect`, wait for the others at the barrier, then claim
    with its `STRATEGIES[strategy]` until nothing is left. What it claimed is written down
    only after the race.

    With `statements` (look, take) the racer claims with those SQL statements instead
    of a named strategy (see `claim_with`). It stops after `cap` claims, so that a claim
    which never runs out of rows still ends."""
    _ignore_interrupts()
    try:
        module = tutorial_module("race", code)
        db = module.connect(path)
    except BaseException:
        start.abort()  # the parent and the other racers stop waiting for this one
        raise
    if statements is None:
        claim = module.STRATEGIES[strategy]
    else:
        look, take = statements

        def claim(db: sqlite3.Connection, worker: str) -> tuple[int | None, int]:
            return claim_with(db, worker, look, take)

    mine: list[int] = []
    wasted = 0
    start.wait(timeout=120)
    while cap is None or len(mine) < cap:
        got, lost = claim(db, worker)
        wasted += lost
        if got is None:
            break
        mine.append(got)
    finished = time.time()
    db.close()
    out = sqlite3.connect(results, isolation_level=None, timeout=60.0)
    out.execute("BEGIN IMMEDIATE")
    out.executemany("INSERT INTO claims (worker, job_id) VALUES (?, ?)", [(worker, j) for j in mine])
    out.execute("INSERT INTO workers VALUES (?, ?, ?, ?)", (worker, len(mine), wasted, finished))
    out.execute("COMMIT")
    out.close()


#: How many lost looks in a row `claim_with` accepts before it gives up on a claim.
GIVE_UP_AFTER = 1000


def claim_with(db: sqlite3.Connection, worker: str, look: str | None, take: str) -> tuple[int | None, int]:
    """A claim written as SQL text, for the exercises. With a `look` (a SELECT giving one
    id, or NULL when nothing is queued) the claim looks first and then runs `take` with
    the named parameters :worker and :id, looking again whenever `take` changed no row;
    without one, `take` alone (parameter :worker) must claim a row and return its id."""
    if look is None:
        rows = db.execute(take, {"worker": worker}).fetchall()
        return (rows[0][0] if rows else None), 0
    for wasted in range(GIVE_UP_AFTER):
        row = db.execute(look).fetchone()
        job_id = row[0] if row else None
        if job_id is None:
            return None, wasted
        before = db.total_changes
        db.execute(take, {"worker": worker, "id": job_id}).fetchall()
        if db.total_changes > before:
            return job_id, wasted
    return None, GIVE_UP_AFTER


def race(
    strategy: str,
    n_jobs: int = DEFAULT_JOBS,
    workers: int = DEFAULT_WORKERS,
    *,
    statements: tuple[str | None, str] | None = None,
    code: str | os.PathLike[str] | None = None,
) -> RaceResult:
    """Fill a fresh table with `n_jobs` queued rows and let `workers` spawned
    processes claim them all with one strategy of `race.py` (the learner's, from the
    workspace folder `code`, or the course's), all starting at the same moment.
    With `statements` (look, take), the racers claim with that SQL instead (see
    `claim_with`) and `strategy` only names the run. No racer claims more than `n_jobs`
    times, so a claim that never runs out of rows still ends."""
    __tracebackhide__ = True
    if statements is None and strategy not in STRATEGY_NAMES:
        raise InvalidArgument(f"strategy must be one of {', '.join(STRATEGY_NAMES)}, got {strategy!r}")
    n_jobs, workers = check_size(n_jobs, workers)
    path = db_path(f"race_{strategy}")
    results = db_path(f"race_{strategy}_results")
    create_race_db(path, n_jobs)
    out = sqlite3.connect(str(results), isolation_level=None)
    out.executescript(RESULTS_TABLES)
    out.close()

    ctx = mp.get_context("spawn")  # a fresh interpreter, as a worker on any platform gets
    start = ctx.Barrier(workers + 1)
    folder = None if code is None else str(code)
    racers = [
        ctx.Process(
            target=race_worker,
            args=(str(path), str(results), strategy, f"w{n}", start, statements, n_jobs, folder),
        )
        for n in range(workers)
    ]
    started = _run_racers(racers, start)
    failed = [racer.exitcode for racer in racers if racer.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} race worker(s) exited with codes {failed}")
    return summarize(strategy, n_jobs, results, started)


def _ignore_interrupts() -> None:
    """A racer leaves Ctrl-C (a kernel interrupt reaches the whole process group) to its
    parent, which stops every racer: no traceback from each of them."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _children_ignore_interrupts():
    """Start child processes with SIGINT ignored. A spawned child inherits the ignored
    signal through exec, so even its start-up (importing this package) cannot be
    interrupted into a traceback; the parent keeps its own handler."""
    if threading.current_thread() is not threading.main_thread() or os.name == "nt":
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_racers(racers: list, start: mp.synchronize.Barrier) -> float:
    """Start the racers, release them together, and wait for them. On an interrupt (or any
    error) every racer still alive is killed before the exception goes on, so nothing
    keeps claiming in the background. Returns the moment of the start signal."""
    __tracebackhide__ = True  # IPython shows the learner's cell, not this plumbing
    try:
        with _children_ignore_interrupts():
            for racer in racers:
                racer.start()
        try:
            start.wait(timeout=120)  # every worker is connected and waiting: go
        except threading.BrokenBarrierError:
            raise RuntimeError(
                "a race worker failed before the start (loading race.py or connecting):"
                " its traceback is in the kernel's log"
            ) from None
        started = time.time()
        for racer in racers:
            racer.join(timeout=600)
    finally:
        for racer in racers:
            if racer.pid is None:  # never started: starting an earlier one failed
                continue
            if racer.is_alive():
                racer.kill()
            racer.join()
    return started


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
    code: str | os.PathLike[str] | None = None,
) -> list[RaceResult]:
    """Race every strategy of `race.py` once (the learner's, from the workspace folder
    `code`, or the course's), in the tutorial's order, all at one size.

    A race is a matter of chance: on a quiet or very fast machine the naive run can
    finish without a collision. Then the size is doubled and the naive race run
    again, up to `enlarge` times, and the others run at the size that showed it."""
    __tracebackhide__ = True
    n_jobs, workers = check_size(n_jobs, workers)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(STRATEGY_NAMES), desc=f"{n_jobs} jobs, {workers} workers", unit="strategy")
    try:
        naive = race("naive", n_jobs, workers, code=code)
        for _ in range(enlarge):
            if naive.duplicates > 0 or n_jobs * 2 > MAX_JOBS:
                break
            n_jobs *= 2
            if bar is not None:
                bar.set_description(f"no collision yet; {n_jobs} jobs, {workers} workers")
            naive = race("naive", n_jobs, workers, code=code)
        results = [naive]
        if bar is not None:
            bar.update(1)
        for name in STRATEGY_NAMES:
            if name != "naive":
                results.append(race(name, n_jobs, workers, code=code))
                if bar is not None:
                    bar.update(1)
    except KeyboardInterrupt:
        print("interrupted: every racing process was stopped")
        raise
    finally:
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
