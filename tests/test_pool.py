"""The supervised pool (labqueue.pool) with real worker processes, on its own and behind
`labqueue worker --concurrency N`. Jobs of kind `gated` stay in flight until the test
releases them, so no test depends on how long anything takes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import psutil
import pytest
from cli_helpers import HANDLERS, LogReader, handler_module, labqueue, start, wait_for

from labqueue import InvalidArgument, JobQueue
from labqueue.pool import WorkerPool, exit_reason

pytestmark = pytest.mark.slow


@pytest.fixture
def db(tmp_path):
    return tmp_path / "jobs.db"


@pytest.fixture
def env(tmp_path, monkeypatch):
    environment = handler_module(tmp_path / "app")
    monkeypatch.setenv("PYTHONPATH", environment["PYTHONPATH"])  # for the pool's own workers
    return environment


def gated_jobs(db, folder, n: int) -> None:
    with JobQueue(db) as q:
        for _ in range(n):
            q.enqueue("gated", {"folder": str(folder)})


def running(db) -> int:
    with JobQueue(db) as q:
        return q.counts()["running"]


def children(proc: subprocess.Popen) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(proc.pid).children()}
    except psutil.NoSuchProcess:
        return set()


def workers_of(proc: subprocess.Popen, n: int, without: int | None = None) -> set[int] | None:
    """The pool's worker pids once there are n of them (none of them `without`), else None."""
    found = children(proc)
    return found if len(found) == n and without not in found else None


def test_exit_reason_names_the_code_or_the_signal():
    assert exit_reason(None) == "running"
    assert exit_reason(0) == "exit code 0"
    assert exit_reason(3) == "exit code 3"
    assert exit_reason(-signal.SIGKILL) == "killed by SIGKILL"


def test_a_pool_needs_a_size_and_a_queue(db):
    with pytest.raises(InvalidArgument, match="size must be a whole number"):
        WorkerPool(db, -1)
    with pytest.raises(InvalidArgument, match="needs the queue's path"):
        WorkerPool(None, 1)


def test_the_worker_command_line_carries_no_setting_and_no_location(db):
    pool = WorkerPool(db, 1, lease_seconds=5, idle_exit=1, max_attempts=3, handlers=["m"])
    # the name, lease, idle exit and settings go in LABQUEUE_WORKER_SETTINGS, the location in
    # LABQUEUE_DB (tests/test_settings.py follows them into a worker process)
    assert pool.command_line("w0") == [sys.executable, "-m", "labqueue.worker"]


def test_a_killed_worker_is_replaced_and_counted(db, env):
    JobQueue(db).close()
    pool = WorkerPool(db, 3, lease_seconds=5, idle_exit=None, handlers=[HANDLERS], batch=1)
    try:
        started = pool.fill()
        assert [w.name for w in started] == ["w0", "w1", "w2"] and pool.alive() == 3
        assert pool.kill("w1")
        gone = pool.check()
        assert [(w.name, exit_reason(w.returncode)) for w in gone] == [("w1", "killed by SIGKILL")]
        assert pool.restarts == 1
        assert sorted(pool.processes) == ["w0", "w2", "w3"]
        assert [w.slot for w in pool.workers] == [0, 1, 2]
    finally:
        ended = pool.stop(grace=30)
    assert pool.alive() == 0 and pool.workers == []
    assert sorted(w.name for w in ended) == ["w0", "w2", "w3"]
    # 0 after a warm stop; a worker still starting up, with no job yet, ends by the SIGTERM itself
    assert {w.returncode for w in ended} <= {0, -signal.SIGTERM}


def test_a_clean_exit_is_not_restarted(db, env):
    JobQueue(db).close()
    pool = WorkerPool(db, 2, lease_seconds=5, idle_exit=0, handlers=[HANDLERS])
    pool.fill()
    wait_for(lambda: pool.alive() == 0)
    gone = pool.check()
    assert sorted(w.returncode for w in gone) == [0, 0]
    assert pool.restarts == 0 and pool.workers == []


