"""Does an open dashboard slow the workers? A pool drains the same jobs twice per round, once
with nobody looking and once with browser tabs refreshing the dashboard's overview, side by
side in one run; the two drain rates and their ratio are printed per round.

    python -m labqueue.bench dashboard-load [--jobs 20000] [--tabs 16] [--rounds 3]
                                            [--workers 2] [--postgres] [--folder DIR]

Each drain: a fresh queue, a `labqueue dashboard` process on it (in both arms, so only the
tabs differ), a WorkerPool of --workers processes running the demo `noop` handler, idle and
waiting; then --jobs jobs enqueued in one transaction, and the time from its commit until
no job is queued or running (stats() every 0.1 s, through the live rows' index). In the
loaded arm, --tabs threads each ask for the overview every 5 s (the page's refresh.js does
so in a visible tab), their first at a random moment of the first 5 s. Which arm runs first
alternates by round. On SQLite the -wal file's size is sampled every 0.1 s and its largest
size printed: a reader holding its snapshot open would let it grow past the checkpoint's
reset. --postgres runs the same on a throwaway
PostgreSQL server (labqueue.postgres.server). A measurement, not a test: nothing asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..backends import open_queue
from ..pool import WorkerPool, stop_processes

REFRESH_SECONDS = 5.0  # labqueue.dashboard.views.REFRESH_SECONDS: what refresh.js waits
LISTENING = re.compile(r" at (http://\S+/) ")


@dataclass
class Drain:
    round: int
    tabs: int
    seconds: float
    jobs_per_s: float
    wal_mib: float | None
    pages: int  # overview pages the tabs were answered during the drain
    failed_pages: int
    dashboard_cpu: float = 0.0  # CPU seconds the dashboard's process used during the drain
    workers_cpu: float = 0.0  # ... and the workers' processes together


@contextlib.contextmanager
def dashboard(location: str) -> Iterator[tuple[str, int]]:
    """`labqueue dashboard LOCATION --port 0`, read-only, in a process of its own: its URL
    and process id."""
    env = {**os.environ, "LABQUEUE_DB": location}
    env.pop("LABQUEUE_DASHBOARD_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "labqueue", "dashboard", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        found = LISTENING.search(process.stdout.readline())
        if not found:
            raise RuntimeError("labqueue dashboard did not start")
        yield found[1], process.pid
    finally:
        stop_processes([process], 5.0)


class Tabs:
    """`count` browser tabs on the overview, each refreshing it every REFRESH_SECONDS."""

    def __init__(self, url: str, count: int) -> None:
        self.url, self.count = url, count
        self.stop = threading.Event()
        self.pages = self.failed = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._tab, daemon=True) for _ in range(count)]

    def _tab(self) -> None:
        if self.stop.wait(random.uniform(0, REFRESH_SECONDS)):
            return
        while True:
            try:
                with urllib.request.urlopen(self.url, timeout=30) as answer:
                    answer.read()
                ok = True
            except (urllib.error.URLError, OSError):
                ok = False
            with self._lock:
                self.pages += ok
                self.failed += not ok
            if self.stop.wait(REFRESH_SECONDS):
                return

    def __enter__(self) -> Tabs:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(35)


def fresh_location(folder: Path, url: str | None) -> str:
    """An empty queue: a new SQLite file in `folder`, or a new schema on the server `url`."""
    if url is None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        location = str(folder / "jobs.db")
        open_queue(location).close()
        return location
    from ..postgres import DEFAULT_SCHEMA, PgJobQueue, drop_schema

    drop_schema(url, DEFAULT_SCHEMA)  # the schema the dashboard and the workers open
    PgJobQueue(url).close()
    return url


def drain(location: str, jobs: int, workers: int, tabs: int, rnd: int) -> Drain:
    wal = None if "://" in location else Path(location + "-wal")
    pool = WorkerPool(location, workers, idle_exit=None, handlers=["labqueue.demo.handlers"])
    with dashboard(location) as (url, pid):
        pool.fill()
        try:
            with open_queue(location) as q:
                time.sleep(2.0)  # the workers import, open the queue and wait for jobs
                with Tabs(url, tabs) if tabs else contextlib.nullcontext() as looking:
                    if tabs:
                        time.sleep(REFRESH_SECONDS)  # every tab has loaded the page once
                    q.enqueue_many("noop", ({"n": i} for i in range(jobs)))
                    began = time.perf_counter()  # from the commit that woke the workers
                    watched = [psutil.Process(pid)] + [psutil.Process(p.pid) for p in pool.processes.values()]
                    cpu_before = [cpu_seconds(p) for p in watched]
                    before = looking.pages if looking else 0
                    largest = 0
                    while True:
                        if wal is not None:
                            with contextlib.suppress(OSError):
                                largest = max(largest, wal.stat().st_size)
                        live = q.stats()
                        if live["queued"] + live["running"] == 0:
                            break
                        time.sleep(0.1)
                    seconds = time.perf_counter() - began
                    used = [cpu_seconds(p) - b for p, b in zip(watched, cpu_before, strict=True)]
                    pages = (looking.pages - before) if looking else 0
                    failed = looking.failed if looking else 0
                done = q.counts()["done"]
        finally:
            pool.stop(grace=5.0)
    if done != jobs:
        raise RuntimeError(f"the drain finished {done} of {jobs} jobs")
    wal_mib = None if wal is None else largest / 2**20
    return Drain(rnd, tabs, seconds, jobs / seconds, wal_mib, pages, failed, used[0], sum(used[1:]))


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def run(location_for: dict[str, object], args: argparse.Namespace) -> list[Drain]:
    folder, url = location_for["folder"], location_for["url"]
    drains = []
    for rnd in range(1, args.rounds + 1):
        arms = [0, args.tabs] if rnd % 2 else [args.tabs, 0]
        for tabs in arms:
            location = fresh_location(Path(str(folder)), url if isinstance(url, str) else None)
            found = drain(location, args.jobs, args.workers, tabs, rnd)
            drains.append(found)
            wal = "" if found.wal_mib is None else f", -wal at most {found.wal_mib:.1f} MiB"
            print(
                f"round {rnd}, {tabs:2d} tabs: {found.seconds:6.2f} s, {found.jobs_per_s:8.0f} jobs/s"
                f"{wal}, {found.pages} overview pages served ({found.failed_pages} failed); CPU: "
                f"workers {found.workers_cpu:.2f} s, dashboard {found.dashboard_cpu:.2f} s",
                flush=True,
            )
    return drains


def summary(drains: list[Drain], tabs: int) -> str:
    quiet = {d.round: d.jobs_per_s for d in drains if d.tabs == 0}
    loaded = {d.round: d.jobs_per_s for d in drains if d.tabs == tabs}
    ratios = [loaded[r] / quiet[r] for r in sorted(quiet) if r in loaded]
    ratio = statistics.median(ratios)
    cpu = {
        arm: sum(d.dashboard_cpu for d in drains if d.tabs == arm)
        / max(sum(d.workers_cpu for d in drains if d.tabs == arm), 1e-9)
        for arm in (0, tabs)
    }
    return (
        f"median drain rate: {statistics.median(quiet.values()):.0f} jobs/s with no tab open, "
        f"{statistics.median(loaded.values()):.0f} jobs/s with {tabs} tabs refreshing; "
        f"per-round ratios {', '.join(f'{r:.3f}' for r in ratios)}; median {ratio:.3f} "
        f"({(ratio - 1) * 100:+.1f} %); the dashboard's CPU time was {cpu[tabs]:.1%} of the "
        f"workers' with the tabs open, {cpu[0]:.1%} with none{wal_line(drains, tabs)}"
    )


def wal_line(drains: list[Drain], tabs: int) -> str:
    """The median of the drains' largest -wal sizes, per arm (SQLite only)."""
    sizes = {arm: [d.wal_mib for d in drains if d.tabs == arm and d.wal_mib is not None] for arm in (0, tabs)}
    if not sizes[0] or not sizes[tabs]:
        return ""
    return (
        f"; the -wal's largest size, median of the drains: {statistics.median(sizes[tabs]):.1f} MiB "
        f"with the tabs open, {statistics.median(sizes[0]):.1f} MiB with none"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench dashboard-load", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (default 20000)")
    parser.add_argument("--tabs", type=int, default=16, help="tabs refreshing the overview (default 16)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each a drain per arm (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL server")
    parser.add_argument("--folder", type=Path, help="where the SQLite files go (default: a temporary folder)")
    args = parser.parse_args(argv)
    print(
        f"{args.jobs:,} jobs per drain, {args.workers} workers, {args.rounds} rounds; "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}; {os.cpu_count()} CPUs",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = (args.folder or Path(scratch)) / "dashboard-load"
        if args.postgres:
            from ..postgres.server import throwaway_server

            with throwaway_server() as url:
                drains = run({"folder": folder, "url": url}, args)
        else:
            drains = run({"folder": folder, "url": None}, args)
    print(summary(drains, args.tabs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
