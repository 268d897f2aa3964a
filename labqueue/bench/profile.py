"""Where a job's time goes, for the bench's report: the loops on labqueue's table,
one process, with every statement traced and every WAL frame counted.

Per job: CPU time (process time, which a busy machine disturbs far less than the
wall clock), statements sent to SQLite, write transactions, and WAL frames written
(pages the commits copy into the log; each is a write the file system must take).
The worker loop is profiled through the JobQueue calls it makes per batch
(claim_batch, then settle, which claims the next batch), in the same process, so its
connection can be traced.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import heap
from ..queue import Finished, JobQueue
from .contenders import CONTENDERS, DB_FILE, LEASE_SECONDS

# The worker loop at each batch size, through its queue calls.
BATCHED = {"labqueue_b1": 1, "labqueue_b10": 10, "labqueue_b100": 100}
PROFILED = (*BATCHED, "tutorial_l1", "floor_one_tx", "floor_take")
TRACED_JOBS = 500


def _drain_batches(q: JobQueue, batch: int) -> int:
    """The worker loop's queue calls, without the handler registry around them."""
    done = 0
    jobs = q.claim_batch("w0", batch)
    while jobs:
        done += len(jobs)
        _, jobs = q.settle([Finished(job) for job in jobs], claim_for="w0", limit=batch)
    return done


def _measure(key: str, folder: Path, jobs: int, *, trace: bool) -> dict[str, float]:
    """Drain `jobs` once in this process. Untraced: CPU time per job. Traced: the
    statements and BEGINs sent, and the WAL frames written (the log is never
    checkpointed during the drain, and a second connection keeps it from being
    folded back when the drain closes its own)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    contender = CONTENDERS[key]
    contender.load(folder, jobs)
    statements: list[str] = []
    if key in BATCHED:
        q = JobQueue(folder / DB_FILE, lease_seconds=LEASE_SECONDS)
        db = q.db
        run: Callable[[], object] = lambda: _drain_batches(q, BATCHED[key])  # noqa: E731
    else:
        handle = contender.open(folder)
        db = handle if isinstance(handle, sqlite3.Connection) else handle.db
        run = lambda: contender.drain(handle, "w0")  # noqa: E731
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if not trace:
        started = time.process_time()
        run()
        cpu = time.process_time() - started
        if key in BATCHED:
            q.close()
        return {"cpu_us_per_job": cpu / jobs * 1e6}
    # The watcher only keeps the file open (no read transaction: fetchall ends the
    # statement), so closing the drain's connection does not fold the log back.
    watcher = sqlite3.connect(folder / DB_FILE)
    try:
        watcher.execute("SELECT COUNT(*) FROM jobs").fetchall()
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.set_trace_callback(statements.append)
        run()
        frames = watcher.execute("PRAGMA wal_checkpoint").fetchall()[0][1]
    finally:
        if key in BATCHED:
            q.close()
        watcher.close()
    return {
        "statements_per_job": len(statements) / jobs,
        "write_transactions_per_job": sum(1 for s in statements if s.startswith("BEGIN")) / jobs,
        "wal_frames_per_job": frames / jobs,
    }


def profile(jobs: int, rounds: int, folder: Path) -> list[dict[str, Any]]:
    """Each profiled loop `rounds` times, interleaved; medians per job. This process keeps
    its heap's top, as each process of the race does (contenders.child)."""
    heap.keep_top()
    cpu: dict[str, list[float]] = {key: [] for key in PROFILED}
    for _ in range(rounds):
        for key in PROFILED:
            cpu[key].append(_measure(key, folder / key, jobs, trace=False)["cpu_us_per_job"])
    rows = []
    for key in PROFILED:
        counts = _measure(key, folder / key, min(jobs, TRACED_JOBS), trace=True)
        row: dict[str, Any] = {"contender": key, "label": CONTENDERS[key].label}
        row["cpu_us_per_job"] = round(statistics.median(cpu[key]), 1)
        row.update({name: round(value, 2) for name, value in counts.items()})
        rows.append(row)
    shutil.rmtree(folder, ignore_errors=True)
    return rows
