"""The PostgreSQL benchmark runs and reports honestly. Tiny sizes; nothing here asserts a speed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from labqueue import InvalidArgument
from labqueue.bench import pg
from labqueue.bench import run as bench_run

pytestmark = pytest.mark.slow


@pytest.fixture
def database(pg_url):
    with pg.server_database(pg_url) as url:
        yield url


@pytest.mark.parametrize("backend", pg.BACKENDS)
def test_a_drain_hands_every_job_to_one_worker_and_leaves_none(database, tmp_path, backend):
    where = str(tmp_path / "sqlite") if backend == "sqlite" else database
    run = pg.drain(backend, where, 40, 2)
    assert (run["deliveries"], run["distinct"], run["duplicates"], run["missed"]) == (40, 40, 0, 0)
    assert run["left_in_store"] == 0
    assert run["jobs_per_s"] > 0


def test_each_way_of_waiting_picks_up_every_job(database):
    sizes = pg.Sizes(jobs=1, rounds=1, procs=(1,), latency_jobs=3, max_gap=0.02)
    for mode in pg.MODES:
        row = pg.pickup_latency(database, mode, sizes, pg.random.Random(1))
        assert (row["jobs"], row["picked"]) == (3, 3)
        assert row["median_ms"] is not None and len(row["latencies_ms"]) == 3


def fake_run(backend, procs, rnd, jobs_per_s, duplicates=0):
    return {"backend": backend, "procs": procs, "round": rnd, "jobs_per_s": jobs_per_s,
            "duplicates": duplicates, "missed": 0}


def test_the_summary_pairs_rounds_and_takes_medians():
    runs = [fake_run("sqlite", 1, r, v) for r, v in enumerate((100.0, 200.0, 400.0), 1)]
    runs += [fake_run("postgres", 1, r, v) for r, v in enumerate((50.0, 150.0, 100.0), 1)]
    runs += [fake_run("sqlite", 4, 1, 300.0), fake_run("postgres", 4, 1, 600.0, duplicates=2)]
    one, four = pg.summarize(runs)
    assert (one["sqlite_jobs_per_s"], one["postgres_jobs_per_s"]) == (200.0, 100.0)
    assert one["ratio_rounds"] == [0.5, 0.75, 0.25] and one["ratio_pg_to_sqlite"] == 0.5
    assert four["ratio_pg_to_sqlite"] == 2.0 and four["duplicates"] == 2  # reported, not hidden


def test_sizes_refuse_nonsense():
    with pytest.raises(InvalidArgument, match="procs must be whole numbers"):
        pg.Sizes(procs=(1, 0))
    with pytest.raises(InvalidArgument, match="jobs must be a whole number"):
        pg.Sizes(jobs=0)


def test_the_whole_run_reports_both_backends_and_both_ways(pg_url, tmp_path, monkeypatch):
    sizes = pg.Sizes(jobs=20, rounds=1, procs=(1, 2), latency_jobs=2, max_gap=0.02)
    results = pg.run(sizes, pg_url, tmp_path)
    assert [row["procs"] for row in results["summary"]] == [1, 2]
    assert all(row["duplicates"] == 0 and row["missed"] == 0 for row in results["summary"])
    assert {row["mode"] for row in results["latency"]} == {"listen", "poll_50ms"}
    text = pg.report(results)
    assert "PG / SQLite" in text and "LISTEN/NOTIFY" in text
    # The two sides' durability, read from the server, is said beside the figures.
    assert results["meta"]["durability"]["postgresql"].startswith("fsync=on, synchronous_commit=on")
    assert "PostgreSQL: fsync=on" in text and "SQLite: WAL, synchronous=NORMAL" in text
    json.dumps(results)  # writable as it is


def test_labqueue_bench_pg_is_reached_through_the_bench_command(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(pg, "run", lambda sizes, **kw: seen.setdefault("sizes", sizes) and FAKE)
    assert bench_run.main(["pg", "--quick", "--procs", "1", "3"]) == 0
    assert seen["sizes"].procs == (1, 3) and seen["sizes"].jobs == pg.QUICK.jobs
    assert "PG / SQLite" in capsys.readouterr().out


FAKE = {
    "meta": {"cpus": 2, "load_average": None, "postgresql": "18", "sqlite": "3"},
    "summary": [
        {"procs": 1, "sqlite_jobs_per_s": 10.0, "postgres_jobs_per_s": 5.0, "ratio_pg_to_sqlite": 0.5,
         "duplicates": 0}
    ],
    "latency": [{"label": "x", "picked": 1, "jobs": 1, "median_ms": 1.0, "p95_ms": 1.0, "max_ms": 1.0}],
}
