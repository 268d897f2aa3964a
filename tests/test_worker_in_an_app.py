"""The worker in an application, as its developer and its operator meet it: handlers
found from the app's folder, no start without handlers, unknown kinds given back, job
fields on every log line, crashes written on the jobs they cut short, a supervised
single worker with a grace period. Few subprocesses; every wait is bounded."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import LogReader, labqueue, one_line_error, wait_for

from labqueue import JobQueue, NoHandlers, joblog
from labqueue import handlers as registry
from labqueue import worker as worker_loop
from labqueue.joblog import JsonFormatter, TextFormatter
from labqueue.pool import WorkerPool
from labqueue.settings import WorkerSettings

# An application's own package, as `labqueue worker --handlers myapp.jobs` finds it.
APP_JOBS = """
import os
import time
from pathlib import Path

from labqueue import KeepAlive, handler


@handler("noop")
def noop(job, q):
    return None


@handler("crash")
def crash(job, q):
    os._exit(3)  # a worker dying mid-job, as a segfault or the OOM killer would end it


@handler("gated")
def gated(job, q):
    folder = Path(job.payload["folder"])
    (folder / f"started-{job.id}").touch()
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@handler("long")
def long(job, q):
    # Longer than the lease: KeepAlive renews it, so no other worker takes the job over.
    folder = Path(job.payload["folder"])
    with (folder / "runs.txt").open("a") as runs:
        runs.write(f"{job.id} {job.attempts}\\n")
    with KeepAlive(str(q.path), job, lease_seconds=q.lease_seconds):
        time.sleep(job.payload["seconds"])
"""


@pytest.fixture
def app(tmp_path) -> Path:
    """A folder holding myapp/jobs.py, as an application's checkout would."""
    folder = tmp_path / "app"
    (folder / "myapp").mkdir(parents=True)
    (folder / "myapp" / "__init__.py").write_text("")
    (folder / "myapp" / "jobs.py").write_text(textwrap.dedent(APP_JOBS))
    return folder


@pytest.fixture
def clean_registry(monkeypatch):
    """An empty handler registry and the sys.path and modules as they were, after the test."""
    monkeypatch.setattr(registry, "HANDLERS", {})
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("myapp", "myapp.jobs"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in ("myapp", "myapp.jobs"):
        sys.modules.pop(name, None)


# -- handlers from the app's folder; none, no start; unknown kinds given back --------------------


def test_handlers_are_imported_from_the_folder_the_worker_starts_in(app, clean_registry, monkeypatch):
    monkeypatch.chdir(app)
    assert registry.load_for_worker(["myapp.jobs"]) == ["crash", "gated", "long", "noop"]
    assert sys.path[0] == str(app)


def test_no_handlers_is_refused_before_anything_is_claimed(clean_registry, tmp_path):
    with pytest.raises(NoHandlers, match=r"no job handlers are registered .*--handlers myapp\.jobs"):
        registry.load_for_worker([])
    (tmp_path / "empty.py").write_text("")
    with pytest.raises(NoHandlers, match="empty registered none"):
        registry.load_for_worker(["empty"], folder=str(tmp_path))


def test_the_worker_command_refuses_to_start_without_handlers_and_touches_no_job(tmp_path):
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("email", {})
    result = labqueue("worker", db, "--idle-exit", "0")
    line = one_line_error(result, 1)
    assert line.startswith("labqueue worker: error: no job handlers are registered")
    assert result.stderr.count("\n") == 1  # the one line, no usage text
    with JobQueue(db) as q:
        record = q.job(1)
    assert (record.state, record.attempts, record.worker) == ("queued", 0, None)


def test_the_console_script_finds_the_apps_handlers_from_its_folder(app, tmp_path):
    script = Path(sys.executable).parent / "labqueue"
    if not script.exists():
        pytest.skip("the labqueue console script is not installed here (pip install -e .)")
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("noop", {})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(script), "worker", str(db), "--handlers", "myapp.jobs", "--idle-exit", "0"],
        cwd=app, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with JobQueue(db) as q:
        assert q.job(1).state == "done"


def test_a_kind_the_worker_does_not_know_stays_queued_without_losing_an_attempt(tmp_path):
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        for kind in ("mine", "theirs", "mine"):
            q.enqueue(kind, {}, max_attempts=1)
    handled = worker_loop.run(str(db), "w1", 30, idle_exit=0, handlers={"mine": lambda job, q: None})
    assert handled == 2  # it left once idle: the job it gave back is hidden, so it cannot spin on it
    with JobQueue(db) as q:
        theirs = q.job(2)
        assert [r.state for r in q.jobs()] == ["done", "queued", "done"]
    assert (theirs.attempts, theirs.worker) == (0, None)  # max_attempts 1, and still not dead
    assert theirs.last_error.startswith("no handler for kind 'theirs' on worker w1: given back")
    handled = worker_loop.run(str(db), "w2", 30, idle_exit=0, handlers={"theirs": lambda job, q: None})
    assert handled == 0  # not before its delay is over


# -- job fields on every line, stamped when it happened; success at DEBUG or INFO ---------------


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records(monkeypatch):
    collected = Records()
    logger = logging.getLogger("labqueue.worker")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(collected)
    yield collected.records
    logger.removeHandler(collected)
    logger.setLevel(level)


