"""What concurrency keys cost: the same no-op drain by labqueue's worker loop, once with
no keys and once spread over --keys keys with limit 1, side by side in one run.

    python -m labqueue.bench keys [--jobs 4000] [--keys 100] [--procs 1 4] [--rounds 3] [--postgres]

Each round drains a fresh queue (SQLite in a scratch folder; with --postgres, the `labqueue`
schema on LABQUEUE_PG_URL's server or a throwaway one, dropped before each drain: the URL comes
from the environment, never the command line) under each condition in turn, the order rotating
every round, with every worker process released at once (labqueue.procs.run_together). It prints
jobs per second, the median of the rounds, and the ratio of the keyed drain to the plain
one for each number of workers; every job must be handed out once. The target: the keyed
drain at no less than half the plain one's rate. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ..backends import open_queue
from ..demo.scratch import db_path, work_folder
from ..procs import run_together
from .contenders import drain_with_worker

CONDITIONS = ("no keys", "keys, limit 1")
TARGET_RATIO = 0.5


def load(location: str, jobs: int, keys: int | None) -> None:
    """A fresh queue at `location` holding `jobs` no-op jobs, spread round-robin over
    `keys` concurrency keys with limit 1 (None: no keys)."""
    if location.startswith("postgresql"):
        with open_queue(location) as q:
            q.db.execute("DROP SCHEMA IF EXISTS labqueue CASCADE")
    else:
        db_path(Path(location).stem, Path(location).parent)  # deletes the last drain's file, -wal and -shm
    with open_queue(location) as q:
        if keys is None:
            q.enqueue_many("noop", [{"n": i} for i in range(jobs)])
            return
        for i in range(jobs):  # the keys take turns, as many customers' jobs arrive
            q.enqueue("noop", {"n": i}, concurrency_key=f"k{i % keys}", concurrency_limit=1)


def child(location: str, name: str, barrier: Any, results: Any) -> None:
    """One worker process: wait for the start, drain with the worker loop, report."""
    barrier.wait()
    seen = drain_with_worker(location, name)
    results.put((name, os.getpid(), time.time(), seen))


def drain_rate(location: str, jobs: int, keys: int | None, procs: int) -> float:
    """Jobs per second for one drain; every job must be handed out exactly once."""
    load(location, jobs, keys)
    reports, released = run_together(child, [(location, f"w{n}") for n in range(procs)], "a keys drain")
    finished = max(report[2] for report in reports)
    seen = sorted(n for report in reports for n in report[3])
    if seen != list(range(jobs)):
        raise AssertionError(
            f"{procs} workers handed out {len(seen)} jobs for {jobs} ({len(set(seen))} distinct)"
        )
    return jobs / (finished - released)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench keys", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=4000, help="jobs per drain (default 4000)")
    parser.add_argument("--keys", type=int, default=100, help="concurrency keys, limit 1 each (default 100)")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 4], help="worker processes (default 1 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="on PostgreSQL: LABQUEUE_PG_URL's server, else a throwaway one (default: SQLite)",
    )
    args = parser.parse_args(argv)
    for name in ("jobs", "keys", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    with contextlib.ExitStack() as stack:
        if args.postgres:  # the URL from the environment: a password never on a command line
            from ..postgres.server import throwaway_server

            location = stack.enter_context(throwaway_server())
        else:
            location = str(work_folder() / "bench_keys.db")
        return measure(args, location)


def measure(args: argparse.Namespace, location: str) -> int:
    """The rounds, then the table; 0 when the target is met for every number of workers."""
    rates: dict[tuple[str, int], list[float]] = {}
    for round_no in range(args.rounds):
        order = CONDITIONS[round_no % 2 :] + CONDITIONS[: round_no % 2]
        for procs in args.procs:
            for condition in order:
                keys = None if condition == "no keys" else args.keys
                rate = drain_rate(location, args.jobs, keys, procs)
                rates.setdefault((condition, procs), []).append(rate)
                print(
                    f"round {round_no + 1}: {procs} worker(s), {condition}: {rate:,.0f} jobs/s",
                    file=sys.stderr,
                )
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"\n{backend}, {args.jobs} no-op jobs, {args.keys} keys with limit 1,"
        f" median of {args.rounds} round(s)"
    )
    print(f"{'workers':>7}  {'no keys':>12}  {'keys':>12}  {'ratio':>6}  target >= {TARGET_RATIO}")
    met = True
    for procs in args.procs:
        plain = statistics.median(rates["no keys", procs])
        keyed = statistics.median(rates["keys, limit 1", procs])
        ratio = keyed / plain
        met &= ratio >= TARGET_RATIO
        print(
            f"{procs:>7}  {plain:>8,.0f} j/s  {keyed:>8,.0f} j/s  {ratio:>6.2f}"
            f"  {'met' if ratio >= TARGET_RATIO else 'MISSED'}"
        )
    return 0 if met else 1
