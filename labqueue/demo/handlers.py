"""The demo handlers: the kinds the notebooks, the chaos run and the benchmark enqueue
(noop, report, poison, credit, slow, email, bad, keyed) and the ledger that counts accepted completions.
The course knows them as labqueue.lab.demo_handlers.

They are not registered anywhere by importing labqueue: a worker gets them only
when it is told to load this module, ``--handlers labqueue.demo.handlers``
(``DEMO_HANDLERS``; the course's ``labqueue.lab.demo_handlers`` works too), which
merges this module's ``HANDLERS`` into its registry.
A real job of kind ``report`` therefore never runs the course's code by accident.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from typing import Any

from ..handlers import Handler
from ..procs import start_worker
from ..queue import Effect, Job, JobQueue
from ..settings import DEFAULT_IDLE_EXIT

# The name a worker is given to load these handlers (`--handlers` on its command line).
DEMO_HANDLERS = __name__

# One row per accepted completion, so a run can count how often each job's effect landed.
LEDGER_TABLE = """
CREATE TABLE IF NOT EXISTS ledger (
    job_id  INTEGER NOT NULL,  -- the job that finished
    attempt INTEGER NOT NULL   -- the attempt whose completion was accepted
)
"""
LEDGER_INSERT = "INSERT INTO ledger (job_id, attempt) VALUES (?, ?)"
LEDGER_INSERT_PG = "INSERT INTO ledger (job_id, attempt) VALUES (%s, %s)"  # psycopg's placeholders


def ledger_effect(job: Job) -> Effect:
    """Record which attempt's result was accepted: one ledger row per finished job. On
    PostgreSQL (a psycopg connection, its search_path the queue's schema) the ledger must
    exist already: whoever sets up the run creates it with LEDGER_TABLE."""
    entry = (job.id, job.attempts)

    def effect(db: sqlite3.Connection) -> None:
        if not isinstance(db, sqlite3.Connection):
            db.execute(LEDGER_INSERT_PG, entry)
            return
        db.execute(LEDGER_TABLE)  # a fresh database has no ledger yet; IF NOT EXISTS makes this cheap
        db.execute(LEDGER_INSERT, entry)

    return effect


def noop(job: Job, q: JobQueue) -> None:
    """Does nothing: the throughput labs measure the queue's own cost."""


def report(job: Job, q: JobQueue) -> None:
    """Builds a "report". With stall_first_attempt, attempt 1 hangs so a lab can kill it."""
    options = job.payload
    hang = job.attempts == 1 and bool(options.get("stall_first_attempt"))
    if hang:  # long enough for the crash lab to kill this process mid-job
        time.sleep(float(options.get("stall_seconds", 60)))
    time.sleep(float(options.get("work_seconds", 0.2)))


def poison(job: Job, q: JobQueue) -> None:
    """Kills its own process at once: no except or finally block runs, nobody calls fail()."""
    os._exit(1)


def credit(job: Job, q: JobQueue) -> Effect:
    """A ledger credit. The first attempt of every 20th job times out once; the retry absorbs it."""
    if job.id % 20 == 0 and job.attempts == 1:
        raise TimeoutError("upstream timed out")
    time.sleep(0.02)
    return ledger_effect(job)


def slow(job: Job, q: JobQueue) -> Effect:
    """Attempt 1 sleeps 2 s, past the chaos run's 0.8 s lease: a free worker may take the
    job over, and then the stale completion must be refused. Later attempts take 0.1 s."""
    time.sleep(0.1 if job.attempts > 1 else 2.0)
    return ledger_effect(job)


def email(job: Job, q: JobQueue) -> Effect:
    """A pretend email: 0.5 s on the mail server, then a ledger row for the email sent. With
    ``{"times_out": true}`` in the payload, the first attempt's call times out instead
    (TimeoutError). Notebook 04 freezes the worker mid-call, past its lease, and thaws it once
    another worker has taken the job over: its report, a success or a failure, is late."""
    time.sleep(0.5)
    if job.attempts == 1 and job.payload.get("times_out"):
        raise TimeoutError("the mail server did not answer")
    return ledger_effect(job)


# One row per accepted run of a `keyed` job: when its handler started and ended, so a
# run can show how many jobs of each concurrency key ran at once (DOUBLE PRECISION: on
# PostgreSQL REAL would round a time in seconds to minutes).
RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    job_id  INTEGER          NOT NULL,
    run_key TEXT             NOT NULL,
    started DOUBLE PRECISION NOT NULL,
    ended   DOUBLE PRECISION NOT NULL
)
"""


def keyed(job: Job, q: JobQueue) -> Effect:
    """Works for ``seconds`` (default 0.01), then records its run (its payload's ``key``,
    when it started and ended) in the table `runs`, in the completing transaction: only
    runs whose completion was accepted are counted. On PostgreSQL create RUNS_TABLE first."""
    started = time.time()
    time.sleep(float(job.payload.get("seconds", 0.01)))
    row = (job.id, str(job.payload.get("key")), started, time.time())

    def effect(db: Any) -> None:
        if isinstance(db, sqlite3.Connection):
            db.execute(RUNS_TABLE)
            db.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", row)
        else:
            db.execute("INSERT INTO runs VALUES (%s, %s, %s, %s)", row)

    return effect


def most_at_once(runs: list[tuple[str, float, float]]) -> dict[str, int]:
    """Per key, the most runs in progress at the same moment, from (key, started, ended)
    rows (a run that ends as another starts is not counted with it)."""
    events: dict[str, list[tuple[float, int]]] = {}
    for key, started, ended in runs:
        events.setdefault(key, []).extend([(started, 1), (ended, -1)])
    most = {}
    for key, moments in events.items():
        now = peak = 0
        for _, step in sorted(moments):  # at equal times -1 sorts first: an end before a start
            now += step
            peak = max(peak, now)
        most[key] = peak
    return most


def bad(job: Job, q: JobQueue) -> None:
    """Always raises: it ends in the dead-letter state after max_attempts."""
    raise ValueError("payload has no recipient")


HANDLERS: dict[str, Handler] = {
    "noop": noop,
    "report": report,
    "poison": poison,
    "credit": credit,
    "slow": slow,
    "email": email,
    "bad": bad,
    "keyed": keyed,
}


def start_demo_worker(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = DEFAULT_IDLE_EXIT,
    **options: Any,
) -> subprocess.Popen:
    """start_worker() for a worker that knows the demo kinds above (and nothing else)."""
    handlers = (DEMO_HANDLERS, *options.pop("handlers", ()))
    return start_worker(path, worker_id, lease_seconds, idle_exit, handlers=handlers, **options)
