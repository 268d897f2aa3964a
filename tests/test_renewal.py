"""Running jobs kept alive by their worker, and time limits (labqueue.renewal).

The renewal thread's decisions are driven here by hand (Renewer.check(now), a FakeClock
for the queue) on both backends; then real worker processes: a handler longer than its
lease runs once without KeepAlive, a handler stuck past its time limit is retried by
another worker while the pool drains the rest, a frozen worker's job moves on after one
lease, and a worker that renews keeps its SQLite locks beside a reader. Nothing waits
on a guess: processes are awaited by what they write, and no timing is asserted."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import LEDGER, install_app, ledgered_location, wait_for

import labqueue
from labqueue import handlers as registry
from labqueue import open_queue, renewal
from labqueue.attribution import RunningSlot
from labqueue.core import Finished
from labqueue.environment import worker_defaults
from labqueue.errors import InvalidArgument
from labqueue.pool import WorkerPool, exit_reason
from labqueue.renewal import (
    EXIT_CANCELLED,
    EXIT_TIMED_OUT,
    KILL_GRACE,
    Closed,
    Holding,
    Renewer,
    renewal_queue,
    watch,
)
from labqueue.settings import WorkerSettings
from labqueue.worker import StopFlag, work_batch

LEASE = 30  # TEST_SETTINGS' lease


def never_exit(code: int) -> None:
    raise AssertionError(f"the renewer ended the process with {code}")


def renewer(make_queue, opened: list | None = None, **options) -> Renewer:
    """A Renewer whose own queue is a second one on the test's store (same FakeClock)."""
    opened = [] if opened is None else opened

    def opener():
        opened.append(make_queue())
        return opened[-1]

    options.setdefault("exit", never_exit)
    return Renewer(opener, lease_seconds=LEASE, worker="w1", **options)


def deadlines(q, jobs) -> list[float]:
    return [q.job(job.id).visible_at for job in jobs]


# -- renewing ---------------------------------------------------------------------------------


def test_a_handler_running_a_sixth_of_the_lease_gets_every_lease_the_worker_holds_renewed(make_queue, clock):
    q = make_queue()
    q.enqueue_many("k", [{}] * 3)
    batch = q.claim_batch("w1", 3)
    done, running, waiting = batch
    opened: list = []
    r = renewer(make_queue, opened)
    r.held.running, r.held.pending, r.held.finished = (running, 100.0), [waiting], [Finished(done)]
    held = [done, running]
    claimed_until = deadlines(q, batch)

    clock.advance(4.9)
    r.check(104.9)  # under a sixth of the lease: nothing, not even a connection
    assert not opened and deadlines(q, batch) == claimed_until

    clock.advance(0.1)
    r.check(105.0)
    assert deadlines(q, held) == [clock() + LEASE] * 2  # the running and the unreported
    assert r.renewals == 1 and len(opened) == 1
    # the first renewal gives back the job not started: other workers take it now
    assert (q.job(waiting.id).state, q.job(waiting.id).attempts) == ("queued", 0) and r.held.pending == []

    clock.advance(5)
    r.check(110.0)  # renewed 5 s ago: not again until a third of the lease has passed
    assert deadlines(q, held) == [clock() - 5 + LEASE] * 2

    clock.advance(5)
    r.check(115.0)
    assert deadlines(q, held) == [clock() + LEASE] * 2 and r.renewals == 2

    r.held.running = None  # between handlers, or idle: nothing to renew
    clock.advance(20)
    r.check(135.0)
    assert r.renewals == 2 and len(opened) == 1
    assert {q.job(job.id).state for job in held} == {"running"}


def test_a_new_handler_is_renewed_a_sixth_of_a_lease_after_it_starts_whatever_came_before(make_queue, clock):
    q = make_queue()
    q.enqueue_many("k", [{}] * 2)
    first, second = q.claim_batch("w1", 2)
    r = renewer(make_queue)
    r.held.running = (first, 0.0)
    r.check(6.0)
    assert r.renewals == 1
    r.held.running = (second, 7.0)  # the next handler, one second after that renewal
    clock.advance(13)
    r.check(13.0)
    assert r.renewals == 2 and q.job(second.id).visible_at == clock() + LEASE


