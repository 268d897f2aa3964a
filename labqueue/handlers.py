"""The handler registry and the course's demo handlers.

A worker runs the handler registered in code for a job's kind. A row only ever
names a kind to look up here, never a module or function to import: whoever can
write a row must not be able to choose what code runs.

A handler is ``handler(job, queue)``. It may return an effect, a function of the
database connection that the worker passes to ``complete`` so it commits in the
same transaction as the completion.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from .queue import Effect, Job, JobQueue

Handler = Callable[[Job, JobQueue], "Effect | None"]

HANDLERS: dict[str, Handler] = {}

# One row per accepted completion, so a run can count how often each job's effect landed.
LEDGER_TABLE = """
CREATE TABLE IF NOT EXISTS ledger (
    job_id  INTEGER NOT NULL,  -- the job that finished
    attempt INTEGER NOT NULL   -- the attempt whose completion was accepted
)
"""
LEDGER_INSERT = "INSERT INTO ledger (job_id, attempt) VALUES (?, ?)"


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `kind`."""

    def register(fn: Handler) -> Handler:
        HANDLERS[kind] = fn
        return fn

    return register


def load_module(name: str) -> list[str]:
    """Import a module of the caller's own handlers (named by the operator on the
    command line, never by a row). It registers with @handler, or defines a
    HANDLERS dict that is merged in. Returns the kinds it added or replaced."""
    before = dict(HANDLERS)
    module = importlib.import_module(name)
    extra: Any = getattr(module, "HANDLERS", None)
    if isinstance(extra, dict) and extra is not HANDLERS:
        HANDLERS.update(extra)
    return sorted(k for k, fn in HANDLERS.items() if before.get(k) is not fn)


def ledger_effect(job: Job) -> Effect:
    """Record which attempt's result was accepted: one ledger row per finished job."""
    entry = (job.id, job.attempts)

    def effect(db: sqlite3.Connection) -> None:
        db.execute(LEDGER_INSERT, entry)

    return effect


@handler("noop")
def noop(job: Job, q: JobQueue) -> None:
    """Does nothing: the throughput labs measure the queue's own cost."""


@handler("report")
def report(job: Job, q: JobQueue) -> None:
    """Builds a "report". With stall_first_attempt, attempt 1 hangs so a lab can kill it."""
    options = job.payload
    hang = job.attempts == 1 and bool(options.get("stall_first_attempt"))
    if hang:  # long enough for the crash lab to kill this process mid-job
        time.sleep(float(options.get("stall_seconds", 60)))
    time.sleep(float(options.get("work_seconds", 0.2)))


@handler("poison")
def poison(job: Job, q: JobQueue) -> None:
    """Kills its own process at once: no except or finally block runs, nobody calls fail()."""
    os._exit(1)


@handler("credit")
def credit(job: Job, q: JobQueue) -> Effect:
    """A ledger credit. The first attempt of every 20th job times out once; the retry absorbs it."""
    if job.id % 20 == 0 and job.attempts == 1:
        raise TimeoutError("upstream timed out")
    time.sleep(0.02)
    return ledger_effect(job)


@handler("slow")
def slow(job: Job, q: JobQueue) -> Effect:
    """Attempt 1 sleeps 2 s, past the chaos run's 0.8 s lease: a free worker may take the
    job over, and then the stale completion must be refused. Later attempts take 0.1 s."""
    time.sleep(0.1 if job.attempts > 1 else 2.0)
    return ledger_effect(job)


@handler("bad")
def bad(job: Job, q: JobQueue) -> None:
    """Always raises: it ends in the dead-letter state after max_attempts."""
    raise ValueError("payload has no recipient")
