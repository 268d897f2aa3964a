"""Pick-up latency and idle CPU of one idle worker: polling at 50 ms, at 1 s, and wake-up hints.

    python -m labqueue.bench.wakeup [--jobs N] [--idle SECONDS] [--max-gap SECONDS] [--seed S] [--out FILE]
                                    [--real-worker]

For each way of waiting, one spawned worker process runs this module's idle loop on a
fresh database: if q.any_ready(), claim and complete; else wait. It first sits idle for
--idle seconds with no jobs and measures its own CPU time over that stretch
(time.process_time, nanosecond resolution; psutil's cpu_times counts 10 ms ticks, too
coarse for an idle process). Then the parent enqueues --jobs jobs one at a time at random
moments, calls wakeup.notify() after each COMMIT (in every mode, so producers cost the
same), and notes when each enqueue returned; the worker notes when each claim returned,
in the completing transaction. Pick-up latency is the difference (time.time, one
machine). On a shared, loaded machine every figure grows: compare them within one run.

With --real-worker the three ways are measured on the worker as shipped instead: one
`labqueue worker` process per mode (`--no-wake --poll 0.05`, `--no-wake --poll 1`, and the
default, which waits for hints), running labqueue.bench.wakeup_handlers, whose handler
records when the job reached it. Its idle CPU is read from outside (psutil, the kernel's
clock ticks: about 10 ms resolution, so the idle stretch should be long).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import multiprocessing as mp
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..arguments import whole_number
from ..durations import positive_duration
from ..procs import kill_tree
from ..queue import JobQueue
from ..wakeup import SAFETY_POLL, Waiter, notify, wake_folder

START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 10.0
RESULT_POLL_SECONDS = 0.05
MIN_GAP_SECONDS = 0.02
KIND = "bench_wakeup"

BENCH_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_pickups (job_id INTEGER PRIMARY KEY, claimed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS bench_idle (cpu_seconds REAL NOT NULL, wall_seconds REAL NOT NULL);
"""
RECORD_PICKUP = "INSERT INTO bench_pickups (job_id, claimed_at) VALUES (?, ?)"
RECORD_IDLE = "INSERT INTO bench_idle (cpu_seconds, wall_seconds) VALUES (?, ?)"
READ_PICKUPS = "SELECT job_id, claimed_at FROM bench_pickups"
COUNT_PICKUPS = "SELECT count(*) FROM bench_pickups"
READ_IDLE = "SELECT cpu_seconds, wall_seconds FROM bench_idle"


@dataclass(frozen=True)
class Mode:
    """One way for an idle worker to wait: `poll` is its wait between looks, and with
    `wake` a producer's hint ends that wait early."""

    key: str
    label: str
    poll: float
    wake: bool


MODES = (
    Mode("poll_50ms", "polling every 50 ms", 0.05, False),
    Mode("poll_1s", "polling every 1 s", 1.0, False),
    Mode("wakeup", f"wake-up hint, {SAFETY_POLL:g} s safety poll", SAFETY_POLL, True),
)
MODES_BY_KEY = {mode.key: mode for mode in MODES}
BASELINE = "wakeup"


@dataclass(frozen=True)
class Sizes:
    """How big one run is: jobs per mode, idle seconds measured, the longest gap between jobs."""

    jobs: int = 50
    idle_seconds: float = 5.0
    max_gap: float = 0.2
    seed: int = 16
    real_worker: bool = False


# -- the worker process ----------------------------------------------------------------


def idle_worker(db: str, key: str, ready: Any, stop: Any) -> None:
    """A spawned worker's whole life: open the queue (and a Waiter if this mode wakes),
    measure the idle stretch, then pick up jobs until told to stop."""
    mode = MODES_BY_KEY[key]
    with JobQueue(db) as q, Waiter(db) if mode.wake else contextlib.nullcontext() as waiter:
        wait = waiting(mode, waiter)
        ready.set()
        measure_idle(q, wait, stop)
        pick_up(q, f"bench-{key}", wait, stop)


def waiting(mode: Mode, waiter: Waiter | None) -> Callable[[], object]:
    """The wait between empty looks: a plain sleep, or a Waiter's wait with the same
    interval as its safety poll."""
    if waiter is None:
        return functools.partial(time.sleep, mode.poll)
    return functools.partial(waiter.wait, mode.poll)


def measure_idle(q: JobQueue, wait: Callable[[], object], stop: Any) -> None:
    """Wait with no jobs until the first one is ready; store the CPU time spent doing so."""
    cpu_start, wall_start = time.process_time(), time.time()
    while not stop.is_set() and not q.any_ready():
        wait()
    cpu, wall = time.process_time() - cpu_start, time.time() - wall_start
    with contextlib.closing(sqlite3.connect(q.path)) as db, db:
        db.execute(RECORD_IDLE, (cpu, wall))


