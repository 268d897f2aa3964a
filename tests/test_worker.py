"""The worker loop in-process: handler outcomes, the registry, stop flags."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from labqueue import JobQueue
from labqueue import handlers as registry
from labqueue.lab import demo_handlers
from labqueue.lab.demo_handlers import LEDGER_TABLE, ledger_effect
from labqueue.worker import ForcedShutdown, StopFlag, handle, main, run

DEMO = demo_handlers.HANDLERS


def state(q, job_id: int = 1) -> tuple:
    record = q.job(job_id)
    return record.state, record.last_error


def ledger(q) -> list[tuple[int, int]]:
    """(job_id, attempt) of every ledger row."""
    return [tuple(r) for r in q.db.execute("SELECT job_id, attempt FROM ledger ORDER BY job_id")]


def states(q) -> dict[str, int]:
    return {name: n for name, n in q.counts().items() if n}


def claim_one(q, kind, payload=None):
    q.enqueue(kind, payload or {})
    (job,) = q.claim("w")
    return job


# The course's ledger effect (labqueue.lab.demo_handlers) writes SQLite's dialect.
@pytest.mark.sqlite_only
def test_a_handler_that_returns_completes_with_its_effect(q):
    q.db.execute(LEDGER_TABLE)
    job = claim_one(q, "credit")
    assert handle(q, job, {"credit": lambda job, q: ledger_effect(job)}) == "done"
    assert ledger(q) == [(1, 1)]


def test_a_handler_that_raises_fails_with_type_and_message(q):
    job = claim_one(q, "bad")
    assert handle(q, job, DEMO) == "queued"
    assert tuple(state(q)) == ("queued", "ValueError: payload has no recipient")


def test_an_effect_that_raises_fails_the_job_and_writes_nothing(q):
    q.db.execute(LEDGER_TABLE)
    job = claim_one(q, "t")

    def effect(db):
        db.execute("INSERT INTO ledger (job_id, attempt) VALUES (1, 1)")  # no parameter: any dialect
        raise LookupError("no such account")

    assert handle(q, job, {"t": lambda job, q: effect}) == "queued"
    assert tuple(state(q)) == ("queued", "LookupError: no such account")
    assert ledger(q) == []


def test_an_unknown_kind_is_given_back_with_a_clear_reason(q):
    job = claim_one(q, "os.system", {"cmd": "echo hacked"})
    assert handle(q, job, DEMO) == "given back"
    record = q.job(job.id)
    assert (record.state, record.attempts) == ("queued", 0)  # its attempt returned: never dead for it
    assert (
        record.last_error
        == "no handler for kind 'os.system' on worker ?: given back for 10 s, attempt not counted"
    )


def test_a_row_never_names_code_to_import(q, monkeypatch):
    imported = []
    monkeypatch.setattr(registry.importlib, "import_module", lambda name: imported.append(name))
    job = claim_one(q, "labqueue.handlers:poison")
    assert handle(q, job, DEMO) == "given back"
    assert imported == []


def test_a_report_from_a_lost_lease_says_lost(q, clock):
    job = claim_one(q, "noop")
    clock.advance(31)
    q.claim("other")
    assert handle(q, job, DEMO) == "lost"


@pytest.mark.sqlite_only
def test_demo_handlers_behave_as_the_course_describes(q):
    q.db.execute(LEDGER_TABLE)
    for n in range(20):
        q.enqueue("credit", {"n": n})
    outcomes = [handle(q, job, DEMO) for job in q.claim("w", limit=20)]
    assert outcomes == ["done"] * 19 + ["queued"]  # job 20 times out on its first attempt
    assert tuple(state(q, 20)) == ("queued", "TimeoutError: upstream timed out")
    assert set(DEMO) == {"noop", "report", "poison", "credit", "slow", "email", "bad", "keyed"}


def test_run_drains_the_queue_and_leaves_when_idle(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "drain.db"
    with JobQueue(path) as q:
        q.enqueue_many("noop", [{}] * 5)
    naps = []
    assert run(str(path), "w", 30, idle_exit=0, sleep=naps.append, handlers=DEMO) == 5
    with JobQueue(path) as q:
        assert states(q) == {"done": 5}


def test_run_stops_after_max_jobs_or_a_stop_request(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "stop.db"
    with JobQueue(path) as q:
        q.enqueue_many("noop", [{}] * 5)
    assert run(str(path), "w", 30, idle_exit=0, max_jobs=2, handlers=DEMO) == 2
    stop = StopFlag()
    stop.requested = True
    assert run(str(path), "w", 30, idle_exit=0, stop=stop) == 0


def test_the_second_stop_signal_forces_the_exit():
    stop = StopFlag()
    stop(signal.SIGTERM, None)
    assert stop.requested
    with pytest.raises(ForcedShutdown):
        stop(signal.SIGINT, None)
    assert not issubclass(ForcedShutdown, Exception)  # `except Exception` cannot swallow it


def test_handler_modules_are_loaded_by_name(tmp_path, monkeypatch):
    (tmp_path / "my_handlers.py").write_text(
        textwrap.dedent(
            """
            def shout(job, q):
                return None

            HANDLERS = {"shout": shout}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "HANDLERS", dict(registry.HANDLERS))
    assert registry.load_module("my_handlers") == ["shout"]
    assert "shout" in registry.HANDLERS
    sys.modules.pop("my_handlers", None)


def test_cli_refuses_a_bad_lease(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["x.db", "w", "0"])
    assert exit_info.value.code == 2
    assert "LEASE_SECONDS must be more than zero, got 0.0" in capsys.readouterr().err


@pytest.mark.sqlite_only
def test_the_ledger_effect_creates_its_table_on_a_fresh_database(q):
    job = claim_one(q, "credit")
    assert handle(q, job, {"credit": lambda job, q: ledger_effect(job)}) == "done"
    assert ledger(q) == [(1, 1)]


# -- a worker that starts while its database server is down -----------------------------------


def test_a_worker_starting_while_its_server_is_unreachable_waits_and_retries(tmp_path, monkeypatch):
    """As a running worker reconnects after a lost connection: the open is retried with
    backoff, within reconnect_limit, and the worker then works as usual."""
    from labqueue import ServerUnreachable
    from labqueue import worker as worker_module

    path = str(tmp_path / "jobs.db")
    with JobQueue(path) as q:
        q.enqueue("noop", {})
    tries = []
    real_open = worker_module.open_queue

    def flaky_open(location, **settings):
        tries.append(location)
        if len(tries) < 3:
            raise ServerUnreachable("cannot connect to the server (it is starting)")
        return real_open(location, **settings)

    monkeypatch.setattr(worker_module, "open_queue", flaky_open)
    handled = worker_module.run(path, "w", 30, 0, handlers={"noop": lambda job, q: None}, reconnect_limit=5)
    assert handled == 1 and len(tries) == 3


def test_a_worker_whose_server_never_comes_up_gives_up_after_its_reconnect_limit(tmp_path):
    env = {**os.environ, "LABQUEUE_DB": "postgresql://app:hunter2@127.0.0.1:1/jobs"}
    command = [sys.executable, "-m", "labqueue.worker", "--handlers", "labqueue.demo.handlers"]
    command += ["--reconnect-limit", "2", "--", "-", "w", "5"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 1
    assert "reconnecting with backoff (at most 2 attempt(s))" in proc.stderr
    assert "hunter2" not in proc.stderr
