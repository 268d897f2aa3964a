"""A draining process of the throughput lab: claim, complete, repeat until the queue is empty.

    python -m labqueue.lab.throughput_worker WORKER_ID

It reads one run per line on stdin, as JSON: {"db", "per_claim", "synchronous", "go_file"}.
For each run it opens the queue, says it is ready (a row in tp_ready), waits for go_file to
appear so that every worker starts at the same moment, drains no-op jobs without running any
handler (the lab measures the queue's own cost), records how many jobs it finished and when
(a row in tp_results) and closes the file. It prints nothing: the parent reads SQLite. Staying
alive between runs keeps interpreter start-up, which costs more than a short run, out of the lab.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from ..queue import JobQueue

RESULTS_TABLE = """
CREATE TABLE IF NOT EXISTS tp_ready (worker TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tp_results (
    worker      TEXT    NOT NULL,
    done        INTEGER NOT NULL,
    finished_at REAL    NOT NULL
);
"""
MARK_READY = "INSERT INTO tp_ready (worker) VALUES (?)"
RECORD_RESULT = "INSERT INTO tp_results (worker, done, finished_at) VALUES (?, ?, ?)"
GO_POLL_SECONDS = 0.001
GO_TIMEOUT_SECONDS = 120.0


def wait_for_go(go_file: Path, timeout: float = GO_TIMEOUT_SECONDS) -> None:
    """Spin lightly until the parent creates go_file; a lost parent must not leave us hanging."""
    deadline = time.monotonic() + timeout
    while not go_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no start signal at {go_file} after {timeout} s")
        time.sleep(GO_POLL_SECONDS)


def drain(q: JobQueue, worker: str, per_claim: int) -> int:
    """The measured loop, with nothing else in it: claim up to `per_claim` jobs, complete
    each one, and stop at the first empty claim. Returns how many completions were accepted."""
    finished = 0
    while batch := q.claim(worker, limit=per_claim):
        finished += sum(q.complete(job) for job in batch)
    return finished


def run_once(worker: str, db: str, per_claim: int, synchronous: str, go_file: str) -> int:
    with JobQueue(db, synchronous=synchronous, lease_seconds=60, schema=None) as q:
        q.db.execute(MARK_READY, (worker,))
        wait_for_go(Path(go_file))
        done = drain(q, worker, per_claim)
        q.db.execute(RECORD_RESULT, (worker, done, time.time()))
    return done


def serve(worker: str, commands: TextIO) -> int:
    """Run every command line until stdin closes. Returns the number of runs."""
    runs = 0
    for line in commands:
        if line.strip():
            run_once(worker, **json.loads(line))
            runs += 1
    return runs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    serve(args[0], sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
