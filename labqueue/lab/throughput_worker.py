"""A draining process of notebook 09: the tutorial's drain, on the learner's queue.

    python -m labqueue.lab.throughput_worker [--code FOLDER] WORKER_ID

It loads the tutorial's `jobqueue` module from FOLDER (the kernel's workspace, `ws.folder`:
the learner's cells as they last ran them) or, without it, the course's copy. Then it reads
one run per line on stdin, as JSON: {"db", "per_claim", "synchronous", "go_file", "max_claims"}. For each
run it opens the queue at that `synchronous` level, says it is ready (a row in tp_ready),
waits for go_file to appear so that every worker starts at the same moment, drains no-op
jobs without running any handler (the notebook measures the queue's own cost), records what
it did (a row in tp_results) and closes the file. It prints nothing: the parent reads
SQLite. Staying alive between runs keeps interpreter start-up, which costs more than a short
run, out of the measurement.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..tutorial.process import tutorial_module

RESULTS_TABLE = """
CREATE TABLE IF NOT EXISTS tp_ready (worker TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tp_results (
    worker      TEXT    NOT NULL,
    done        INTEGER NOT NULL,
    claims      INTEGER NOT NULL,
    synchronous INTEGER NOT NULL,
    finished_at REAL    NOT NULL
);
"""
MARK_READY = "INSERT INTO tp_ready (worker) VALUES (?)"
RECORD_RESULT = (
    "INSERT INTO tp_results (worker, done, claims, synchronous, finished_at) VALUES (?, ?, ?, ?, ?)"
)
GO_POLL_SECONDS = 0.001
GO_TIMEOUT_SECONDS = 120.0
LEASE_SECONDS = 60.0  # no lease runs out during a drain


def wait_for_go(go_file: Path, timeout: float = GO_TIMEOUT_SECONDS) -> None:
    """Spin lightly until the parent creates go_file; a lost parent must not leave us hanging."""
    deadline = time.monotonic() + timeout
    while not go_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no start signal at {go_file} after {timeout} s")
        time.sleep(GO_POLL_SECONDS)


def drain(q: Any, worker: str, per_claim: int, max_claims: int) -> tuple[int, int]:
    """The tutorial's measured loop: claim up to `per_claim` jobs, complete each one, and
    stop at the first claim that finds nothing (or after `max_claims` claims, which a queue
    that hands each job out once never needs). Returns (completions the queue accepted,
    claims that handed out at least one job)."""
    done = claims = 0
    while claims < max_claims and (jobs := q.claim(worker, limit=per_claim)):
        claims += 1
        for job in jobs:
            done += q.complete(job)  # True (1) when accepted
    return done, claims


def run_once(
    queue_class: Any, worker: str, db: str, per_claim: int, synchronous: str, go_file: str, max_claims: int
) -> int:
    q = queue_class(db, synchronous=synchronous, lease_seconds=LEASE_SECONDS)
    try:
        (level,) = q.db.execute("PRAGMA synchronous").fetchone()  # what SQLite runs at, read back
        q.db.execute(MARK_READY, (worker,))
        wait_for_go(Path(go_file))
        done, claims = drain(q, worker, per_claim, max_claims)
        q.db.execute(RECORD_RESULT, (worker, done, claims, level, time.time()))
    finally:
        q.db.close()
    return done


def serve(worker: str, commands: TextIO, code: str | None = None) -> int:
    """Run every command line until stdin closes, on the JobQueue of the workspace `code`
    (the course's without it). Returns the number of runs."""
    queue_class = tutorial_module("jobqueue", code).JobQueue
    runs = 0
    for line in commands:
        if line.strip():
            run_once(queue_class, worker, **json.loads(line))
            runs += 1
    return runs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    code = None
    if args[:1] == ["--code"] and len(args) > 1:
        code, args = args[1], args[2:]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    serve(args[0], sys.stdin, code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