def pick_up(q: JobQueue, worker_id: str, wait: Callable[[], object], stop: Any) -> None:
    """The idle loop: look, claim and complete when there is a job, else wait. The claim's
    time is stored with the completion, in its transaction."""
    while not stop.is_set():
        job = q.claim_next(worker_id) if q.any_ready() else None
        if job is None:
            wait()
            continue
        q.complete(job, effect=functools.partial(record_pickup, job.id, time.time()))


def record_pickup(job_id: int, claimed_at: float, db: sqlite3.Connection) -> None:
    db.execute(RECORD_PICKUP, (job_id, claimed_at))


# -- the parent: one mode ---------------------------------------------------------------


def measure_mode(mode: Mode, folder: Path, sizes: Sizes, rng: random.Random) -> dict[str, Any]:
    """Start one idle worker, let it idle, feed it jobs at random moments, stop it, and
    return its latencies and idle CPU."""
    db = fresh_database(folder / f"wakeup-{mode.key}.db")
    ctx = mp.get_context("spawn")  # a fresh interpreter, on every platform
    ready, stop = ctx.Event(), ctx.Event()
    worker = ctx.Process(target=idle_worker, args=(str(db), mode.key, ready, stop), daemon=True)
    worker.start()
    try:
        if not ready.wait(START_TIMEOUT_SECONDS):
            raise RuntimeError(f"{mode.key}: the worker did not start within {START_TIMEOUT_SECONDS:.0f} s")
        time.sleep(sizes.idle_seconds)
        enqueued = produce(db, sizes, rng)
        claimed = await_pickups(db, len(enqueued), deadline=time.monotonic() + 2 * mode.poll + 10.0)
    finally:
        stop.set()
        notify(db)
        worker.join(STOP_TIMEOUT_SECONDS)
        if worker.is_alive():
            kill_tree(worker)
    return summarize(mode, enqueued, claimed, read_idle(db))


def fresh_database(path: Path) -> Path:
    """A new queue file with the bench's two tables beside the jobs table."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    JobQueue(path).close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executescript(BENCH_SCHEMA)
    return path


def produce(db: Path, sizes: Sizes, rng: random.Random) -> dict[int, float]:
    """Enqueue sizes.jobs jobs at random moments, notifying after each COMMIT; returns
    each job's id and the time its enqueue returned."""
    enqueued: dict[int, float] = {}
    with JobQueue(db) as q:
        for index in range(sizes.jobs):
            time.sleep(rng.uniform(MIN_GAP_SECONDS, max(sizes.max_gap, MIN_GAP_SECONDS)))
            job_id = q.enqueue(KIND, {"n": index})
            committed_at = time.time()
            notify(db)
            assert job_id is not None
            enqueued[job_id] = committed_at
    return enqueued


def await_pickups(db: Path, expected: int, *, deadline: float) -> dict[int, float]:
    """Every recorded claim, once there are `expected` of them or the deadline passes."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        while con.execute(COUNT_PICKUPS).fetchone()[0] < expected and time.monotonic() < deadline:
            time.sleep(RESULT_POLL_SECONDS)
        return dict(con.execute(READ_PICKUPS).fetchall())


def read_idle(db: Path) -> tuple[float, float] | None:
    with contextlib.closing(sqlite3.connect(db)) as con:
        row = con.execute(READ_IDLE).fetchone()
    return None if row is None else (row[0], row[1])


def summarize(
    mode: Mode, enqueued: dict[int, float], claimed: dict[int, float], idle: tuple[float, float] | None
) -> dict[str, Any]:
    latencies = sorted((claimed[i] - t) * 1000 for i, t in enqueued.items() if i in claimed)
    cpu_ms_per_s = None if idle is None or idle[1] <= 0 else 1000 * idle[0] / idle[1]
    return {
        "mode": mode.key,
        "label": mode.label,
        "jobs": len(enqueued),
        "picked": len(latencies),
        "latencies_ms": [round(x, 4) for x in latencies],
        "median_ms": statistics.median(latencies) if latencies else None,
        "p95_ms": nearest_rank(latencies, 0.95),
        "max_ms": latencies[-1] if latencies else None,
        "idle_seconds": None if idle is None else idle[1],
        "idle_cpu_ms_per_s": cpu_ms_per_s,
    }


def nearest_rank(ordered: list[float], fraction: float) -> float | None:
    """The value at or below which `fraction` of the (sorted) values lie."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


# -- the worker as shipped ---------------------------------------------------------------


def worker_command(mode: Mode, db: Path) -> list[str]:
    """`labqueue worker` for one way of waiting: its default waits for hints."""
    command = [sys.executable, "-m", "labqueue", "worker", str(db), "--id", f"bench-{mode.key}"]
    command += ["--handlers", "labqueue.bench.wakeup_handlers", "--batch", "1", "--lease", "30"]
    return command + ([] if mode.wake else ["--no-wake", "--poll", str(mode.poll)])