def test_renewal_never_extends_a_job_another_worker_took_over(make_queue, clock):
    q = make_queue()
    q.enqueue_many("k", [{}] * 2)
    running, waiting = q.claim_batch("w1", 2)
    clock.advance(LEASE + 1)  # the first worker stalled: both leases ran out
    (taken,) = q.claim("w2", limit=1)
    assert taken.id == running.id
    r = renewer(make_queue)
    r.held.running, r.held.pending = (running, 0.0), [waiting]
    r.check(LEASE + 1.0)
    record = q.job(running.id)
    assert (record.worker, record.lease_token) == ("w2", taken.lease_token)
    assert record.visible_at == taken.lease_expires_at
    # still ours, though its lease ran out (an unkeyed job's late renewal is accepted while
    # nobody took it): renewed, then given back as not started
    assert (q.job(waiting.id).state, q.job(waiting.id).attempts) == ("queued", 0)
    assert not q.complete(running) and q.complete(taken)


def test_a_job_cancelled_while_its_handler_runs_is_not_renewed(make_queue, clock):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    assert q.cancel(job.id) == "running"
    r = renewer(make_queue)
    r.held.running = (job, 0.0)
    r.check(10.0)
    assert q.job(job.id).state == "cancelled" and r.renewals == 1


def test_a_renewal_the_database_refuses_is_tried_again_at_the_next_look(make_queue, clock):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    attempts = []

    def unreachable():
        attempts.append(1)
        raise ConnectionError("no route to host")

    r = Renewer(unreachable, lease_seconds=LEASE, worker="w1", exit=never_exit)
    r.held.running = (job, 0.0)
    r.check(6.0)
    r.check(7.0)
    assert len(attempts) == 2 and r.renewals == 0
    assert q.job(job.id).visible_at == job.lease_expires_at


# -- time limits ------------------------------------------------------------------------------


def test_past_its_time_limit_a_job_is_failed_the_rest_given_back_and_the_process_ended(make_queue, clock):
    q = make_queue()
    q.enqueue_many("k", [{}] * 4)
    done, stuck, waiting, later = q.claim_batch("w1", 4)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, limits={"k": 2.5})
    r.held.running, r.held.pending, r.held.finished = (stuck, 10.0), [waiting, later], [Finished(done)]

    r.check(12.4)
    assert not exits and q.job(stuck.id).state == "running"
    r.check(12.5)
    assert exits == [EXIT_TIMED_OUT] and r.timed_out is stuck
    record = q.job(stuck.id)
    assert (record.state, record.attempts) == ("queued", 1)
    assert record.last_error.startswith("timed out after 2.5 s")
    assert record.visible_at == clock() + q.backoff_delay(1)  # retried after a backoff, like any failure
    assert [(q.job(j.id).state, q.job(j.id).attempts) for j in (waiting, later)] == [("queued", 0)] * 2
    assert q.job(done.id).state == "done"  # finished before the stuck one: reported
    assert q.jobs(state="running") == []  # nothing left for a crash note to claim


def test_a_time_out_on_the_last_attempt_is_dead(make_queue):
    q = make_queue()
    q.enqueue("k", {}, max_attempts=1)
    (job,) = q.claim_batch("w1", 1)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, job_timeout=60)
    r.held.running = (job, 0.0)
    r.check(60.0)
    record = q.job(job.id)
    assert exits == [EXIT_TIMED_OUT]
    assert record.state == "dead" and record.last_error.startswith("timed out after 60 s")


def test_a_kind_s_own_limit_wins_over_the_worker_s(make_queue):
    q = make_queue()
    q.enqueue_many("patient", [{}])
    (job,) = q.claim_batch("w1", 1)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, job_timeout=5, limits={"patient": 100})
    r.held.running = (job, 0.0)
    r.check(50.0)  # past the worker's 5 s, inside the kind's 100 s: renewed, not timed out
    assert not exits and r.renewals == 1
    r.check(100.0)
    assert exits == [EXIT_TIMED_OUT]


def test_a_handler_that_returned_as_its_limit_passed_keeps_its_own_report(make_queue):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, job_timeout=1)
    running = (job, 0.0)
    r.held.running = running
    # The look saw the handler past its limit; then the handler returned and its completion
    # committed before the renewer's fail(): the fence refuses the fail, and nothing ends.
    assert q.complete(job)
    r.held.running = None  # what the loop writes once the handler has returned
    r.time_out(running, 1.0, 1.0)
    assert not exits and r.timed_out is None
    assert q.job(job.id).state == "done"


def test_the_thread_opens_a_connection_of_its_own_on_both_backends():
    assert callable(renewal_queue("jobs.db", 30, {}))
    assert callable(renewal_queue("postgresql://app@db.example/jobs", 30, {}))