def test_a_pool_stops_warm_then_hard(db, tmp_path, env):
    gated_jobs(db, tmp_path, 2)
    # one job per worker, so each holds one
    pool = WorkerPool(db, 2, lease_seconds=30, idle_exit=None, handlers=[HANDLERS], batch=1)
    pool.fill()
    wait_for(lambda: running(db) == 2)
    ended = pool.stop(grace=0.2)  # the jobs are not released: the warm stop cannot finish
    assert sorted(exit_reason(w.returncode) for w in ended) == ["killed by SIGKILL"] * 2
    assert pool.alive() == 0


# -- labqueue worker --concurrency N --------------------------------------------------------


def test_sigterm_lets_every_in_flight_job_finish_and_claims_nothing_more(db, tmp_path, env):
    gated_jobs(db, tmp_path, 5)
    proc = start("worker", db, "--concurrency", "3", "--batch", "1", "--handlers", HANDLERS, env=env)
    log = LogReader(proc)
    try:
        wait_for(lambda: running(db) == 3)
        workers = children(proc)
        assert len(workers) == 3
        proc.send_signal(signal.SIGTERM)
        log.wait_for_line("warm stop: asked 3 worker(s)")  # logged once each worker has its SIGTERM
        (tmp_path / "release").touch()  # only now can the three jobs in flight finish
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    with JobQueue(db) as q:
        assert q.counts() == {"queued": 2, "running": 0, "done": 3, "dead": 0, "cancelled": 0}
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in workers)
    assert log.text().count("stopped (warm stop) after 1 job(s)") == 3


def test_a_second_signal_stops_the_pool_at_once(db, tmp_path, env):
    gated_jobs(db, tmp_path, 2)
    proc = start("worker", db, "--concurrency", "2", "--batch", "1", "--handlers", HANDLERS, env=env)
    log = LogReader(proc)
    try:
        wait_for(lambda: running(db) == 2)
        workers = children(proc)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 1  # the jobs were never released, yet it left
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not any(psutil.pid_exists(pid) for pid in workers))
    with JobQueue(db) as q:
        assert q.counts()["running"] == 2 and q.counts()["done"] == 0  # their leases hand them on
    assert "hard stop" in log.text()


def test_a_worker_killed_in_the_pool_is_replaced(db, tmp_path, env):
    JobQueue(db).close()
    proc = start(
        "worker", db, "--concurrency", "2", "--batch", "1", "--handlers", HANDLERS, "--id", "pool", env=env
    )
    log = LogReader(proc)
    try:
        first = wait_for(lambda: workers_of(proc, 2))
        victim = min(first)
        psutil.Process(victim).kill()
        second = wait_for(lambda: workers_of(proc, 2, without=victim))
        assert len(second - first) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    text = log.text()
    assert "crashed (killed by SIGKILL); restarted as pool/2" in text
    assert "all workers stopped (1 restart(s))" in text


def test_every_setting_reaches_each_worker_of_the_pool(db, tmp_path, env):
    with JobQueue(db) as q:
        for n in range(2):
            q.enqueue("settings", {"out": str(tmp_path / f"seen-{n}.json")})
    result = labqueue(
        "worker", db, "--concurrency", "2", "--handlers", HANDLERS, "--idle-exit", "0.3", "--lease", "11",
        "--max-attempts", "7", "--backoff-base", "0.5", "--backoff-cap", "9", "--synchronous", "EXTRA",
        "--log-format", "json", env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = [json.loads((tmp_path / f"seen-{n}.json").read_text()) for n in range(2)]
    assert (
        seen[0]
        == seen[1]
        == {
            "lease_seconds": 11.0,
            "max_attempts": 7,
            "backoff_base": 0.5,
            "backoff_cap": 9.0,
            "synchronous": "EXTRA",
        }
    )
    loggers = {json.loads(line)["logger"] for line in result.stderr.splitlines()}
    assert loggers == {"labqueue.pool", "labqueue.worker"}
