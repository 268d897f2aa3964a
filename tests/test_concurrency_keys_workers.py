"""Concurrency limits across real worker processes, on SQLite and PostgreSQL: eight workers
drain 2,000 jobs over 20 keys with limit 2, and the runs they record (the `keyed` demo
handler writes each accepted run's start and end in the completing transaction) show no key
with more than two runs at once, and every job done once."""

from __future__ import annotations

import os
import random
import time

import pytest
from cli_helpers import default_schema_location

from labqueue import open_queue
from labqueue.demo.handlers import DEMO_HANDLERS, RUNS_TABLE, most_at_once
from labqueue.pool import WorkerPool

pytestmark = pytest.mark.slow

JOBS, KEYS, LIMIT, WORKERS = 2000, 20, 2, 8


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    yield from default_schema_location(request, tmp_path)  # workers open the default schema


def test_eight_workers_never_run_more_than_the_limit_of_a_key(location, monkeypatch):
    monkeypatch.delenv("LABQUEUE_DB", raising=False)
    with open_queue(location) as q:
        q.db.execute(RUNS_TABLE)
        # Keys in a shuffled (seeded) order: in a round-robin order every batch holds the keys
        # in the same sequence, and two workers run one key at once only when their batches
        # start within one job's time of each other, which on a busy machine they may never
        # do: the limit would be respected without ever being reached.
        picks = random.Random(7)
        for _ in range(JOBS):
            key = f"customer:{picks.randrange(KEYS)}"
            q.enqueue("keyed", {"key": key, "seconds": 0.004}, concurrency_key=key, concurrency_limit=LIMIT)
    started = time.monotonic()
    with WorkerPool(location, WORKERS, lease_seconds=30, idle_exit=0.5, handlers=[DEMO_HANDLERS]) as pool:
        pool.fill()
        while pool.alive() and time.monotonic() - started < 240:
            pool.check()
            time.sleep(0.1)
        assert pool.alive() == 0, "the workers did not finish within 240 s"
    with open_queue(location) as q:
        counts = q.counts()
        runs = q.db.execute("SELECT job_id, run_key, started, ended FROM runs").fetchall()
    assert counts["done"] == JOBS and counts["queued"] == counts["running"] == counts["dead"] == 0, counts
    assert sorted(r[0] for r in runs) == list(range(1, JOBS + 1))  # each job's run accepted once
    most = most_at_once([(key, begun, ended) for _, key, begun, ended in runs])
    assert len(most) == KEYS and max(most.values()) <= LIMIT, most
    assert max(most.values()) == LIMIT  # the limit was reached, not just respected
    print(
        f"{os.path.basename(str(location))[:20]}: {JOBS} jobs in {time.monotonic() - started:.1f} s, "
        f"most at once per key {max(most.values())}"
    )


def test_the_keys_benchmark_drains_both_ways_and_prints_the_ratio(tmp_path, monkeypatch, capsys):
    """A smoke run of `python -m labqueue.bench keys` (every job handed out once, or it raises):
    it prints a row per number of workers, a measurement and not a test of speed."""
    from labqueue.bench import keys

    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    keys.main(["--jobs", "60", "--keys", "5", "--procs", "1", "2", "--rounds", "1"])
    table = capsys.readouterr().out
    assert "60 no-op jobs, 5 keys with limit 1" in table
    assert [line.split()[0] for line in table.splitlines()[-2:]] == ["1", "2"]