def test_without_a_limit_a_handler_runs_as_long_as_it_takes(make_queue):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    r = renewer(make_queue)
    r.held.running = (job, 0.0)
    for now in (6.0, 3600.0, 86400.0):
        r.check(now)
    assert r.renewals == 3 and q.job(job.id).state == "running"


def test_the_thread_sleeps_no_longer_than_the_running_handler_s_limit(make_queue):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    now = [100.0]
    r = renewer(make_queue, limits={"k": 0.25}, monotonic=lambda: now[0])
    assert r.wait() == r.tick == 1.0  # at most a second, whatever the lease
    r.held.running = (job, 100.0)
    assert r.wait() == 0.25
    now[0] = 101.0
    assert r.wait() == 0.0
    assert Renewer(lambda: None, lease_seconds=2, worker="w").tick == pytest.approx(2 / 6)


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", True])
def test_a_bad_limit_is_refused_naming_it(bad):
    with pytest.raises(InvalidArgument, match="job_timeout"):
        Renewer(lambda: None, lease_seconds=30, worker="w", job_timeout=bad)
    with pytest.raises(InvalidArgument, match="timeout"):
        registry.handler("k", timeout=bad)


def test_handler_registers_a_kind_s_time_limit_and_forgets_it_when_registered_again():
    kind = "renewal-test-kind"
    try:
        registry.handler(kind, timeout=90)(lambda job, q: None)
        assert registry.TIMEOUTS[kind] == 90
        registry.handler(kind)(lambda job, q: None)
        assert kind not in registry.TIMEOUTS
    finally:
        registry.HANDLERS.pop(kind, None)
        registry.TIMEOUTS.pop(kind, None)


# -- what the loop publishes ------------------------------------------------------------------


def test_work_batch_publishes_the_running_job_and_the_rest_of_its_batch(q):
    q.enqueue_many("look", [{}] * 3)
    held = Holding()
    seen = []

    def look(job, queue):
        running, _ = held.running
        seen.append((running.id, [j.id for j in held.pending], [f.job.id for f in held.finished]))

    ran, _ = work_batch(
        q,
        q.claim_batch("w", 3),
        {"look": look},
        claim_for=lambda ran: None,
        stop=StopFlag(),
        commit_interval=3600,
        held=held,
    )
    assert ran == 3
    assert seen == [(1, [2, 3], []), (2, [3], [1]), (3, [], [1, 2])]
    assert held.running is None and held.jobs() == []


# -- the option -------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    WorkerSettings.add_options(p)
    return p


def test_job_timeout_is_a_worker_option_passed_on_to_each_worker_process():
    args = parser().parse_args(["--job-timeout", "15m"])
    assert args.job_timeout == 900
    assert WorkerSettings.from_args(args).job_timeout == 900
    assert WorkerSettings.from_args(args).as_json()["job_timeout"] == 900  # what a pool's workers get
    assert parser().parse_args([]).job_timeout is None
    assert WorkerSettings.from_args(parser().parse_args([])).job_timeout is None


@pytest.mark.parametrize("bad", ["0", "-5", "inf", "nan", "soon"])
def test_a_bad_job_timeout_is_refused_naming_the_option_and_the_value(bad):
    with pytest.raises(argparse.ArgumentError, match=f"argument --job-timeout: .*'{bad}'"):
        parser().parse_args([f"--job-timeout={bad}"])


def test_labqueue_job_timeout_stands_in_for_the_option():
    p = parser()
    worker_defaults(p, {"LABQUEUE_JOB_TIMEOUT": "2m"})
    assert p.parse_args([]).job_timeout == 120
    assert p.parse_args(["--job-timeout", "5"]).job_timeout == 5  # the command line wins
    worker_defaults(p, {"LABQUEUE_JOB_TIMEOUT": "never"})
    with pytest.raises(argparse.ArgumentError, match="--job-timeout: LABQUEUE_JOB_TIMEOUT='never'"):
        p.parse_args([])  # read when used (issue 36): a bad one is refused then, by name
    assert p.parse_args(["--job-timeout", "5"]).job_timeout == 5  # and not read when overridden


def test_the_supervisor_names_a_time_out_exit():
    assert exit_reason(EXIT_TIMED_OUT) == f"exit code {EXIT_TIMED_OUT}: a job ran past its time limit"


# -- real worker processes ---------------------------------------------------------------------