def measure_real_worker(mode: Mode, folder: Path, sizes: Sizes, rng: random.Random) -> dict[str, Any]:
    """One `labqueue worker` process: let it settle, read its CPU over the idle stretch,
    feed it jobs at random moments, stop it with SIGTERM."""
    import psutil

    db = fresh_database(folder / f"wakeup-real-{mode.key}.db")
    worker = subprocess.Popen(
        worker_command(mode, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        settle_until = time.monotonic() + START_TIMEOUT_SECONDS
        folder_of = wake_folder(db)
        while mode.wake and not (folder_of and folder_of.exists() and any(folder_of.glob("*.sock"))):
            if time.monotonic() > settle_until or worker.poll() is not None:
                raise RuntimeError(f"{mode.key}: the worker never began waiting for hints")
            time.sleep(RESULT_POLL_SECONDS)
        time.sleep(1.0)  # past its imports and its first looks
        process = psutil.Process(worker.pid)
        before, started = sum(process.cpu_times()[:2]), time.time()
        time.sleep(sizes.idle_seconds)
        idle = (sum(process.cpu_times()[:2]) - before, time.time() - started)
        enqueued = produce(db, sizes, rng)
        claimed = await_pickups(db, len(enqueued), deadline=time.monotonic() + 2 * mode.poll + 10.0)
    finally:
        worker.terminate()
        try:
            worker.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            kill_tree(worker)
    return summarize(mode, enqueued, claimed, idle)


# -- the whole run ------------------------------------------------------------------------


def run(
    sizes: Sizes = Sizes(),
    folder: str | Path | None = None,
    progress: Callable[[str], object] = lambda line: None,
) -> dict[str, Any]:
    """Every mode, one after the other, in one run; in a temporary folder unless given one."""
    rng = random.Random(sizes.seed)
    with contextlib.ExitStack() as stack:
        where = Path(folder or stack.enter_context(tempfile.TemporaryDirectory()))
        where.mkdir(parents=True, exist_ok=True)
        rows = []
        measure = measure_real_worker if sizes.real_worker else measure_mode
        for mode in MODES:
            progress(f"{mode.label}: {sizes.idle_seconds:g} s idle, then {sizes.jobs} jobs")
            rows.append(measure(mode, where, sizes, rng))
    return {"sizes": vars(sizes), "when": time.time(), "machine": machine(), "modes": rows}


def machine() -> dict[str, Any]:
    """What else the machine was doing: latency grows with load."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "load_1min_after": None if load is None else round(load[0], 2)}


def report(results: dict[str, Any]) -> str:
    """The figures side by side, with ratios to wake-up and the issue's two goals."""
    rows = results["modes"]
    base = next(row for row in rows if row["mode"] == BASELINE)
    who = "labqueue worker processes" if results["sizes"].get("real_worker") else "the bench's idle loop"
    lines = [
        f"measured on {who}",
        f"{'way of waiting':<34}{'picked':>8}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}"
        f"{'idle CPU ms/s':>15}{'median/wake':>13}{'CPU/wake':>10}",
    ]
    for row in rows:
        lines.append(
            f"{row['label']:<34}{row['picked']:>4}/{row['jobs']:<3}{_num(row['median_ms']):>11}"
            f"{_num(row['p95_ms']):>9}{_num(row['max_ms']):>9}{_num(row['idle_cpu_ms_per_s']):>15}"
            f"{_ratio(row['median_ms'], base['median_ms']):>13}"
            f"{_ratio(row['idle_cpu_ms_per_s'], base['idle_cpu_ms_per_s']):>10}"
        )
    poller = next(row for row in rows if row["mode"] == "poll_50ms")
    fast = base["median_ms"] is not None and base["median_ms"] < 1.0
    frugal = _less(base["idle_cpu_ms_per_s"], poller["idle_cpu_ms_per_s"])
    lines += [
        f"goal: wake-up median pick-up under 1 ms: {'yes' if fast else 'no'}",
        f"goal: idle wake-up worker uses less CPU than the 50 ms poller: {'yes' if frugal else 'no'}",
        f"(one machine, {results['machine']['cpus']} CPUs, 1-min load average "
        f"{results['machine']['load_1min_after']} at the end: figures grow with load, compare in one run)",
    ]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}" if value < 10 else f"{value:.0f}"


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{_num(value / base)}x"


def _less(value: float | None, other: float | None) -> bool:
    return value is not None and other is not None and value < other


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench.wakeup", description=__doc__.split("\n\n")[0]
    )
    defaults = Sizes()
    add = parser.add_argument
    add("--jobs", type=whole_number, default=defaults.jobs, help="jobs per mode (default 50)")
    add("--idle", type=positive_duration, default=defaults.idle_seconds, help="idle seconds (default 5)")
    add("--max-gap", type=positive_duration, default=defaults.max_gap, help="longest gap, s (default 0.2)")
    add("--seed", type=int, default=defaults.seed, help="the gaps' random seed (default 16)")
    add("--out", help="also write the results, every latency included, as JSON here")
    add("--real-worker", action="store_true", help="measure `labqueue worker` processes as shipped")
    args = parser.parse_args(argv)
    sizes = Sizes(args.jobs, args.idle, args.max_gap, args.seed, args.real_worker)
    results = run(sizes, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(report(results))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
