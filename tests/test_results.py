"""Results: what a handler returned and how each attempt ended, kept with the job under its
fence (issue 53). Each promise on both backends (make_queue), on the fake clock where time
matters, and one with real worker processes, one of them frozen past its lease."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import install_app, wait_for

import labqueue
from labqueue import (
    NoResult,
    Result,
    ResultNotSerializable,
    WaitTimedOut,
    core,
    open_queue,
)
from labqueue.core import MAX_RESULT_CHARS, MAX_TRACEBACK_CHARS, Finished, exception_details
from labqueue.drivers.sqlite import sql as sqlite_sql
from labqueue.migrate import migrate
from labqueue.pool import WorkerPool
from labqueue.worker import StopFlag, run_handler, work_batch


def run_one(q, worker: str, handlers: dict) -> tuple[int, list]:
    """Claim a batch for `worker` and work it as the worker loop does (run, then settle)."""
    batch = q.claim_batch(worker, 10)
    return work_batch(q, batch, handlers, claim_for=lambda ran: None, stop=StopFlag(), worker=worker)


# -- the return value ----------------------------------------------------------------------


def test_a_handler_s_return_value_reads_back_after_the_job_is_done(make_queue):
    q = make_queue()
    job_id = q.enqueue("render", {"invoice": 42})
    assert q.result(job_id).status == "queued"
    with pytest.raises(NoResult, match=f"job {job_id} is queued"):
        _ = q.result(job_id).return_value
    run_one(q, "w1", {"render": lambda job, q: {"file": f"invoice-{job.payload['invoice']}.pdf"}})
    result = q.result(job_id)
    assert (result.status, result.finished) == ("done", True)
    assert result.return_value == {"file": "invoice-42.pdf"}
    assert json.loads(q.job(job_id).result) == {"file": "invoice-42.pdf"}


def test_returned_none_is_a_result_and_no_result_yet_is_not(make_queue):
    q = make_queue()
    first, second = q.enqueue("k", 1), q.enqueue("k", 2)
    run_one(q, "w1", {"k": lambda job, q: None if job.payload == 1 else 0})
    assert q.result(first).return_value is None
    assert q.result(second).return_value == 0
    pending = q.enqueue("k", 3)
    with pytest.raises(NoResult):
        _ = q.result(pending).return_value
    q.cancel(pending)
    with pytest.raises(NoResult, match="cancelled"):
        _ = q.result(pending).return_value


def test_a_callable_is_still_the_effect_and_result_carries_both(make_queue):
    q = make_queue()
    q.db.execute("CREATE TABLE invoices (id INTEGER)")
    if hasattr(q.db, "commit") and not isinstance(q.db, sqlite3.Connection):
        q.db.commit()
    plain, both = q.enqueue("effect_only", {}), q.enqueue("both", {})

    def write(n):
        return lambda db: db.execute("INSERT INTO invoices (id) VALUES (%s)" % n)  # noqa: UP031 (a constant)

    run_one(
        q,
        "w1",
        {"effect_only": lambda job, q: write(1), "both": lambda job, q: Result("two", effect=write(2))},
    )
    assert sorted(row[0] for row in q.db.execute("SELECT id FROM invoices").fetchall()) == [1, 2]
    assert q.result(plain).return_value is None
    assert q.result(both).return_value == "two"


def test_a_value_json_cannot_keep_fails_the_attempt_with_a_clear_error(make_queue):
    q = make_queue(max_attempts=1)
    odd, big = q.enqueue("odd", {}), q.enqueue("big", {})
    run_one(q, "w1", {"odd": lambda job, q: {1, 2}, "big": lambda job, q: "x" * MAX_RESULT_CHARS})
    for job_id, words in ((odd, "return value is not JSON-serialisable"), (big, "MAX_RESULT_CHARS")):
        result = q.result(job_id)
        assert result.status == "dead"
        (error,) = result.errors
        assert error.exception_class_path == "labqueue.errors.ResultNotSerializable"
        assert words in error.message
    with pytest.raises(ResultNotSerializable):
        core.result_json(float("nan"))


def test_complete_takes_a_result_and_checks_it(make_queue):
    q = make_queue()
    job_id = q.enqueue("k", {})
    (job,) = q.claim("w1")
    with pytest.raises(ResultNotSerializable):
        q.complete(job, result=object())
    assert q.complete(job, result=[1, "two"])
    assert q.result(job_id).return_value == [1, "two"]


# -- the fence: a stale worker's value never lands -------------------------------------------


def test_a_frozen_worker_past_its_lease_never_stores_its_value(make_queue, clock):
    q = make_queue()
    job_id = q.enqueue("k", {})
    (stale,) = q.claim_batch("frozen", 10)
    late = run_handler(q, stale, {"k": lambda job, q: "from the frozen worker"})  # ran, then froze
    clock.advance(31)  # past the 30 s lease: another worker takes the job over
    (fresh,) = q.claim_batch("fresh", 10)
    assert q.settle([late])[0] == ["lost"]
    assert q.result(job_id).status == "running"  # the stale value did not land, nor finish the job
    assert q.job(job_id).result is None
    q.settle([run_handler(q, fresh, {"k": lambda job, q: "from the fresh worker"})])
    assert q.settle([late])[0] == ["lost"]  # again, after the job is done
    result = q.result(job_id)
    assert result.return_value == "from the fresh worker"
    assert [(a.attempt, a.worker, a.outcome) for a in result.attempt_log] == [
        (1, "frozen", "lease lost"),
        (2, "fresh", "done"),
    ]
    assert result.attempt_log[0].finished_at == 1030.0  # when its lease ran out


def test_a_refused_report_writes_no_attempt(make_queue, clock):
    q = make_queue()
    job_id = q.enqueue("k", {})
    (stale,) = q.claim("w1")
    clock.advance(31)
    (fresh,) = q.claim("w2")
    assert q.fail(stale, "late failure") is None
    q.cancel(job_id)
    assert q.fail(fresh, "after the cancel") is None
    log = q.result(job_id).attempt_log
    assert [(a.attempt, a.worker, a.outcome) for a in log] == [
        (1, "w1", "lease lost"),
        (2, "w2", "cancelled"),
    ]
    assert all(a.message is None for a in log)


APP = "results_test_jobs"
APP_SOURCE = """
import os
import time
from pathlib import Path

