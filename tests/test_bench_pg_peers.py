"""The PostgreSQL peers bench races every contender honestly. Nothing here asserts a speed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pgqueuer")
pytest.importorskip("procrastinate")
from labqueue.bench import pg_peers


@pytest.mark.parametrize("key", sorted(pg_peers.DRAINS))
def test_each_contender_drains_every_job_once_and_the_store_agrees(pg_url, key):
    run = pg_peers.race(key, pg_url, jobs=40, procs=2)
    assert run["distinct"] == 40 and run["missed"] == 0, run
    assert run["duplicates"] == 0 and run["left_in_store"] == 0, run
    # timed to the store's last finished job, which comes before the workers' exit
    assert 0 < run["seconds"] <= run["workers_exited_s"] + pg_peers.WATCH_EVERY_SECONDS * 5


def test_every_contender_imports_what_it_drains_with_before_the_release():
    """A fresh process's imports are not throughput, and they differ from one contender to
    the next: each worker process imports its contender's modules before the release."""
    assert set(pg_peers.IMPORTS) == set(pg_peers.DRAINS)
    for modules in pg_peers.IMPORTS.values():
        assert all(pg_peers.importlib.util.find_spec(m) is not None for m in modules), modules


def test_the_whole_run_pairs_each_peer_with_labqueue_and_says_what_each_promises(pg_url):
    results = pg_peers.run(pg_peers.Sizes(jobs=30, rounds=2, procs=(1,)), server=pg_url)
    rows = {row["contender"]: row for row in results["summary"]}
    assert set(rows) == set(pg_peers.DRAINS)
    assert rows["labqueue"]["labqueue_ratio"] is None
    assert all(rows[k]["labqueue_ratio"] > 0 for k in ("pgqueuer", "procrastinate", "bare"))
    # procrastinate is reported beside labqueue, not targeted: the goals are the bare loop and pgqueuer
    assert [t["target"] for t in results["targets"]] == [
        "labqueue vs bare, 1 worker(s)",
        "labqueue vs pgqueuer, 1 worker(s)",
    ]
    for target in results["targets"]:  # each one met, or missed by how much and why
        assert target["met"] or (target["missed_by"] > 0 and target["why"]), target
    assert results["meta"]["durability"].startswith("fsync=on")
    assert results["meta"]["procrastinate"].startswith("3.")
    text = pg_peers.report(results)
    assert all(pg_peers.GUARANTEES[k] in text for k in pg_peers.DRAINS)
    assert f"procrastinate {results['meta']['procrastinate']}" in text
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


@pytest.mark.parametrize("key", ["pgqueuer", "procrastinate"])
def test_an_asyncio_peer_loads_from_a_process_already_running_an_event_loop(pg_url, key):
    """A notebook kernel, or a test process driving a browser, runs an event loop already."""
    import asyncio
    import concurrent.futures

    from labqueue.bench.pg import server_database

    async def inside_a_running_loop() -> int:
        with server_database(pg_url) as url:
            pg_peers.load(key, url, 5)
            return pg_peers.left_in_store(key, url)

    # A thread of the test's own, where no loop runs yet (this process may run one already).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(asyncio.run, inside_a_running_loop()).result() == 5


def test_procrastinates_left_counts_every_job_its_worker_has_not_marked_succeeded(pg_url):
    import psycopg

    from labqueue.bench.pg import server_database

    with server_database(pg_url) as url:
        pg_peers.load("procrastinate", url, 6)
        assert pg_peers.left_in_store("procrastinate", url) == 6  # all 'todo'
        assert sorted(pg_peers.drain_procrastinate(url, "w0")) == list(range(6))  # its own worker
        with psycopg.connect(url, autocommit=True) as db:
            statuses = db.execute(
                "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY 1"
            ).fetchall()
            assert statuses == [("succeeded", 6)]  # a finished job's row stays, marked so
            assert pg_peers.left_in_store("procrastinate", url) == 0
            first, second = (row[0] for row in db.execute("SELECT id FROM procrastinate_jobs LIMIT 2"))
            set_status = "UPDATE procrastinate_jobs SET status = %s::procrastinate_job_status WHERE id = %s"
            db.execute(set_status, ("doing", first))  # taken, not finished
            db.execute(set_status, ("failed", second))  # finished, not done
            assert pg_peers.left_in_store("procrastinate", url) == 2


