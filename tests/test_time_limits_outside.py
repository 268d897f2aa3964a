"""Time limits that hold for any handler: one stuck in C with the GIL held keeps the
worker's own renewal thread from running, so the process is killed from outside, by a
pool's supervisor or a standalone worker's watchdog, once the handler is past its limit
plus KILL_GRACE. The job is failed "timed out" (its effect never commits) and retried,
the processes the handler started are gone, and the slot is replaced. Both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from cli_helpers import install_app, ledgered_location, wait_for

from labqueue import open_queue
from labqueue.pool import WorkerPool
from labqueue.renewal import KILL_GRACE
from labqueue.settings import WorkerSettings

APP = "gil_holding_jobs"
APP_SOURCE = """
import re
import subprocess
from pathlib import Path

from labqueue import handler
from labqueue.demo.handlers import ledger_effect


@handler("regex")
def regex(job, q):
    folder = Path(job.payload["folder"])
    if job.attempts == 1:
        child = subprocess.Popen(["sleep", "300"])  # something the handler started
        (folder / "child.pid").write_text(str(child.pid))
        (folder / "started").touch()
        # catastrophic backtracking: minutes inside the C matcher, the GIL held throughout
        re.match(r"(a+)+$", "a" * 40 + "!")
    return ledger_effect(job)
"""
LIMIT = 1.0


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    yield from ledgered_location(request, tmp_path)


@pytest.fixture
def app(tmp_path, monkeypatch) -> Path:
    return install_app(tmp_path, monkeypatch, APP, APP_SOURCE)


def job_of(location, job_id):
    with open_queue(location) as q:
        return q.job(job_id)


def ledger(location) -> list[tuple[int, int]]:
    with open_queue(location) as q:
        return sorted(tuple(row) for row in q.db.execute("SELECT job_id, attempt FROM ledger").fetchall())


def child_gone(folder: Path) -> bool:
    pid = int((folder / "child.pid").read_text())
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
def test_a_pool_kills_a_worker_whose_handler_holds_the_gil_past_its_limit(location, app, tmp_path):
    with open_queue(location) as q:
        job_id = q.enqueue("regex", {"folder": str(tmp_path)})
    settings = WorkerSettings(handlers=(APP,), backoff_cap=0.2, job_timeout=LIMIT)
    with WorkerPool(
        location, 1, lease_seconds=30, idle_exit=None, settings=settings, note_crashes=True
    ) as pool:
        pool.fill()
        wait_for(lambda: (tmp_path / "started").exists(), timeout=30)
        started = time.monotonic()
        wait_for(lambda: pool.check() is not None and job_of(location, job_id).state == "done", timeout=60)
        took = time.monotonic() - started
        killed = [w for w in pool.ended if w.timed_out is not None]
    job = job_of(location, job_id)
    assert job.attempts == 2 and job.last_error.startswith(f"timed out after {LIMIT:g} s")
    assert "killed" in job.last_error
    assert ledger(location) == [(job_id, 2)]  # the stuck attempt's effect never committed
    assert [w.timed_out for w in killed] == [(job_id, LIMIT)] and pool.restarts >= 1  # slot replaced
    assert child_gone(tmp_path)
    assert took < LIMIT + KILL_GRACE + 20  # within the limit and grace, with room for a slow machine


@pytest.mark.slow
def test_a_standalone_worker_s_watchdog_kills_it_and_records_the_time_out(location, app, tmp_path):
    with open_queue(location) as q:
        job_id = q.enqueue("regex", {"folder": str(tmp_path)})
    env = {**os.environ, "LABQUEUE_DB": location}
    command = [sys.executable, "-m", "labqueue.worker", "--handlers", APP, "--job-timeout", str(LIMIT)]
    command += ["--backoff-cap", "0.2", "--no-idle-exit", "--", "-", "solo", "30"]
    proc = subprocess.Popen(command, env=env, cwd=app, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (tmp_path / "started").exists(), timeout=30)
        watchdogs = [
            p for p in psutil.Process(proc.pid).children() if "labqueue.watchdog" in " ".join(p.cmdline())
        ]
        assert len(watchdogs) == 1
        proc.wait(timeout=LIMIT + KILL_GRACE + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.communicate()[1]
    assert proc.returncode == -9, stderr  # killed from outside: its renewal thread never ran
    job = job_of(location, job_id)
    assert (job.state, job.attempts) == ("queued", 1), stderr
    assert job.last_error.startswith(f"timed out after {LIMIT:g} s") and "killed" in job.last_error
    assert ledger(location) == []
    assert child_gone(tmp_path)
    wait_for(
        lambda: not watchdogs[0].is_running() or watchdogs[0].status() == psutil.STATUS_ZOMBIE, timeout=10
    )
    assert f"job {job_id} ran past its time limit" in stderr


CANCEL_APP = "cancel_aware_jobs"
CANCEL_SOURCE = """
import time
from pathlib import Path

import labqueue
from labqueue import handler


@handler("patient")
def patient(job, q):
    folder = Path(job.payload["folder"])
    (folder / "started").touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if labqueue.cancelled(job):
            (folder / "saw-cancel").write_text(str(time.monotonic()))
            return None
        time.sleep(0.05)
    return None
"""


@pytest.mark.slow
def test_a_real_worker_tells_its_running_handler_that_its_job_was_cancelled(tmp_path, monkeypatch):
    install_app(tmp_path, monkeypatch, CANCEL_APP, CANCEL_SOURCE)
    path = str(tmp_path / "jobs.db")
    lease = 1.5
    with open_queue(path) as q:
        job_id = q.enqueue("patient", {"folder": str(tmp_path)})
    with WorkerPool(path, 1, lease_seconds=lease, idle_exit=None, handlers=[CANCEL_APP]) as pool:
        pool.fill()
        wait_for(lambda: (tmp_path / "started").exists(), timeout=30)
        with open_queue(path) as q:
            assert q.cancel(job_id) == "running"
        cancelled_at = time.monotonic()
        wait_for(lambda: (tmp_path / "saw-cancel").exists(), timeout=30)
        seen = float((tmp_path / "saw-cancel").read_text())
        assert pool.alive() == 1  # a handler that stops when told keeps its worker
    assert job_of(path, job_id).state == "cancelled"
    # the worker learns it at its next renewal: a third of the lease after the first, a sixth in
    assert seen - cancelled_at < lease / 3 + lease / 6 + 5  # (and slack for a loaded machine)