from labqueue import handler


@handler("answer")
def answer(job, q):
    Path(job.payload["folder"], f"started-{job.id}-{job.attempts}").touch()
    time.sleep(job.payload["seconds"])
    return {"pid": os.getpid(), "attempt": job.attempts}
"""


@pytest.fixture
def app(tmp_path, monkeypatch) -> Path:
    return install_app(tmp_path, monkeypatch, APP, APP_SOURCE)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGSTOP is a POSIX signal")
def test_a_frozen_worker_process_s_value_never_lands(tmp_path, app):
    location = str(tmp_path / "jobs.db")
    with open_queue(location) as q:
        job_id = q.enqueue("answer", {"seconds": 2, "folder": str(tmp_path)})
    with WorkerPool(location, 1, lease_seconds=1.5, handlers=[APP], names="frozen{}".format) as frozen:
        frozen.fill()
        wait_for(lambda: (tmp_path / f"started-{job_id}-1").exists())
        frozen_pid = frozen.workers[0].pid
        os.kill(frozen_pid, signal.SIGSTOP)
        try:
            with WorkerPool(location, 1, lease_seconds=1.5, handlers=[APP], names="fresh{}".format) as fresh:
                fresh.fill()
                with open_queue(location) as q:
                    wait_for(lambda: q.result(job_id).status == "done", timeout=60)
                    fresh_pid = fresh.workers[0].pid
        finally:
            os.kill(frozen_pid, signal.SIGCONT)  # its handler returns and its report is refused
        time.sleep(1.0)
    with open_queue(location) as q:
        result = q.result(job_id)
    assert result.return_value == {"pid": fresh_pid, "attempt": 2}
    assert [(a.attempt, a.worker, a.outcome) for a in result.attempt_log] == [
        (1, "frozen0", "lease lost"),
        (2, "fresh0", "done"),
    ]


# -- each attempt kept -------------------------------------------------------------------------


def flaky(job, q):
    if job.attempts < 3:
        raise ValueError(f"not yet (attempt {job.attempts})")
    return {"made it on": job.attempts}


def test_a_job_that_failed_twice_then_succeeded_shows_three_attempts(make_queue, clock):
    q = make_queue()
    job_id = q.enqueue("flaky", {})
    for n, worker in enumerate(("w1", "w2", "w3"), start=1):
        clock.advance(10)  # past the last backoff (at most 4 s here)
        run_one(q, worker, {"flaky": flaky})
        assert q.result(job_id).attempts == n
    result = q.result(job_id)
    assert result.return_value == {"made it on": 3}
    assert result.worker_ids == ["w1", "w2", "w3"]
    log = result.attempt_log
    assert [(a.attempt, a.worker, a.outcome) for a in log] == [
        (1, "w1", "failed"),
        (2, "w2", "failed"),
        (3, "w3", "done"),
    ]
    assert [a.started_at for a in log] == [1010.0, 1020.0, 1030.0]
    assert [a.finished_at for a in log] == [1010.0, 1020.0, 1030.0]
    assert result.errors == log[:2]
    for attempt in log[:2]:
        assert attempt.exception_class_path == "ValueError"
        assert attempt.message == f"not yet (attempt {attempt.attempt})"
        assert "in flaky" in attempt.traceback and attempt.traceback.rstrip().endswith(attempt.message)
    assert log[2].traceback is None
    assert (result.enqueued_at, result.started_at, result.last_attempted_at) == (1000.0, 1010.0, 1030.0)


def test_a_time_out_a_crash_note_a_give_back_and_a_cancel_each_end_an_attempt(make_queue, clock):
    q = make_queue()
    job_id = q.enqueue("k", {})
    (job,) = q.claim("w1")
    assert q.fail(job, "timed out after 5 s", timed_out=True) == "queued"
    clock.advance(10)
    (job,) = q.claim("w2")
    assert q.note_crash("w2", "worker crashed (signal SIGKILL) while running this job") == [job_id]
    clock.advance(31)
    (job,) = q.claim("w3")  # the crash was noted: this claim does not log that attempt twice
    assert q.release([job]) == 1
    (job,) = q.claim("w4")
    q.cancel(job_id)
    log = q.result(job_id).attempt_log
    assert [(a.attempt, a.worker, a.outcome) for a in log] == [
        (1, "w1", "timed out"),
        (2, "w2", "lease lost"),
        (3, "w3", "given back"),
        (3, "w4", "cancelled"),
    ]
    assert log[1].message == "worker crashed (signal SIGKILL) while running this job"
    assert q.result(job_id).attempts == 3  # a given-back attempt is not counted


def test_a_kind_given_back_for_another_worker_is_no_attempt(make_queue):
    q = make_queue()
    job_id = q.enqueue("unknown", {})
    for _ in range(3):
        (job,) = q.claim("w1")
        assert q.put_back([job], 0, "no handler for kind 'unknown' on worker w1") == 1
    assert q.result(job_id).attempt_log == []  # it waits for a worker that knows its kind, log unchanged


def test_a_lease_that_ran_out_on_the_last_attempt_is_logged_when_retired(make_queue, clock):
    q = make_queue(max_attempts=1)
    job_id = q.enqueue("k", {})
    q.claim_batch("w1", 10)
    clock.advance(31)
    assert q.claim_batch("w2", 10) == []
    result = q.result(job_id)
    assert result.status == "dead"
    assert [(a.attempt, a.worker, a.outcome) for a in result.attempt_log] == [(1, "w1", "lease lost")]


def test_tracebacks_are_bounded_and_passwords_redacted():
    url = "postgresql://app:s3cret-pw@db.example/jobs"

    def deep(n):
        if n == 0:
            raise RuntimeError(f"cannot reach {url}")
        deep(n - 1)

    try:
        deep(200)
    except RuntimeError as exc:
        kind, message, trace = exception_details(exc, "RuntimeError: ...", url)
    assert kind == "RuntimeError"
    assert "s3cret-pw" not in message and "s3cret-pw" not in trace
    assert "db.example" in message
    assert len(trace) <= MAX_TRACEBACK_CHARS + 4 and trace.rstrip().endswith(message)


# -- waiting for a job -------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_producer_s_wait_is_woken_by_the_worker_s_settle(make_queue, monkeypatch, tmp_path):
    q = make_queue(clock=time.time)
    # A hint must end the wait: the poll alone would take a minute.
    monkeypatch.setattr(core, "RESULT_POLL", 60.0)
    monkeypatch.setattr("labqueue.drivers.sqlite.driver.RESULT_POLL", 60.0)
    job_id = q.enqueue("k", {})
    settled_at: list[float] = []

    def worker() -> None:
        with labqueue.JobQueue(tmp_path / "jobs.db") as worker_q:  # a worker's own connection
            time.sleep(0.3)
            run_one(worker_q, "w1", {"k": lambda job, q: "ready"})
            settled_at.append(time.monotonic())

    thread = threading.Thread(target=worker)
    thread.start()
    result = q.wait(job_id, timeout=30)
    woken_at = time.monotonic()
    thread.join()
    assert result.return_value == "ready"
    assert woken_at - settled_at[0] < 5.0, "woken by the poll, not by the worker's hint"


def test_a_wait_that_runs_out_raises_and_one_for_a_finished_job_returns_at_once(make_queue, monkeypatch):
    monkeypatch.setattr("labqueue.drivers.postgres.driver.RESULT_POLL", 0.05, raising=False)
    q = make_queue()
    job_id = q.enqueue("k", {})
    with pytest.raises(WaitTimedOut, match=f"job {job_id} is still queued after 0.2 s"):
        q.wait(job_id, timeout=0.2)
    run_one(q, "w1", {"k": lambda job, q: 7})
    assert q.wait(job_id, timeout=0).return_value == 7
    with pytest.raises(labqueue.JobNotFound):
        q.wait(job_id + 1, timeout=0)


# -- with the job: purge, archive, schema ------------------------------------------------------


def test_results_and_attempts_go_with_their_job_when_purged_and_archived(make_queue, clock):
    q = make_queue()
    job_id = q.enqueue("flaky", {})
    for worker in ("w1", "w2", "w3"):
        clock.advance(10)
        run_one(q, worker, {"flaky": flaky})
    q.enqueue("later", {})  # a purge keeps the newest row
    clock.advance(100)
    assert q.purge(50, archive=True).archived == 1
    assert q.job(job_id) is None
    row = q.db.execute(
        "SELECT worker, started_at, result, attempt_log FROM jobs_archive WHERE id = %s" % int(job_id)  # noqa: UP031 (an integer)
    ).fetchone()
    worker, started_at, result, attempt_log = row
    assert (worker, started_at, json.loads(result)) == ("w3", 1030.0, {"made it on": 3})
    assert [entry["outcome"] for entry in json.loads(attempt_log)] == ["failed", "failed"]


def test_a_version_5_file_gains_the_columns_and_its_done_jobs_read_back(tmp_path):
    path = tmp_path / "jobs.db"
    db = sqlite3.connect(path, isolation_level=None)
    for step in sqlite_sql.MIGRATIONS[:5]:
        from labqueue.drivers.sqlite.schema import run_migration

        run_migration(db, step)
    db.execute("PRAGMA user_version = 5")
    db.execute(
        "INSERT INTO jobs (kind, payload, state, attempts, visible_at, worker, created_at, finished_at)"
        " VALUES ('k', '{}', 'done', 1, 0, 'old', 0, 1)"
    )
    db.close()
    with pytest.raises(labqueue.SchemaTooOld):  # opening never migrates: labqueue migrate does
        labqueue.JobQueue(path, wake=False)
    assert [v for v, _, _ in migrate(path).steps] == [6]
    with labqueue.JobQueue(path, wake=False) as q:
        assert q.db.execute("PRAGMA user_version").fetchone()[0] == sqlite_sql.SCHEMA_VERSION
        result = q.result(1)  # done by a worker from before results: it returned None
    assert result.return_value is None
    assert [(a.attempt, a.worker, a.outcome, a.started_at) for a in result.attempt_log] == [
        (1, "old", "done", None)
    ]


def test_the_one_call_settle_and_the_transaction_path_store_the_same(make_queue):
    """On PostgreSQL a batch of completions, with values or without, is one call of the
    settle function; a batch with an effect in it takes the transaction path. Both store
    the same values (SQLite has the transaction path only)."""
    q = make_queue()
    ids = [q.enqueue("k", n) for n in range(8)]
    first = q.claim_batch("w1", 4)
    second = q.claim_batch("w1", 4)

    def reports(batch, effect=None):
        made = [Finished(job, result=None if job.payload % 2 else json.dumps(job.payload)) for job in batch]
        made[-1].effect = effect
        return made

    one_call, called = getattr(q._d, "settle_in_one_call", None), []
    if one_call is not None:  # PostgreSQL: see which reports the function was given
        q._d.settle_in_one_call = lambda *args: called.append(args) or one_call(*args)
    assert q.settle(reports(first))[0] == ["done"] * 4
    assert q.settle(reports(second, effect=lambda db: None))[0] == ["done"] * 4
    assert [q.result(i).return_value for i in ids] == [0, None, 2, None, 4, None, 6, None]
    if one_call is not None:
        ((plain, _, _, valued),) = called  # one call, for the first batch only
        assert [job_id for job_id, _ in plain] == ids[1:4:2]
        assert [(job_id, value) for job_id, _, value in valued] == [(ids[0], "0"), (ids[2], "2")]


# -- reading them: labqueue job, its JSON, the dashboard's job page -----------------------------


def test_labqueue_job_shows_the_value_and_every_attempt_and_its_json_carries_them(tmp_path, clock):
    from cli_helpers import labqueue as run_labqueue

    path = tmp_path / "jobs.db"
    with labqueue.JobQueue(path, clock=clock, lease_seconds=30, backoff_cap=4.0, wake=False) as q:
        job_id = q.enqueue("flaky", {})
        for worker in ("w1", "w2", "w3"):
            clock.advance(10)
            run_one(q, worker, {"flaky": flaky})
    shown = run_labqueue("job", path, str(job_id))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert '"made it on": 3' in text  # the result, indented JSON
    assert "attempt log:" in text and text.count("failed, worker w") == 2
    assert "#3 done, worker w3, 1970-01-01 00:17:10 to 1970-01-01 00:17:10 UTC" in text
    assert "ValueError: not yet (attempt 2)" in text and "    | Traceback (most recent call last):" in text
    as_json = json.loads(run_labqueue("job", path, str(job_id), "--json").stdout)
    assert as_json["result"] == {"made it on": 3}
    assert [(a["attempt"], a["worker"], a["outcome"]) for a in as_json["attempt_log"]] == [
        (1, "w1", "failed"),
        (2, "w2", "failed"),
        (3, "w3", "done"),
    ]
    assert as_json["attempt_log"][0]["exception_class_path"] == "ValueError"


def test_the_dashboard_s_job_page_shows_the_value_and_the_attempts(make_queue, clock):
    from labqueue.dashboard.server import Dashboard

    q = make_queue()
    job_id = q.enqueue("flaky", {})
    for worker in ("w1", "w2", "w3"):
        clock.advance(10)
        run_one(q, worker, {"flaky": flaky})
    dash = Dashboard(make_queue, where="test queue")
    response = dash.respond("GET", f"/jobs/{job_id}", {})
    page = response.body.decode()
    assert response.status == 200
    assert "Result and attempts" in page and "&quot;made it on&quot;: 3" in page
    assert "#1 failed, worker w1" in page and "#3 done, worker w3" in page


def test_the_finished_hint_reaches_a_waiter_and_costs_nothing_while_nobody_waits(tmp_path):
    from labqueue import wakeup

    db = tmp_path / "jobs.db"
    folder = wakeup.wake_folder(db, wakeup.FINISHED_SUFFIX)
    hints = wakeup.FolderHints(folder)
    assert hints.notify() == 0 and not folder.exists()  # a hint never creates the folder
    with wakeup.Waiter(db, suffix=wakeup.FINISHED_SUFFIX) as waiter:
        assert waiter.active and waiter.path.parent == folder
        assert hints.notify() == 1
        assert waiter.wait(5.0)
    assert hints.notify() == 0  # the waiter's socket went with it
    with wakeup.Waiter(db, suffix=wakeup.FINISHED_SUFFIX) as again:
        assert hints.notify() == 1 and again.wait(5.0)  # a new waiter is found again