APP = "renewal_test_jobs"
APP_SOURCE = """
import time
from pathlib import Path

from labqueue import handler
from labqueue.demo.handlers import ledger_effect


@handler("long")
def long(job, q):
    Path(job.payload["folder"], f"started-{job.id}-{job.attempts}").touch()
    time.sleep(job.payload["seconds"])
    return ledger_effect(job)


@handler("stuck", timeout=2)
def stuck(job, q):
    if job.attempts == 1:
        time.sleep(120)
    return ledger_effect(job)


@handler("plain_stuck")
def plain_stuck(job, q):
    if job.attempts == 1:
        time.sleep(120)
    return ledger_effect(job)


@handler("noop")
def noop(job, q):
    return ledger_effect(job)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def renewing(request, tmp_path):
    """As `location`: both backends, where the worker renews."""
    yield from _location(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    yield from _location(request, tmp_path)


def _location(request, tmp_path):
    """A queue with a ledger, as a file or on a database of its own on the session's server."""
    yield from ledgered_location(request, tmp_path)


@pytest.fixture
def app(tmp_path, monkeypatch) -> Path:
    return install_app(tmp_path, monkeypatch, APP, APP_SOURCE)


def ledger(location) -> list[tuple[int, int]]:
    with open_queue(location) as q:
        return sorted(tuple(row) for row in q.db.execute("SELECT job_id, attempt FROM ledger").fetchall())


def record(location, job_id):
    with open_queue(location) as q:
        return q.job(job_id)


