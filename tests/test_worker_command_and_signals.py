"""The worker's command line and its stop signals: a worker id or path cannot smuggle in an
option, and a second stop signal ends a worker waiting for the write lock. (An effect
that would end its transaction: test_effect_transaction.py.)"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from labqueue import InvalidArgument, JobQueue, kill_tree, start_worker
from labqueue.environment import take_worker_start
from labqueue.procs import worker_command, worker_environment
from labqueue.settings import WorkerSettings, WorkerStart

MARKER = "labqueue_smuggled_marker"
HANDLERS = "labqueue_site_handlers"


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A folder on the workers' PYTHONPATH with a marker module (it leaves a file behind
    if anything imports it) and a module of one handler, kind 't', that does nothing."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / f"{MARKER}.py").write_text(
        f"from pathlib import Path\nPath({str(tmp_path / 'imported.txt')!r}).write_text('imported')\n"
    )
    (folder / f"{HANDLERS}.py").write_text(
        "from labqueue import handler\n\n@handler('t')\ndef t(job, q):\n    return None\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return tmp_path / "imported.txt"


def one_job(path: Path, kind: str = "t") -> None:
    with JobQueue(path) as q:
        q.enqueue(kind, {})


def the_row(path: Path) -> sqlite3.Row:
    with JobQueue(path) as q:
        return q.db.execute("SELECT state, worker, last_error FROM jobs WHERE id = 1").fetchone()


# -- options cannot be smuggled in -------------------------------------------------------------


def test_the_command_carries_nothing_and_the_environment_carries_the_rest_as_given(tmp_path):
    assert worker_command() == [sys.executable, "-m", "labqueue.worker"]
    env = worker_environment(tmp_path / "q.db", "--handlers=evil", 30, 0.5, handlers=["m"], poll=0.1)
    start = take_worker_start(env)  # a name that looks like an option is a name
    assert start == WorkerStart("--handlers=evil", 30, 0.5, WorkerSettings(handlers=("m",), poll=0.1))
    assert env["LABQUEUE_DB"] == str(tmp_path / "q.db")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"handlers": ["--poll=0"]}, "handler module"),
        ({"handlers": ["mod\x00ule"]}, "handler module"),
        ({"worker_id": "w\x00"}, "worker_id"),
        ({"worker_id": ""}, "worker_id"),
        ({"lease_seconds": float("nan")}, "lease_seconds"),
        ({"idle_exit": -1}, "idle_exit"),
        ({"poll": 0}, "poll"),
        ({"path": "q\x00.db"}, "path"),
    ],
)
def test_the_command_refuses_what_a_worker_could_misread(tmp_path, kwargs, name):
    args = {"path": tmp_path / "q.db", "worker_id": "w", "lease_seconds": 30, **kwargs}
    with pytest.raises(InvalidArgument, match=name):
        worker_environment(**args)


def test_a_worker_id_that_looks_like_an_option_imports_nothing(tmp_path, site):
    path = tmp_path / "jobs.db"
    one_job(path)
    sneaky = f"--handlers={MARKER}"
    proc = start_worker(path, sneaky, 30, idle_exit=0.2, handlers=("labqueue.lab.demo_handlers",))
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        kill_tree(proc)
    assert not site.exists(), "the worker imported the module its id named"
    row = the_row(path)
    assert (row["state"], row["worker"]) == ("queued", None)  # no handler for 't': given back
    assert row["last_error"].startswith(f"no handler for kind 't' on worker {sneaky}")


def test_a_path_that_begins_with_a_dash_is_a_path(tmp_path, site):
    one_job(tmp_path / "-jobs.db")
    done = subprocess.run(
        worker_command(),
        env=worker_environment("-jobs.db", "-w", 30, 0.2, handlers=[HANDLERS]),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0
    assert tuple(the_row(tmp_path / "-jobs.db"))[:2] == ("done", "-w")


def test_the_worker_module_accepts_a_double_dash_before_its_positionals(tmp_path, site):
    path = tmp_path / "jobs.db"
    one_job(path)
    options = ["--handlers", HANDLERS]
    cmd = [sys.executable, "-m", "labqueue.worker", *options, "--", str(path), "-x", "30", "0.2"]
    assert subprocess.run(cmd, timeout=60).returncode == 0
    assert tuple(the_row(path))[:2] == ("done", "-x")


# -- stop signals while the write lock is held elsewhere -----------------------------------------


@pytest.fixture
def held_lock(tmp_path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A queue with one job, and a connection of the test's holding its write lock."""
    path = tmp_path / "jobs.db"
    one_job(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield path, other
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


def start_blocked_worker(path: Path) -> subprocess.Popen:
    """A worker (30 s busy timeout, the default) that has opened the queue and found the
    job: it is now waiting for the write lock to claim it."""
    proc = start_worker(path, "w1", 30, idle_exit=60, handlers=[HANDLERS])
    deadline = time.monotonic() + 60
    while not any(f.path == str(path) for f in psutil.Process(proc.pid).open_files()):
        assert proc.poll() is None and time.monotonic() < deadline, "the worker never opened the queue"
        time.sleep(0.05)
    time.sleep(1.0)  # from open to the claim is a read and a few statements
    return proc


def test_a_second_stop_signal_ends_a_worker_waiting_for_the_write_lock(held_lock, site):
    path, _ = held_lock
    proc = start_blocked_worker(path)
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert proc.poll() is None  # a warm stop waits for the claim in progress
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 1  # the lock is still held: it did not wait out the busy timeout
    finally:
        kill_tree(proc)
    assert held_lock[1].in_transaction


def test_a_first_stop_signal_while_waiting_lets_the_job_run_then_exits(held_lock, site):
    path, other = held_lock
    proc = start_blocked_worker(path)
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        other.execute("ROLLBACK")  # the lock is free: the claim goes through, the job runs
        assert proc.wait(timeout=60) == 0
    finally:
        kill_tree(proc)
    assert tuple(the_row(path))[:2] == ("done", "w1")
