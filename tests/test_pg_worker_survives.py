"""A PostgreSQL worker survives its server: `labqueue worker` processes keep draining
through a terminated session and through a server restart in the middle of their
batches, log that they reconnected, and every job is done exactly once (its ledger row,
written in the completing transaction, once)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

import psycopg

from labqueue import open_queue
from labqueue.lab.demo_handlers import DEMO_HANDLERS
from labqueue.postgres.server import NoServer, restart, throwaway_server

pytestmark = pytest.mark.slow

JOBS = 150


def ledger_ready(url: str) -> None:
    """The queue (schema labqueue) with the demo ledger in it, and JOBS credit jobs."""
    with open_queue(url) as q:
        q.db.execute("CREATE TABLE IF NOT EXISTS ledger (job_id BIGINT NOT NULL, attempt BIGINT NOT NULL)")
        q.enqueue_many("credit", [{"n": i} for i in range(JOBS)])


def start_workers(url: str, log, n: int = 2) -> subprocess.Popen:
    """`labqueue worker` with n processes, leaving after 3 s idle."""
    command = [
        sys.executable,
        "-m",
        "labqueue",
        "worker",
        url,
        "--handlers",
        DEMO_HANDLERS,
        "--concurrency",
        str(n),
        "--idle-exit",
        "3",
        "--lease",
        "5",
        "--backoff-cap",
        "1",
    ]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def done_count(url: str) -> int:
    with open_queue(url) as q:
        return q.counts()["done"]


def wait_for(condition, seconds: float = 60.0) -> None:
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(0.05)


def assert_each_job_done_once(url: str) -> None:
    with open_queue(url) as q:
        assert q.counts()["done"] == JOBS and q.counts()["dead"] == 0
        per_job = dict(q.db.execute("SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id").fetchall())
    assert len(per_job) == JOBS and set(per_job.values()) == {1}


@pytest.fixture
def server_url():
    with throwaway_server() as url:
        yield url


def test_workers_survive_their_sessions_being_terminated(server_url, tmp_path):
    ledger_ready(server_url)
    with open(tmp_path / "worker.log", "w+") as log:
        workers = start_workers(server_url, log)
        try:
            wait_for(lambda: done_count(server_url) >= 20)
            with psycopg.connect(server_url, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                ).fetchall()
            assert len(killed) >= 2  # each worker's session, at least
            assert workers.wait(120) == 0
        finally:
            workers.kill()
        log.seek(0)
        output = log.read()
    assert "connection to the database was lost" in output and "reconnected after" in output
    assert_each_job_done_once(server_url)


def test_workers_survive_a_server_restart_in_the_middle_of_their_batches(server_url, tmp_path):
    ledger_ready(server_url)
    with open(tmp_path / "worker.log", "w+") as log:
        workers = start_workers(server_url, log)
        try:
            wait_for(lambda: done_count(server_url) >= 20)
            try:
                restart(server_url, stopped_for=1.0)  # every session ends; no connection for a second
            except NoServer as exc:
                pytest.skip(str(exc))
            assert workers.wait(120) == 0
        finally:
            workers.kill()
        log.seek(0)
        output = log.read()
    assert output.count("reconnected after") >= 2, output[-2000:]
    assert_each_job_done_once(server_url)
