"""Where the PostgreSQL drains wait: the server's wait events, sampled while workers drain,
and the log each drain writes per job.

    python -m labqueue.bench pg-waits [--jobs N] [--procs 1 4] [--contenders labqueue bare]

Each drain is pg_peers.race (a fresh database, the workers released together). While it
runs, a thread reads pg_stat_activity every millisecond and counts, for the sessions of
the drain's database, what each is doing: on the CPU ("active", no wait event), waiting
for its client ("idle", ClientRead), or waiting on the server (a lock, the log's flush,
a buffer). A share is the mean number of sessions in that state over the samples: 0.39
LWLock:WALWrite means that at any moment, on average, 0.39 sessions were waiting to
write the log. The log per job is pg_current_wal_lsn() read before the load and after
the drain, over the jobs, so it counts the load's inserts and the fresh database's own
records too (alike for every contender).

It answers "why do more workers not drain faster" with the server's own account; what
it found for labqueue is in CHANGELOG.md (issue 41).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..arguments import whole_number
from . import pg_peers

SAMPLE_EVERY_SECONDS = 0.001
# The workers' sessions: in the database the race made (pg_peers names it bench_...), the
# race's watch and this sampler left out.
ACTIVITY = """
SELECT state, COALESCE(wait_event_type || ':' || wait_event, '-')
  FROM pg_stat_activity
 WHERE datname LIKE 'bench%%' AND pid <> pg_backend_pid() AND backend_type = 'client backend'
   AND application_name <> %(watcher)s
"""
WAL_NOW = "SELECT pg_current_wal_lsn()"
WAL_SINCE = "SELECT pg_current_wal_lsn() - %s::pg_lsn"


def sample_waits(url: str, stop: threading.Event, counts: collections.Counter, taken: list[int]) -> None:
    """Count (state, wait event) of the drain's sessions until `stop`; `taken` gets how
    many samples were read."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        while not stop.is_set():
            for state, event in db.execute(ACTIVITY, {"watcher": pg_peers.WATCHER}).fetchall():
                counts[(state or "-", event)] += 1
            taken[0] += 1
            time.sleep(SAMPLE_EVERY_SECONDS)


def measure(key: str, server: str, jobs: int, procs: int) -> dict[str, Any]:
    """One drain of `key` with `procs` workers, its wait events and its log per job."""
    import psycopg

    counts: collections.Counter = collections.Counter()
    taken = [0]
    with psycopg.connect(server, autocommit=True) as db:
        before = db.execute(WAL_NOW).fetchone()[0]
    stop = threading.Event()
    sampler = threading.Thread(target=sample_waits, args=(server, stop, counts, taken), daemon=True)
    sampler.start()
    try:
        run = pg_peers.race(key, server, jobs, procs)
    finally:
        stop.set()
        sampler.join()
    with psycopg.connect(server, autocommit=True) as db:
        wal = float(db.execute(WAL_SINCE, (str(before),)).fetchone()[0])
    samples = max(taken[0], 1)
    return {
        "contender": key,
        "procs": procs,
        "jobs_per_s": run["jobs_per_s"],
        "wal_bytes_per_job": round(wal / jobs),
        "samples": taken[0],
        "waits": {f"{state} {event}": round(n / samples, 3) for (state, event), n in counts.most_common()},
    }


def run(
    server: str | None,
    keys: Sequence[str],
    jobs: int,
    procs: Sequence[int],
    progress: Callable[[str], object] = lambda line: None,
) -> list[dict[str, Any]]:
    """Each contender with each number of workers, on `server` (None: a throwaway one, or
    LABQUEUE_PG_URL's)."""
    from ..postgres.server import throwaway_server

    found = []
    with contextlib.ExitStack() as stack:
        url = server or stack.enter_context(throwaway_server())
        for key in keys:
            for n in procs:
                found.append(measure(key, url, jobs, n))
                progress(f"{key} with {n} worker(s): {found[-1]['jobs_per_s']:,.0f} jobs/s")
    return found


def report(found: Sequence[dict[str, Any]], top: int = 8) -> str:
    lines = []
    for row in found:
        lines.append(
            f"{pg_peers.LABELS[row['contender']]}, {row['procs']} worker(s): "
            f"{row['jobs_per_s']:,.0f} jobs/s, {row['wal_bytes_per_job']:,} bytes of log per job, "
            f"{row['samples']} samples"
        )
        for name, share in list(row["waits"].items())[:top]:
            lines.append(f"    {share:6.2f}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench pg-waits", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=whole_number, default=20_000, help="jobs per drain (default 20,000)")
    parser.add_argument("--procs", type=whole_number, nargs="+", default=[1, 4], help="workers (default 1 4)")
    parser.add_argument(
        "--contenders",
        nargs="+",
        choices=sorted(pg_peers.DRAINS),
        default=["labqueue", "bare"],
        help="which drains (default labqueue bare)",
    )
    args = parser.parse_args(argv)
    found = run(None, args.contenders, args.jobs, args.procs, lambda line: print(line, file=sys.stderr))
    print(report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
