"""One queue, two drivers: the rules hold the same on SQLite and PostgreSQL (tests taking
`q` run on both), and PostgreSQL's own failures (locks, timeouts, read-only sessions,
lost connections, foreign tables) come back as labqueue's errors."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import uuid

import pytest

from labqueue import FakeClock, InvalidArgument, KeepAlive, QueueBusy, cli
from labqueue.core import Finished, Job
from labqueue.errors import CannotOpen, ConnectionLost, ForeignJobsTable
from labqueue.pool import QUICK_CRASHES_FREE, RESTART_CAP, restart_delay
from labqueue.roles import Queue
from labqueue.validate import MAX_KEY_BYTES, MAX_NAME_BYTES


def claimed(q) -> Job:
    q.enqueue("t", {"n": 1})
    (job,) = q.claim("w")
    return job


def busy_error(q) -> Exception:
    """The driver's own error for a lock wait that timed out."""
    if q.__class__.__name__ == "JobQueue":
        return sqlite3.OperationalError("database is locked")
    import psycopg

    return psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")


# -- the rules, once ---------------------------------------------------------------------


def test_both_backends_are_the_one_queue(q):
    assert isinstance(q, Queue)
    own = {name for name in vars(type(q)) if not name.startswith("_")}
    assert own <= {"path", "wake", "url", "schema"}, own  # every other method is the queue's


@pytest.mark.parametrize(
    "call",
    [
        lambda q, job: q.complete(None),
        lambda q, job: q.heartbeat({}),
        lambda q, job: q.fail(1, "boom"),
        lambda q, job: q.extend([job, "job"]),
        lambda q, job: q.release([None]),
        lambda q, job: q.fail(job, "boom", retry="no"),
        lambda q, job: q.fail(job, b"boom"),
        lambda q, job: q.complete(job, effect="not callable"),
        lambda q, job: q.settle([Finished(job={"id": job.id})]),
    ],
    ids=[
        "complete-None",
        "heartbeat-dict",
        "fail-int",
        "extend-str",
        "release-None",
        "retry-str",
        "error-bytes",
        "effect-str",
        "settle-dict",
    ],
)
def test_a_wrong_argument_is_refused_before_anything_changes(q, call):
    job = claimed(q)
    with pytest.raises(InvalidArgument):
        call(q, job)
    record = q.job(job.id)
    assert (record.state, record.attempts, record.lease_token) == ("running", 1, job.lease_token)