def test_every_job_line_has_the_jobs_fields_and_the_time_it_happened(tmp_path, records, monkeypatch):
    monkeypatch.setattr(joblog, "success_level", logging.INFO)  # --log-success
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("fails", {}, queue="mail", max_attempts=3)
        q.enqueue("works", {}, queue="mail")
    second_began: list[float] = []

    def fails(job, q):
        raise ValueError("no recipient")

    def works(job, q):
        second_began.append(time.time())

    handlers = {"fails": fails, "works": works}
    worker_loop.run(str(db), "w7", 30, idle_exit=0, handlers=handlers, commit_interval=60, batch=2)
    lines = {r.kind: r for r in records if hasattr(r, "job_id")}
    failure, success = lines["fails"], lines["works"]
    assert failure.levelno == logging.WARNING and success.levelno == logging.INFO
    for record, job_id in ((failure, 1), (success, 2)):
        assert (record.job_id, record.queue, record.attempt, record.worker) == (job_id, "mail", 1, "w7")
        assert record.duration_ms >= 0
    entry = json.loads(JsonFormatter().format(failure))
    assert {k: entry[k] for k in ("job_id", "kind", "queue", "attempt", "worker")} == {
        "job_id": 1, "kind": "fails", "queue": "mail", "attempt": 1, "worker": "w7",
    }  # fmt: skip
    # Both were reported in one commit after the second ran; the failure is stamped before it.
    assert entry["time"] <= round(second_began[0], 3)
    text = TextFormatter().format(success)
    assert "job 2 (works) done on attempt 1" in text and "job_id=2 kind=works queue=mail attempt=1" in text


def test_a_success_is_logged_at_debug_unless_asked(tmp_path, records, monkeypatch):
    monkeypatch.setattr(joblog, "success_level", logging.DEBUG)
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("works", {})
    worker_loop.run(str(db), "w1", 30, idle_exit=0, handlers={"works": lambda job, q: None})
    [line] = [r for r in records if getattr(r, "job_id", None) == 1]
    assert line.levelno == logging.DEBUG


def test_log_success_reaches_the_pools_workers():
    import argparse

    parser = argparse.ArgumentParser()
    WorkerSettings.add_options(parser)
    given = WorkerSettings.from_args(parser.parse_args(["--log-success"]))
    assert given.log_success and given.as_json()["log_success"] is True  # what a pool's workers get
    assert not WorkerSettings.from_args(parser.parse_args([])).log_success


# -- crashes written on the jobs; one supervised worker; --grace --------------------------------


def test_a_crashed_worker_is_named_on_the_job_it_held(app, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(app))
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        crash = q.enqueue("crash", {})
    pool = WorkerPool(db, 1, handlers=("myapp.jobs",), note_crashes=True, names="pool/{}".format)
    try:
        pool.fill()
        wait_for(lambda: pool.check() and pool.restarts == 1)
    finally:
        pool.kill_all()
    assert pool.crashed_jobs == {"pool/0": [crash]}
    with JobQueue(db) as q:
        record = q.job(crash)
    assert record.last_error == "worker crashed (exit code 3) while running this job (worker pool/0)"
    assert record.state == "running"  # its lease runs out as before, and another worker takes it


def test_a_single_worker_is_supervised_and_grace_turns_a_warm_stop_hard(app, tmp_path):
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        crash = q.enqueue("crash", {})
        gated = q.enqueue("gated", {"folder": str(tmp_path)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "labqueue", "worker", str(db), "--handlers", "myapp.jobs", "--id", "solo",
         "--batch", "1", "--grace", "0.5"],
        cwd=app, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log = LogReader(proc)
    try:
        log.wait_for_line(f"crashed (exit code 3) while running job(s) {crash}; restarted as solo/1")
        wait_for(lambda: (tmp_path / f"started-{gated}").exists())  # the restarted worker runs it
        proc.send_signal(signal.SIGTERM)  # the job never finishes: --grace ends the wait
        assert proc.wait(timeout=60) == 1
    finally:
        proc.kill()
        proc.wait()
    assert "hard stop" in log.text()
    with JobQueue(db) as q:
        assert q.job(gated).state == "running"  # cut short: its lease hands it on


# -- a handler longer than its lease runs once; a warm stop reaches the whole pool ---------------


def test_a_handler_longer_than_its_lease_runs_once_while_others_wait(app, tmp_path):
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("long", {"folder": str(tmp_path), "seconds": 2.5})
    result = labqueue(
        "worker", db, "--handlers", "myapp.jobs", "--concurrency", "2", "--lease", "1", "--idle-exit", "3.5",
        env={**os.environ, "PYTHONPATH": str(app)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "runs.txt").read_text().splitlines() == ["1 1"]  # one run, on its first attempt
    with JobQueue(db) as q:
        assert q.job(1).state == "done"


def test_sigterm_to_the_pools_whole_process_group_is_a_warm_stop(app, tmp_path):
    """What a terminal's Ctrl-C or `kill -TERM -PGID` does: the signal reaches the
    supervisor's group; each worker gets one SIGTERM and finishes the job it holds."""
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        for _ in range(3):
            q.enqueue("gated", {"folder": str(tmp_path)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "labqueue", "worker", str(db), "--handlers", "myapp.jobs",
         "--concurrency", "2", "--batch", "1"],
        cwd=app, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    log = LogReader(proc)
    try:
        wait_for(lambda: len(list(tmp_path.glob("started-*"))) == 2)
        os.killpg(proc.pid, signal.SIGTERM)
        log.wait_for_line("warm stop: asked 2 worker(s)")
        (tmp_path / "release").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    with JobQueue(db) as q:
        assert q.counts() == {"queued": 1, "running": 0, "done": 2, "dead": 0, "cancelled": 0}
    assert log.text().count("stopped (warm stop) after 1 job(s)") == 2
