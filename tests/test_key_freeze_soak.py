"""Concurrency limits under frozen workers, on SQLite and PostgreSQL: eight workers drain
2,000 keyed jobs (20 keys, limit 1) on a one-second lease while a freezer stops a random
worker (SIGSTOP) for longer than the lease and thaws it, again and again. A frozen worker's
keyed leases run out and their keys' places go to other jobs; when it thaws, nothing it
reports for them may be accepted. The runs the `keyed` handler records in the completing
transaction must never show two runs of a key at once, and every job is done once."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time

import pytest
from cli_helpers import default_schema_location

from labqueue import open_queue
from labqueue.demo.handlers import DEMO_HANDLERS, RUNS_TABLE, most_at_once
from labqueue.pool import WorkerPool

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGSTOP is POSIX")]

JOBS, KEYS, LIMIT, WORKERS, LEASE = 2000, 20, 1, 8, 1.0
FREEZES = 30  # then the drain finishes at full speed (a frozen PostgreSQL claimer holds its keys' locks)


def signal_if_alive(pid: int, signum: int) -> None:
    """A worker may leave (its idle exit) between the look and the signal."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    yield from default_schema_location(request, tmp_path)  # workers open the default schema


def test_workers_frozen_past_their_lease_never_take_a_key_past_its_limit(location, monkeypatch):
    monkeypatch.delenv("LABQUEUE_DB", raising=False)
    rng = random.Random(48)
    with open_queue(location) as q:
        q.db.execute(RUNS_TABLE)
        for n in range(JOBS):
            key = f"customer:{n % KEYS}"
            q.enqueue("keyed", {"key": key, "seconds": 0.01}, concurrency_key=key, concurrency_limit=LIMIT)
    started = time.monotonic()
    freezes = 0
    thaw_at: dict[int, float] = {}  # pid of a frozen worker: when to thaw it
    with WorkerPool(
        location, WORKERS, lease_seconds=LEASE, idle_exit=3.0, handlers=[DEMO_HANDLERS], backoff_cap=0.2
    ) as pool:
        pool.fill()
        try:
            while pool.alive() and time.monotonic() - started < 300:
                pool.check()
                now = time.monotonic()
                for pid, at in list(thaw_at.items()):
                    if now >= at:
                        signal_if_alive(pid, signal.SIGCONT)
                        del thaw_at[pid]
                awake = [w for w in pool.workers if w.proc.poll() is None and w.pid not in thaw_at]
                if awake and len(thaw_at) < 3 and freezes < FREEZES:  # up to three at once, past the lease
                    frozen = rng.choice(awake)
                    signal_if_alive(frozen.pid, signal.SIGSTOP)
                    thaw_at[frozen.pid] = now + LEASE * rng.uniform(1.2, 2.0)
                    freezes += 1
                time.sleep(rng.uniform(0.1, 0.3))
        finally:
            for pid in thaw_at:
                signal_if_alive(pid, signal.SIGCONT)
        assert pool.alive() == 0, "the workers did not finish within 300 s"
    with open_queue(location) as q:
        counts = q.counts()
        runs = q.db.execute("SELECT job_id, run_key, started, ended FROM runs").fetchall()
    assert counts["done"] == JOBS and counts["queued"] == counts["running"] == counts["dead"] == 0, counts
    assert sorted(r[0] for r in runs) == list(range(1, JOBS + 1))  # each job's run accepted once
    most = most_at_once([(key, begun, ended) for _, key, begun, ended in runs])
    assert max(most.values()) <= LIMIT, {k: v for k, v in most.items() if v > LIMIT}
    assert freezes == FREEZES
    took = time.monotonic() - started
    print(f"{JOBS} jobs, {freezes} freezes past the lease, {took:.1f} s; most at once {max(most.values())}")