def test_names_and_keys_have_the_same_limits_on_both_backends(q):
    longest_kind, longest_key = "k" * MAX_NAME_BYTES, "é" * (MAX_KEY_BYTES // 2)
    job_id = q.enqueue(longest_kind, {}, dedupe_key=longest_key, queue="q" * MAX_NAME_BYTES)
    assert q.job(job_id).dedupe_key == longest_key
    for bad in (
        {"kind": "k" * (MAX_NAME_BYTES + 1)},
        {"dedupe_key": "x" * 10_000},
        {"dedupe_key": "é" * (MAX_KEY_BYTES // 2 + 1)},
        {"queue": "q" * 10_000},
    ):
        args = {"kind": "t", **bad}
        with pytest.raises(InvalidArgument, match="bytes of UTF-8"):
            q.enqueue(args.pop("kind"), {}, **args)
    assert q.counts()["queued"] == 1


def test_a_database_failure_while_settling_is_not_the_jobs_failure(q, monkeypatch):
    job = claimed(q)

    def locked(*args):
        raise busy_error(q)

    with monkeypatch.context() as patch:
        patch.setattr(q._d, "complete", locked)
        patch.setattr(q._d, "complete_many", locked)
        if hasattr(q._d, "settle_in_one_call"):  # PostgreSQL's one-call report
            patch.setattr(q._d, "settle_in_one_call", locked)
        with pytest.raises(QueueBusy):
            q.settle([Finished(job, effect=lambda db: None)])
        with pytest.raises(QueueBusy):
            q.settle([Finished(job)])
    record = q.job(job.id)
    assert (record.state, record.attempts, record.last_error) == ("running", 1, None)
    assert q.settle([Finished(job)])[0] == ["done"]  # the same report, settled once it can be


def test_plain_completions_of_a_batch_are_fenced_one_by_one(q):
    q.enqueue_many("t", [{"n": i} for i in range(4)])
    batch = q.claim_batch("w", 4)
    taken = q.cancel(batch[1].id)  # one of them is no longer ours
    outcomes, _ = q.settle([Finished(job) for job in batch] + [Finished(batch[0])])
    assert taken == "running"
    assert outcomes == ["done", "cancelled", "done", "done", "lost"]  # a second report of job 1 is refused
    assert [r.state for r in q.jobs()] == ["done", "cancelled", "done", "done"]


def test_a_database_failure_inside_an_effect_rolls_the_batch_back_not_the_job(q):
    job = claimed(q)
    error = busy_error(q)

    def effect(db):
        raise error

    with pytest.raises(QueueBusy):
        q.settle([Finished(job, effect=effect)])
    record = q.job(job.id)
    assert (record.state, record.attempts, record.last_error) == ("running", 1, None)


def test_an_archive_purge_archives_every_row_it_removes(q, clock):
    q.enqueue_many("t", [{"n": i} for i in range(30)])
    for job in q.claim("w", limit=29):
        q.complete(job)
    clock.advance(100)
    purged = q.purge(10, archive=True, batch=7)
    removed = {r.id for r in q.jobs()} ^ set(range(1, 31))
    archived = {row[0] for row in q.db.execute("SELECT id FROM jobs_archive").fetchall()}
    assert purged.removed == purged.archived == 29 and removed == archived


# -- PostgreSQL's own failures, as labqueue's errors ----------------------------------------

pg = pytest.importorskip  # (psycopg is imported inside the tests that need it)


@pytest.fixture
def pg_schema(pg_url):
    from labqueue.postgres import drop_schema

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def pgq(pg_url, pg_schema):
    from labqueue.postgres import PgJobQueue

    with PgJobQueue(pg_url, schema=pg_schema, timeout=0.2) as queue:
        yield queue


def other(pg_url):
    import psycopg

    return psycopg.connect(pg_url, autocommit=True)


@pytest.mark.parametrize("url", [123, None, b"postgresql://x", "postgresql://a\x00b@host/db"])
def test_a_url_that_is_not_one_is_refused_by_name(url):
    pytest.importorskip("psycopg")
    from labqueue.postgres import PgJobQueue

    with pytest.raises(InvalidArgument, match="url"):
        PgJobQueue(url)


def test_a_lock_held_past_the_timeout_is_queue_busy_for_reads_and_claims(pg_url, pgq, pg_schema):
    pgq.enqueue("t", {})
    with other(pg_url) as db, db.transaction():
        db.execute(f'LOCK TABLE "{pg_schema}".jobs IN ACCESS EXCLUSIVE MODE')
        for call in (
            pgq.stats,
            pgq.jobs,
            pgq.any_ready,
            pgq.counts,
            lambda: pgq.claim_batch("w", 5),
            lambda: pgq.enqueue("t", {}),
            lambda: pgq.purge(0),
        ):
            with pytest.raises(QueueBusy, match="lock"):
                call()
    assert pgq.counts()["queued"] == 1


def test_a_statement_timeout_is_queue_busy(pg_url, pg_schema):
    from labqueue.postgres import PgJobQueue

    with PgJobQueue(pg_url, schema=pg_schema, timeout=5) as q, other(pg_url) as db:
        q.db.execute("SET statement_timeout = 50")
        with db.transaction():
            db.execute(f'LOCK TABLE "{pg_schema}".jobs IN ACCESS EXCLUSIVE MODE')
            with pytest.raises(QueueBusy, match="statement timeout"):
                q.enqueue("t", {})
            with pytest.raises(QueueBusy):
                q.stats()


def test_a_read_only_session_is_cannot_open_naming_the_database(pgq, pg_schema):
    pgq.db.execute("SET default_transaction_read_only = on")
    with pytest.raises(CannotOpen, match=f"read-only.*|{pg_schema}"):
        pgq.enqueue("t", {})


def test_a_foreign_table_with_labqueues_names_but_other_types_is_left_alone(pg_url, pg_schema):
    from labqueue.drivers.postgres import sql as pg_sql
    from labqueue.postgres import PgJobQueue

    columns = ", ".join(
        f"{name} {'jsonb' if name == 'payload' else kind}{' NOT NULL' if required else ''}"
        for name, (kind, required) in pg_sql.COLUMN_TYPES.items()
    )
    with other(pg_url) as db:
        db.execute(f'CREATE SCHEMA "{pg_schema}"')
        db.execute(f'CREATE TABLE "{pg_schema}".jobs ({columns}, PRIMARY KEY (id), UNIQUE (dedupe_key))')
        with pytest.raises(ForeignJobsTable, match="payload is jsonb"):
            PgJobQueue(pg_url, schema=pg_schema)
        (kind,) = db.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'jobs' AND column_name = 'payload'",
            (pg_schema,),
        ).fetchone()
        assert kind == "jsonb"  # untouched
        assert db.execute(f'SELECT count(*) FROM "{pg_schema}".jobs').fetchone()[0] == 0


def test_a_terminated_session_is_connection_lost_and_reconnect_carries_on(pg_url, pgq, pg_schema):
    from labqueue.postgres import PgJobQueue

    pgq.enqueue("t", {"n": 1})
    assert pgq.listen()
    with other(pg_url) as db:
        db.execute("SELECT pg_terminate_backend(%s)", (pgq.db.info.backend_pid,))
    with pytest.raises(ConnectionLost, match="connection"):
        pgq.stats()
    pgq.reconnect()
    assert pgq.stats()["queued"] == 1
    with PgJobQueue(pg_url, schema=pg_schema) as producer:
        producer.enqueue("t", {"n": 2})
    assert pgq.wait_for_jobs(5.0)  # LISTEN came back with the session


def test_the_effect_reaches_the_applications_tables(pg_url, pgq):
    table = f"app_{uuid.uuid4().hex[:8]}"
    with other(pg_url) as db:
        db.execute(f"CREATE TABLE public.{table} (job BIGINT)")
    try:
        job = claimed(pgq)
        assert pgq.complete(job, effect=lambda db: db.execute(f"INSERT INTO {table} VALUES (%s)", (job.id,)))
        with other(pg_url) as db:
            assert db.execute(f"SELECT job FROM public.{table}").fetchall() == [(job.id,)]
    finally:
        with other(pg_url) as db:
            db.execute(f"DROP TABLE public.{table}")


def test_keepalive_renews_a_postgresql_lease(pg_url, pgq, pg_schema):
    job = claimed(pgq)
    with KeepAlive(pg_url, job, lease_seconds=pgq.lease_seconds, interval=0.02, schema=pg_schema) as hb:
        done = threading.Event()
        for _ in range(500):
            if hb.beats >= 2 or hb.lost.is_set():
                break
            done.wait(0.01)
    assert hb.error is None and not hb.lost.is_set() and hb.beats >= 2
    assert pgq.job(job.id).visible_at > job.lease_expires_at


def test_a_batch_costs_no_read_of_the_servers_clock(pgq, monkeypatch):
    """The claim wrote each deadline as the server's time plus the lease: the worker
    takes its batch clock from that, and the lease check before each job from there."""
    from labqueue import worker

    pgq.enqueue_many("noop", [{} for _ in range(10)])
    batch = pgq.claim_batch("w", 10)
    reads = []
    real = pgq.server_time
    monkeypatch.setattr(pgq, "server_time", lambda: reads.append(1) or real())
    ran, _ = worker.work_batch(
        pgq, batch, {"noop": lambda job, q: None}, claim_for=lambda n: None, stop=worker.StopFlag()
    )
    assert ran == 10 and reads == []
    assert pgq.counts()["done"] == 10


def test_the_batch_clock_starts_at_the_claims_own_time(pgq):
    from labqueue import batch as batches

    pgq.enqueue("noop", {})
    before = pgq.server_time()
    batch = pgq.claim_batch("w", 10)
    after = pgq.server_time()
    ticks = iter([5.0, 5.0, 7.5])
    now = batches._batch_clock(pgq, batch, lambda: next(ticks))
    assert before <= now() <= after  # the server's time at the claim, read from the deadline
    assert now() == pytest.approx(batch[0].lease_expires_at - pgq.lease_seconds + 2.5)


def test_the_command_prints_one_line_for_a_postgresql_error(pg_url, capsys):
    base, _, query = pg_url.partition("?")
    bad = (
        base.rsplit("/", 1)[0] + "/no_such_database_" + uuid.uuid4().hex[:6] + (f"?{query}" if query else "")
    )
    assert cli.main(["stats", bad]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "labqueue stats: error:" in err[0] and "Traceback" not in err[0]


# -- the pool restarts a crash loop with backoff -------------------------------------------


def test_a_crash_loop_is_restarted_with_growing_capped_delays():
    delays = [restart_delay(n, rng=lambda: 1.0) for n in range(1, 20)]
    assert delays[:QUICK_CRASHES_FREE] == [0.0] * QUICK_CRASHES_FREE
    grown = delays[QUICK_CRASHES_FREE:]
    assert all(a <= b for a, b in itertools.pairwise(grown)) and grown[0] > 0 and grown[-1] == RESTART_CAP
    assert restart_delay(QUICK_CRASHES_FREE + 1, rng=lambda: 0.0) == grown[0] / 2  # half of it random


def test_a_pool_delays_the_slot_that_keeps_crashing(tmp_path):
    import sys
    import time

    from labqueue.pool import WorkerPool

    with WorkerPool(None, 1, command=lambda name: [sys.executable, "-c", "raise SystemExit(3)"]) as pool:
        pool.fill()
        deadline = time.monotonic() + 30
        while not pool.restart_at and time.monotonic() < deadline:
            pool.check()
            time.sleep(0.02)
        assert pool.restart_at and pool.quick_crashes[0] == QUICK_CRASHES_FREE + 1
        assert pool.restarts == QUICK_CRASHES_FREE  # the free ones came at once, the next one waits


def test_fake_clock_still_drives_postgresql(pg_url, pg_schema):
    from labqueue.postgres import PgJobQueue

    clock = FakeClock(1000.0)
    with PgJobQueue(pg_url, schema=pg_schema, clock=clock, lease_seconds=10) as q:
        job = claimed(q)
        assert job.lease_expires_at == 1010.0


# -- pausing a named queue -------------------------------------------------------------------


def test_a_paused_queue_is_left_alone_until_it_is_resumed(make_queue):
    q, other_process = make_queue(), make_queue()
    q.enqueue("t", {"n": 1}, queue="mail")
    q.enqueue("t", {"n": 2}, queue="reports")
    q.enqueue("t", {"n": 3})
    assert q.pause("mail", reason="smtp is down") and not q.pause("mail")
    assert set(q.paused()) == {"mail"} and q.paused()["mail"]["reason"] == "smtp is down"
    claimed_ids = [job.id for job in q.claim_batch("w", 10)] + [job.id for job in q.claim_batch("w", 10)]
    assert sorted(claimed_ids) == [2, 3]  # every queue but the paused one
    assert q.claim_batch("w", 10, queues=["mail"]) == [] and not q.any_ready(["mail"])
    assert q.next_due(["mail"]) is None and q.job(1).state == "queued"
    assert other_process.claim_batch("w2", 10, queues=["mail"]) == []  # its first look reads the pauses
    assert q.resume("mail") and not q.resume("mail")
    assert [job.id for job in q.claim_batch("w", 10, queues=["mail"])] == [1]


def test_a_worker_honours_a_pause(make_queue):
    from labqueue import worker

    q = make_queue()
    q.enqueue_many("noop", [{}] * 3, queue="mail")
    q.enqueue_many("noop", [{}] * 2)
    q.pause("mail")
    ran, _ = worker.work_batch(
        q,
        q.claim_batch("w", 10),
        {"noop": lambda job, q: None},
        claim_for=lambda n: ("w", 10, None),
        stop=worker.StopFlag(),
    )
    assert ran == 2 and q.counts()["queued"] == 3 and {r.queue for r in q.jobs(state="queued")} == {"mail"}


def test_the_pause_command_stops_a_worker_process_taking_that_queue(tmp_path, capsys):
    from labqueue import JobQueue, worker

    db = str(tmp_path / "jobs.db")
    with JobQueue(db) as q:
        q.enqueue_many("noop", [{}] * 3, queue="mail")
        q.enqueue_many("noop", [{}] * 2)
    assert cli.main(["pause", db, "--queue", "mail", "--reason", "smtp is down"]) == 0
    assert cli.main(["pause", db, "--queue", "mail"]) == 1  # paused already: said, exit 1
    ran = worker.run(db, "w", 30.0, idle_exit=0, handlers={"noop": lambda job, q: None}, wake=False)
    assert ran == 2
    assert cli.main(["stats", db]) == 0
    assert "paused: mail since" in capsys.readouterr().out
    assert cli.main(["resume", db, "--queue", "mail"]) == 0
    assert worker.run(db, "w", 30.0, idle_exit=0, handlers={"noop": lambda job, q: None}, wake=False) == 3
    assert cli.main(["resume", db, "--queue", "mail"]) == 1


@pytest.mark.parametrize("how", ["claim_batch", "settle"])
def test_a_batch_claim_retires_a_lease_that_ran_out_on_its_last_attempt(make_queue, clock, how):
    """The worker's claim (claim_batch, and settle's claim of the next batch) retires every
    lease that ran out on a last attempt, whether or not other jobs are ready."""
    from labqueue.drivers.sqlite.sql import LAST_ATTEMPT_EXPIRED

    q = make_queue(max_attempts=1)
    stuck = q.enqueue("t", {"n": 0})
    (held,) = q.claim_batch("w1", 1)
    clock.advance(q.lease_seconds + 1)  # its only attempt's lease has run out
    for ready in ([], [{"n": 1}, {"n": 2}]):
        ids = [q.enqueue("t", payload) for payload in ready]
        if how == "claim_batch":
            jobs = q.claim_batch("w2", 10)
        else:
            _, jobs = q.settle([], claim_for="w2", limit=10)
        assert [job.id for job in jobs] == ids
        record = q.job(stuck)
        assert (record.state, record.last_error) == ("dead", LAST_ATTEMPT_EXPIRED)
        assert q.complete(held) is False  # fenced out: it is no longer w1's


def test_settle_completes_a_job_whose_lease_ran_out_and_does_not_claim_it_again(make_queue, clock):
    """settle() completes the batch it ran and claims the next one (on PostgreSQL in one
    statement): a job whose lease ran out while it ran is still ours to complete, and the
    claim must not take it as ready in the same breath."""
    q = make_queue()
    late = q.enqueue("t", {"n": 0})
    (job,) = q.claim_batch("w", 1)
    others = [q.enqueue("t", {"n": n}) for n in (1, 2)]
    clock.advance(q.lease_seconds + 1)  # its lease is over, but nobody took it over
    outcomes, following = q.settle([Finished(job)], claim_for="w", limit=10)
    assert outcomes == ["done"]
    assert q.job(late).state == "done"
    assert [j.id for j in following] == others


def test_settle_reports_a_job_taken_over_as_lost_and_still_claims_the_next_batch(make_queue, clock):
    q = make_queue()
    taken = q.enqueue("t", {"n": 0})
    (job,) = q.claim_batch("w1", 1)
    clock.advance(q.lease_seconds + 1)
    (again,) = q.claim_batch("w2", 1)  # its lease ran out, and w2 has it now
    assert again.id == taken
    fresh = q.enqueue("t", {"n": 1})
    outcomes, following = q.settle([Finished(job)], claim_for="w1", limit=10)
    assert outcomes == ["lost"]
    assert [j.id for j in following] == [fresh]
    assert q.job(taken).state == "running" and q.complete(again)
