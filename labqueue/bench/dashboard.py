"""How fast the dashboard pages a big SQLite queue: each page's time, as a request without the
network (Dashboard.respond(): open the queue, one read-only transaction, render, close).

    python -m labqueue.bench dashboard [--jobs 1000000] [--repeat 20] [--folder DIR]

The queue is filled once with --jobs rows as a long-lived queue holds them: nearly all done
(the last hour's share finished within the hour, for the chart), a thousand queued, ten
running, one in a thousand dead; three kinds, two named queues. Every page is read --repeat
times and its median and worst are printed, in milliseconds: the first page of the jobs list,
a page in the middle and the last page (keyset paging: each reads the primary key from its
`before` id, so depth costs nothing), filtered lists, the dead letters, the running jobs, a
job's page, and the overview, whose throughput chart counts the newest 50,000 jobs (a range
of the primary key: no index on finished_at); it is read afresh each time here, where open
tabs would share a reading. A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from ..cli import open_existing
from ..dashboard import Dashboard
from ..dashboard.reading import Shared
from ..queue import JobQueue

KINDS = ("email", "sms", "report")


def seed(path: Path, jobs: int, now: float) -> None:
    """`jobs` rows in a new queue at `path` (labqueue's own schema and indexes)."""
    JobQueue(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")  # a bulk load only
    recent = min(jobs // 20, 60_000)  # finished within the last hour

    def row(i: int) -> tuple:
        kind, queue = KINDS[i % 3], "mail" if i % 2 else "default"
        created = now - (jobs - i) * 0.5
        if i >= jobs - 10:
            return (kind, queue, "running", 1, now + 20, created, None, "bench:1", None)
        if i >= jobs - 1010:
            return (kind, queue, "queued", 0, created, created, None, None, None)
        if i % 1000 == 7:
            return (kind, queue, "dead", 5, created, created, created + 1, None, f"boom {i}")
        finished = now - (jobs - i) * 3600 / max(recent, 1) if i >= jobs - recent else created + 1
        return (kind, queue, "done", 1, created, created, finished, None, None)

    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO jobs (kind, queue, state, attempts, visible_at, created_at, finished_at, worker, "
        "last_error, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{\"n\": 1}')",
        (row(i) for i in range(jobs)),
    )
    db.execute("COMMIT")
    db.close()


def measure(path: Path, repeat: int) -> list[tuple[str, float, float]]:
    board = Dashboard(lambda: open_existing(str(path)), where=str(path))
    with JobQueue(path, create=False) as q:
        newest = q.latest_jobs(limit=1)[0].id
    pages = [
        ("overview /", "/"),
        ("jobs, first page", "/jobs"),
        ("jobs, a middle page", f"/jobs?before={newest // 2}"),
        ("jobs, the last page", "/jobs?before=40"),
        ("jobs of kind sms", "/jobs?kind=sms"),
        ("jobs of queue mail, done, deep", f"/jobs?queue=mail&state=done&before={newest // 3}"),
        ("dead letters", "/dead"),
        ("running", "/running"),
        ("one job", f"/jobs/{newest // 2}"),
    ]
    found = []
    for label, target in pages:
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            board.overview = Shared(max_age=0.0)  # read every time, not the shared reading
            response = board.respond("GET", target, {})
            times.append((time.perf_counter() - began) * 1000)
            assert response.status == 200, (target, response.status)
        found.append((label, statistics.median(times), max(times)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench dashboard", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="rows in the queue (default 1000000)")
    parser.add_argument("--repeat", type=int, default=20, help="reads of each page (default 20)")
    parser.add_argument("--folder", type=Path, help="where the queue file goes (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        path = (args.folder or Path(scratch)) / "dashboard-bench.db"
        began = time.perf_counter()
        seed(path, args.jobs, time.time())
        size = path.stat().st_size / 2**20
        took = time.perf_counter() - began
        print(f"{args.jobs:,} jobs in {path.name} ({size:.0f} MiB), filled in {took:.1f} s")
        print(f"{'page':<34}{'median ms':>10}{'worst ms':>10}")
        for label, median, worst in measure(path, args.repeat):
            print(f"{label:<34}{median:>10.1f}{worst:>10.1f}")
        if args.folder:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