def deadline(path: str, job_id: int) -> float:
    """A job's lease deadline, read on a plain connection (never a second queue here)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT visible_at FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]


def counts(location) -> dict[str, int]:
    with open_queue(location) as q:
        return q.counts()


@pytest.mark.slow
def test_two_workers_with_a_2s_lease_run_a_5s_handler_once_without_keepalive(renewing, app, tmp_path):
    location = renewing
    with open_queue(location) as q:
        job_id = q.enqueue("long", {"seconds": 5, "folder": str(tmp_path)})
    with WorkerPool(location, 2, lease_seconds=2, idle_exit=None, handlers=[APP]) as pool:
        pool.fill()
        wait_for(lambda: counts(location)["done"] == 1, timeout=60)
    assert ledger(location) == [(job_id, 1)]
    assert record(location, job_id).attempts == 1
    assert sorted(p.name for p in tmp_path.glob("started-*")) == [f"started-{job_id}-1"]


@pytest.mark.slow
def test_a_handler_stuck_past_its_time_limit_is_retried_by_another_worker_while_the_pool_drains(
    location, app, tmp_path
):
    with open_queue(location) as q:
        stuck = q.enqueue("stuck", {})
        q.enqueue_many("noop", [{}] * 40)
    settings = WorkerSettings(handlers=(APP,), backoff_cap=0.5, batch=4)
    pool = WorkerPool(location, 2, lease_seconds=3, settings=settings, note_crashes=True)
    with pool:
        pool.fill()
        wait_for(lambda: pool.check() is not None and counts(location)["done"] == 41, timeout=90)
        ended = [w.returncode for w in pool.ended]
    job = record(location, stuck)
    assert (job.state, job.attempts) == ("done", 2)
    assert "time limit" in job.last_error
    assert EXIT_TIMED_OUT in ended and pool.restarts >= 1
    rows = ledger(location)
    assert len(rows) == len({job_id for job_id, _ in rows}) == 41 and (stuck, 2) in rows  # each once
    assert job.last_error.startswith("timed out after 2 s")  # recorded by the worker, not the crash note
    assert all(stuck not in held for held in pool.crashed_jobs.values())
    assert [attempt for _, attempt in rows].count(1) == 40  # the rest of its batch was given back


@pytest.mark.slow
def test_the_worker_s_job_timeout_applies_to_kinds_without_their_own(tmp_path, app):
    path = str(tmp_path / "jobs.db")
    with open_queue(path) as q:
        q.db.execute(LEDGER)
        plain = q.enqueue("plain_stuck", {})
    command = [sys.executable, "-m", "labqueue", "worker", path, "--handlers", APP, "--concurrency", "2"]
    command += ["--job-timeout", "1.5", "--backoff-cap", "0.5", "--idle-exit", "3", "--lease", "3"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    job = record(path, plain)
    assert (job.state, job.attempts) == ("done", 2) and "time limit" in job.last_error
    assert f"job {plain} (plain_stuck) timed out after 1.5 s" in proc.stderr
    assert f"exit code {EXIT_TIMED_OUT}: a job ran past its time limit" in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGSTOP is a POSIX signal")
def test_a_frozen_worker_stops_renewing_and_its_job_moves_on_after_one_lease(location, app, tmp_path):
    with open_queue(location) as q:
        job_id = q.enqueue("long", {"seconds": 3, "folder": str(tmp_path)})
    with WorkerPool(location, 1, lease_seconds=1.5, handlers=[APP], names="frozen{}".format) as frozen:
        frozen.fill()
        wait_for(lambda: (tmp_path / f"started-{job_id}-1").exists())
        os.kill(frozen.workers[0].pid, signal.SIGSTOP)
        try:
            with WorkerPool(location, 1, lease_seconds=1.5, handlers=[APP], names="fresh{}".format) as fresh:
                fresh.fill()
                wait_for(lambda: counts(location)["done"] == 1, timeout=60)
        finally:
            os.kill(frozen.workers[0].pid, signal.SIGCONT)
    job = record(location, job_id)
    assert (job.state, job.attempts, job.worker) == ("done", 2, "fresh0")
    assert ledger(location) == [(job_id, 2)]


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SQLite's POSIX locks")
def test_a_worker_running_a_long_handler_keeps_its_sqlite_locks_beside_a_reader(tmp_path, app):
    """A reader that closes believes it is the last connection if the worker's locks were
    lost (closing any descriptor of the file drops a process's POSIX locks: issue 34), and
    then checkpoints and deletes the write-ahead log under the worker's feet. The renewal
    thread's own connection to the file must keep this passing."""
    path = str(tmp_path / "jobs.db")
    with open_queue(path) as q:
        q.db.execute(LEDGER)
        job_id = q.enqueue("long", {"seconds": 3, "folder": str(tmp_path)})
    with WorkerPool(path, 1, lease_seconds=1.2, handlers=[APP]) as pool:
        pool.fill()
        wait_for(lambda: (tmp_path / f"started-{job_id}-1").exists())
        claimed_until = deadline(path, job_id)
        wait_for(lambda: deadline(path, job_id) > claimed_until)  # the renewal thread's connection wrote
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone() == ("running",)
        reader.close()
        assert Path(path + "-wal").exists(), "the reader found no other connection: the worker lost its locks"
        wait_for(lambda: counts(path)["done"] == 1, timeout=60)
    assert ledger(path) == [(job_id, 1)]


# -- one outcome per job: the loop and the thread agree ---------------------------------------


def test_a_completion_waiting_for_group_commit_wins_over_a_time_out_that_looked_before_it(make_queue):
    """The thread saw the handler past its limit; the handler then returned, its success held
    for the batch's report (not committed yet). The time-out must not fail the job."""
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, job_timeout=1)
    running = (job, 0.0)
    r.held.running = running
    r.held.running, r.held.finished = None, [Finished(job)]  # the loop: the handler returned
    r.time_out(running, 1.0, 1.0)
    assert not exits and r.timed_out is None
    assert q.settle(r.held.finished)[0] == ["done"]  # the report that was waiting lands


def test_after_a_time_out_the_loop_starts_nothing_reports_nothing_and_claims_nothing(make_queue):
    """The handler of the first job runs past its limit; the thread times it out while it
    runs; when the handler returns, the loop must not report it, start the next job of the
    batch, or claim another batch (those would be stranded when the process ends)."""
    q = make_queue()
    q.enqueue_many("k", [{}] * 6)
    batch = q.claim_batch("w1", 3)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, job_timeout=1)
    started = []

    def handler(job, queue):
        started.append(job.id)
        if job.id == batch[0].id:
            running = r.held.running
            r.check(running[1] + 1.0)  # the renewal thread's look, as the handler runs on
        return None

    with pytest.raises(Closed):
        work_batch(
            q,
            batch,
            {"k": handler},
            claim_for=lambda ran: ("w1", 3),
            stop=StopFlag(),
            held=r.held,
        )
    assert exits == [EXIT_TIMED_OUT] and started == [batch[0].id]
    first = q.job(batch[0].id)
    assert first.state == "queued" and first.last_error.startswith("timed out after 1 s")
    assert [(q.job(j.id).state, q.job(j.id).attempts) for j in batch[1:]] == [("queued", 0)] * 2
    assert q.jobs(state="running") == [] and q.counts().get("done", 0) == 0  # nothing claimed or done