@pytest.mark.parametrize("missing", pg_peers.PEERS)
def test_a_missing_peer_package_is_named_before_anything_runs(monkeypatch, capsys, missing):
    real = pg_peers.importlib.util.find_spec
    monkeypatch.setattr(
        pg_peers.importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    with pytest.raises(SystemExit) as raised:
        pg_peers.main(["--quick"])
    assert raised.value.code == 2
    assert f"{missing} not installed" in capsys.readouterr().err


def test_the_targets_say_by_how_much_and_why_one_is_missed():
    summary = [
        {"contender": "labqueue", "procs": 4, "median_jobs_per_s": 9000.0, "labqueue_ratio": None},
        {"contender": "bare", "procs": 4, "median_jobs_per_s": 20000.0, "labqueue_ratio": 0.45},
        {"contender": "pgqueuer", "procs": 4, "median_jobs_per_s": 7000.0, "labqueue_ratio": 1.29},
    ]
    socket = [{"contender": "pgqueuer", "procs": 4, "labqueue_ratio": 1.1}]
    found = {t["target"]: t for t in pg_peers.targets(summary, socket)}
    bare = found["labqueue vs bare, 4 worker(s)"]
    assert (bare["goal"], bare["met"], bare["missed_by"]) == (">= 0.6", False, 0.15)
    assert "twice" in bare["why"]
    peer = found["labqueue vs pgqueuer, 4 worker(s)"]
    assert (peer["met"], peer["missed_by"]) == (False, 1.71)
    assert "is 21,000, 1.05x the bare loop's 20,000" in peer["why"]  # 3x pgqueuer is past the bare loop
    delayed = found["labqueue vs pgqueuer, 4 worker(s), delayed against the socket"]
    assert (delayed["goal"], delayed["met"], delayed["why"]) == ("> 1.1", True, None)
    text = pg_peers.report({"summary": [], "targets": list(found.values()), "meta": META})
    assert "missed by 0.15: labqueue writes each job twice" in text


META = {"postgresql": "18", "durability": "fsync=on", "pgqueuer": "1", "cpus": 2, "load_average": [0.0]}


def test_the_transaction_drain_runs_the_worker_without_the_settle_function(pg_url, monkeypatch):
    from labqueue.drivers.postgres import driver
    from labqueue.postgres import PgJobQueue
    from labqueue.postgres.server import fresh_database

    monkeypatch.setattr(driver.PgDriver, "settle_in_one_call", driver.PgDriver.settle_in_one_call)  # put back
    with fresh_database(pg_url, prefix="bench") as url:
        pg_peers.load("labqueue_tx", url, 25)
        assert sorted(pg_peers.drain_labqueue_tx(url, "w")) == list(range(25))
        with PgJobQueue(url) as q:
            assert q._d.settle_in_one_call([], None, None) is None  # the drain's switch: no one call here
            assert q.counts()["done"] == 25


def test_the_waits_bench_samples_the_drains_sessions_and_its_log(pg_url):
    from labqueue.bench import pg_waits

    found = pg_waits.run(pg_url, ["labqueue"], jobs=300, procs=[2])
    (row,) = found
    assert row["jobs_per_s"] > 0 and row["samples"] > 0 and row["wal_bytes_per_job"] > 0
    # the two workers' sessions were seen, each either working, waiting for its client or on the server
    assert row["waits"] and all(share > 0 for share in row["waits"].values())
    assert pg_peers.LABELS["labqueue"] in pg_waits.report(found)
