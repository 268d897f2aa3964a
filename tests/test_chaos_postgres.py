"""The chaos run on PostgreSQL: worker processes that connect over TCP to 127.0.0.1
(stand-ins for workers on other machines), SIGKILLed and SIGSTOPped, and every invariant
of the SQLite run holding, one ledger row per credit job included."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit

import psutil
import pytest

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from labqueue import InvalidArgument, open_queue
from labqueue.chaos.check import faults_used_it_up
from labqueue.chaos.store import Store
from labqueue.chaos.supervisor import (
    ChaosConfig,
    Fault,
    main,
    run,
)
from labqueue.postgres.server import ENV_URL, NoServer, fresh_database, throwaway_server


@pytest.fixture(scope="module")
def tcp_server() -> Iterator[str]:
    """A throwaway server listening on 127.0.0.1 (or LABQUEUE_PG_URL's) for this module."""
    try:
        with throwaway_server(tcp=True) as url:
            yield url
    except NoServer as exc:
        if isinstance(exc.__cause__, ImportError):
            pytest.skip(str(exc))
        raise


@pytest.fixture
def database(tcp_server) -> Iterator[str]:
    with fresh_database(tcp_server, prefix="chaos_test") as url:
        yield url


def test_a_throwaway_server_can_listen_on_the_loopback_address(tcp_server):
    if os.environ.get(ENV_URL):
        pytest.skip(f"{ENV_URL} names the server; how it listens is its own business")
    assert urlsplit(tcp_server).hostname == "127.0.0.1"
    with Store(tcp_server) as db:
        assert str(db.scalar("SELECT inet_server_addr()")) == "127.0.0.1"


@pytest.mark.slow
def test_a_small_run_with_kills_and_pauses_passes_over_tcp(database):
    config = ChaosConfig(jobs=60, workers=4, kill_every=0.3, pause_every=1.0, pause_seconds=1.2, seed=2)
    seen: list[tuple[int, int]] = []
    result = run(config, database, progress=lambda done, total: seen.append((done, total)))
    assert result.passed, "\n".join(result.report())
    assert {f.fault for f in result.faults} == {"kill", "pause"}
    assert {"killed", "crashed"} <= {w.fate for w in result.workers}  # crashed: the poison jobs
    assert len(result.workers) > config.workers
    assert seen[-1] == (60, 60)
    ledger = [job_id for job_id, _ in result.ledger]
    assert sorted(ledger) == sorted(j.id for j in result.jobs if j.state == "done")
    assert len(ledger) == len(set(ledger))  # never two rows for one job
    # One row per credit job, except a job whose every attempt a kill, a pause or its batch's
    # poison crash took away: the queue retires that one when its last lease runs out.
    hits = Counter(job_id for f in result.faults for job_id in f.hit) + Counter(result.crash_hits)
    without_row = [j for j in result.jobs if j.kind == "credit" and j.id not in set(ledger)]
    assert all(faults_used_it_up(j, hits[j.id], config.lease) for j in without_row), without_row
    assert "on PostgreSQL" in result.report()[0]
    assert not any(
        psutil.pid_exists(w.pid) and psutil.Process(w.pid).status() != "zombie" for w in result.workers
    )
    with Store(database) as db:  # the record sits beside the jobs, in the queue's schema
        assert db.scalar("SELECT COUNT(*) FROM chaos_workers") == len(result.workers)
        assert db.scalar("SELECT COUNT(*) FROM chaos_faults") == len(result.faults)
        assert db.scalar("SELECT started FROM chaos_run") == result.started


def test_a_run_never_reuses_a_database_that_holds_a_queue(database):
    with open_queue(database) as q:
        q.enqueue("credit", {})
    with pytest.raises(InvalidArgument, match="already holds a queue in schema 'labqueue'"):
        run(ChaosConfig(jobs=1, mix={"credit": 1}), database)
    with open_queue(database) as q:
        assert q.counts()["queued"] == 1  # untouched


def test_a_fault_costs_every_job_of_the_batch_the_worker_held():
    assert Fault(1.0, "kill", "w1", 3, held=(3, 4, 5)).hit == (3, 4, 5)
    assert Fault(1.0, "kill", "w1", 3).hit == (3,)  # a record from before batches were noted
    assert Fault(1.0, "kill", "w1", None).hit == ()


@pytest.mark.slow
def test_the_command_line_runs_on_a_throwaway_postgres(capsys):
    assert main(["--postgres", "--jobs", "12", "--workers", "2", "--mix", "credit=12"]) == 0
    out = capsys.readouterr().out
    assert "12 jobs (12 credit), 2 workers, lease 0.8 s" in out and "on PostgreSQL" in out
    assert out.rstrip().endswith("PASS: every job finished exactly once or was dead-lettered")


@pytest.mark.slow
def test_a_run_through_severed_sessions_and_an_outage_passes(database):
    """The server's own faults: every worker's session terminated every half second on
    average, and a second in which the database refuses connections; with kills too."""
    config = ChaosConfig(
        jobs=300, workers=4, kill_every=0.8, sever_every=0.5, outage_at=1.5, outage_seconds=1.0, seed=5
    )
    result = run(config, database)
    assert result.passed, "\n".join(result.report())
    severed = [f for f in result.faults if f.fault == "sever"]
    assert severed and "worker sessions terminated" in result.report()[1]
    assert "connections refused for 1 s at 1.5 s" in result.report()[1]
    with Store(database) as db:  # the outage ended: the database takes connections again
        assert db.scalar("SELECT datallowconn FROM pg_database WHERE datname = current_database()")


def test_the_servers_faults_need_postgresql(tmp_path):
    with pytest.raises(InvalidArgument, match="PostgreSQL's faults"):
        run(ChaosConfig(jobs=10, sever_every=1.0), tmp_path / "chaos.db")