def test_the_first_renewal_gives_back_the_batch_and_the_loop_carries_on_with_the_next_claim(make_queue):
    q = make_queue()
    q.enqueue_many("k", [{}] * 3)
    batch = q.claim_batch("w1", 3)
    r = renewer(make_queue)
    ran = []

    def handler(job, queue):
        ran.append(job.id)
        if job.id == batch[0].id:
            r.check(r.held.running[1] + LEASE / 6)  # a long first handler: its first renewal
        return None

    claim = lambda ran: ("w1", 3)  # noqa: E731
    count, nxt = work_batch(q, batch, {"k": handler}, claim_for=claim, stop=StopFlag(), held=r.held)
    assert count == 1 and ran == [batch[0].id]  # the others were given back, not run here...
    assert sorted(job.id for job in nxt) == [job.id for job in batch[1:]]  # ...so the next claim takes them
    assert q.job(batch[0].id).state == "done"


# -- cancellation reaches the handler --------------------------------------------------------


def test_a_cancel_reaches_the_running_handler_at_the_next_renewal(make_queue, request):
    q = make_queue()
    q.enqueue_many("k", [{}] * 2)
    batch = q.claim_batch("w1", 2)
    r = renewer(make_queue)
    watch(r.held)
    request.addfinalizer(renewal._current.clear)  # the next test's process has no worker loop
    seen = []

    def handler(job, queue):
        began = r.held.running[1]
        seen.append(labqueue.cancelled(job))
        assert q.cancel(job.id) == "running"
        seen.append(labqueue.cancelled(job))  # not yet: the worker has not looked
        r.check(began + LEASE / 6)  # its next renewal is refused: cancelled
        seen.append(labqueue.cancelled(job))
        return None

    work_batch(q, batch[:1], {"k": handler}, claim_for=lambda ran: None, stop=StopFlag(), held=r.held)
    assert seen == [False, False, True]
    assert not labqueue.cancelled(batch[1])  # only the cancelled job
    assert q.job(batch[0].id).state == "cancelled"


def test_a_handler_that_ignores_its_cancel_is_stopped_after_the_grace(make_queue):
    q = make_queue()
    q.enqueue_many("k", [{}] * 2)
    running, waiting = q.claim_batch("w1", 2)
    exits: list[int] = []
    r = renewer(make_queue, exit=exits.append, cancel_grace=5.0)
    r.held.running, r.held.pending = (running, 0.0), [waiting]
    q.cancel(running.id)
    r.check(6.0)  # the renewal learns it; the handler can see it from now
    assert running.id in r.held.cancelled and not exits
    r.check(10.9)
    assert not exits
    r.check(11.0)  # 5 s after: the handler ran on, and is stopped
    assert exits == [EXIT_CANCELLED]
    assert q.job(running.id).state == "cancelled"
    assert (q.job(waiting.id).state, q.job(waiting.id).attempts) == ("queued", 0)


def test_cancelled_is_false_outside_a_worker():
    renewal._current.clear()  # as in a process with no worker loop
    job = labqueue.Job(1, "k", {}, 1, 3, "t", 0.0)
    assert labqueue.cancelled(job) is False


# -- the supervisor's own record of a time-out --------------------------------------------------


def test_fail_for_worker_is_fenced_by_the_worker_and_the_running_state(make_queue, clock):
    q = make_queue()
    q.enqueue("k", {})
    (job,) = q.claim_batch("w1", 1)
    assert q.fail_for_worker(job.id, "w2", "timed out") is None  # not w2's
    assert q.fail_for_worker(job.id, "w1", "timed out after 1 s") == "queued"
    record = q.job(job.id)
    assert (record.state, record.attempts, record.last_error) == ("queued", 1, "timed out after 1 s")
    assert q.fail_for_worker(job.id, "w1", "again") is None  # no longer running
    with pytest.raises(InvalidArgument, match="worker"):
        q.fail_for_worker(job.id, "", "x")


def test_the_running_slot_says_when_a_handler_is_overdue():
    slot = RunningSlot()
    try:
        publish = slot.publisher()
        assert slot.overdue() is None
        publish(7, None)  # no limit: never overdue
        assert slot.read() == 7 and slot.overdue(now=1e12) is None
        publish(8, 2.0)
        assert slot.overdue() is None
        assert slot.overdue(now=time.monotonic() + 2.0 + KILL_GRACE + 1) == (8, 2.0)
        publish(None)
        assert slot.read() is None and slot.overdue(now=1e12) is None
    finally:
        slot.close()
