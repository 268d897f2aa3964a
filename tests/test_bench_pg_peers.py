"""The PostgreSQL peers bench races every contender honestly. Nothing here asserts a speed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pgqueuer")
from labqueue.bench import pg_peers


@pytest.mark.parametrize("key", sorted(pg_peers.DRAINS))
def test_each_contender_drains_every_job_once_and_the_store_agrees(pg_url, key):
    run = pg_peers.race(key, pg_url, jobs=40, procs=2)
    assert run["distinct"] == 40 and run["missed"] == 0, run
    assert run["duplicates"] == 0 and run["left_in_store"] == 0, run
    # timed to the store's last finished job, which comes before the workers' exit
    assert 0 < run["seconds"] <= run["workers_exited_s"] + pg_peers.WATCH_EVERY_SECONDS * 5


def test_the_whole_run_pairs_each_peer_with_labqueue_and_says_what_each_promises(pg_url):
    results = pg_peers.run(pg_peers.Sizes(jobs=30, rounds=2, procs=(1,)), server=pg_url)
    rows = {row["contender"]: row for row in results["summary"]}
    assert set(rows) == set(pg_peers.DRAINS)
    assert rows["labqueue"]["labqueue_ratio"] is None
    assert all(rows[k]["labqueue_ratio"] > 0 for k in ("pgqueuer", "bare"))
    assert [t["target"] for t in results["targets"]] == ["labqueue vs pgqueuer, 1 worker(s)"]
    assert results["meta"]["durability"].startswith("fsync=on")
    text = pg_peers.report(results)
    assert all(pg_peers.GUARANTEES[k] in text for k in pg_peers.DRAINS)
    json.dumps(results)


def test_paired_ratios_are_taken_within_each_round():
    runs = [
        {"contender": "labqueue", "procs": 1, "round": 1, "jobs_per_s": 300.0},
        {"contender": "pgqueuer", "procs": 1, "round": 1, "jobs_per_s": 100.0},
        {"contender": "labqueue", "procs": 1, "round": 2, "jobs_per_s": 1000.0},
        {"contender": "pgqueuer", "procs": 1, "round": 2, "jobs_per_s": 500.0},
    ]
    assert pg_peers.paired_ratio(runs, "labqueue", "pgqueuer", 1) == 2.5  # median of 3.0 and 2.0


@pytest.mark.parametrize("bad", [{"jobs": 0}, {"rounds": 1.5}, {"procs": ()}, {"procs": (0,)}])
def test_bad_sizes_are_refused_with_the_value(bad):
    with pytest.raises(pg_peers.InvalidArgument, match="got"):
        pg_peers.Sizes(**bad)


def test_pgqueuer_loads_from_a_process_already_running_an_event_loop(pg_url):
    """A notebook kernel, or a test process driving a browser, runs an event loop already."""
    import asyncio
    import concurrent.futures

    from labqueue.bench.pg import server_database

    async def inside_a_running_loop() -> int:
        with server_database(pg_url) as url:
            pg_peers.load("pgqueuer", url, 5)
            return pg_peers.left_in_store("pgqueuer", url)

    # A thread of the test's own, where no loop runs yet (this process may run one already).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(asyncio.run, inside_a_running_loop()).result() == 5
