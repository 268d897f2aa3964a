"""Reading the queue for people: stats through the partial indexes, jobs back by filter
and page, a job's result and the wait for it, throughput for a chart, snapshot reads."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from .. import validate
from ..core import (
    MAX_THROUGHPUT_STEPS,
    JobFilter,
    JobRecord,
)
from ..errors import (
    InvalidArgument,
    JobNotFound,
    WaitTimedOut,
)
from ..results import JobResult, job_result
from ..validate import STATES
from .base import QueueBase, Transaction


class Reading(QueueBase):
    """stats, queue_stats, job, jobs, latest_jobs, result, wait, counts, throughput, ... ."""

    def stats(self) -> dict[str, float | int]:
        """What to watch, read through the partial indexes only: finished rows are
        never scanned, however many there are."""
        queued, running, ready, age, dead = self._read(lambda: self._d.stats(self._now()))
        return {
            "queued": queued,
            "running": running,
            "ready_now": ready,
            "oldest_ready_age_s": round(age, 1) if age is not None else 0.0,
            "dead": dead,
        }

    def queue_stats(self) -> dict[str, dict[str, float | int]]:
        """stats() per named queue (live rows only): queued, running, ready_now and
        oldest_ready_age_s. A queue with no live job is not listed."""
        return {
            name: {
                "queued": queued,
                "running": running,
                "ready_now": ready,
                "oldest_ready_age_s": round(age, 1) if age is not None else 0.0,
            }
            for name, queued, running, ready, age in self._read(lambda: self._d.queue_stats(self._now()))
        }

    def job(self, job_id: int) -> JobRecord | None:
        """The stored row of job `job_id`, or None if there is none."""
        validate.job_id(job_id)
        return self._read(lambda: self._d.job(job_id))

    def result(self, job_id: int) -> JobResult:
        """What became of job `job_id`: its state, its return value (`.return_value`, which
        raises NoResult until it is done) and every attempt with its worker, times, outcome
        and error. JobNotFound for an id no job has (or had: a purge takes the result too)."""
        record = self.job(job_id)
        if record is None:
            raise JobNotFound(f"no job has id {job_id}: it never existed, or a purge removed it")
        return job_result(record)

    def wait(self, job_id: int, timeout: float) -> JobResult:
        """Wait up to `timeout` seconds for job `job_id` to finish (done, dead or cancelled)
        and return its result(). A worker's settle hints producers on this machine once it
        has finished jobs (SQLite: labqueue.wakeup), so the wait ends within milliseconds;
        without a hint (PostgreSQL, another machine) it reads the job every RESULT_POLL
        seconds. WaitTimedOut if the job has not finished by then."""
        timeout = validate.seconds("timeout", timeout, allow_zero=True)
        give_up = time.monotonic() + timeout
        found: list[JobResult] = []

        def finished() -> bool:
            found[:] = [self.result(job_id)]
            return found[0].finished

        while not self._read(
            lambda: self._d.wait_for_finished(max(give_up - time.monotonic(), 0.0), finished)
        ):
            if time.monotonic() >= give_up:
                raise WaitTimedOut(
                    f"job {job_id} is still {found[0].status} after {timeout:g} s: it has not finished"
                )
        return found[0]

    def jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
        concurrency_key: str | None = None,
    ) -> list[JobRecord]:
        """Stored rows in id order, filtered by state (one or several), kind, queue and
        concurrency key. Reads the whole table when unfiltered: for people and tests, not
        the hot path."""
        return self._jobs(state, kind, limit, queue, newest=False, key=concurrency_key)

    def _jobs(
        self,
        state: object,
        kind: object,
        limit: object,
        queue: object,
        *,
        newest: bool,
        before: object = None,
        key: object = None,
    ) -> list[JobRecord]:
        chosen = JobFilter(
            states=validate.states(state),  # type: ignore[arg-type]
            kind=None if kind is None else validate.kind(kind),
            queue=None if queue is None else validate.queue_name(queue),
            limit=None if limit is None else validate.read_limit(limit),
            newest=newest,
            before=None if before is None else validate.job_id(before),
            concurrency_key=validate.concurrency_key(key),
        )
        return self._read(lambda: self._d.jobs(chosen))

    def latest_jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
        before: int | None = None,
        concurrency_key: str | None = None,
    ) -> list[JobRecord]:
        """jobs(), newest first: the last `limit` rows matching the filters (what an operator
        wants to see first on a bad day). `before`: only jobs with a smaller id, so the next
        page of a listing is latest_jobs(before=<the last id shown>), read through the
        primary key whatever the page's depth (keyset paging, not OFFSET)."""
        return self._jobs(state, kind, limit, queue, newest=True, before=before, key=concurrency_key)

    def waiting_on_keys(self) -> dict[str, int]:
        """Per concurrency key, the jobs ready now that wait because their key already has
        as many running jobs as their limit allows (keys with none are left out). Read
        through the ready index: live rows only."""
        return dict(self._read(lambda: self._d.waiting_on_keys(self._now())))

    def finished_within(self, seconds: float) -> dict[str, dict[str, int]]:
        """How many jobs finished in the last `seconds` by the queue's clock, per named
        queue and final state (done, dead, cancelled): a metrics scrape's throughput.
        There is no index on finished_at, so this reads the table once: for a scrape, not
        the hot path."""
        seconds = validate.positive("seconds", seconds)
        found: dict[str, dict[str, int]] = {}
        for name, state, n in self._read(lambda: self._d.finished_within(self._now(), seconds)):
            found.setdefault(name, {})[state] = n
        return found

    def queue_totals(self) -> dict[str, dict[str, int]]:
        """Per named queue, what queue_stats() leaves out: "scheduled" (queued, not due yet:
        delayed or backing off) and "dead". A queue with neither is not listed. Reads the
        live rows and the dead ones through their partial indexes, never the done ones."""
        scheduled, dead = self._read(lambda: self._d.queue_totals(self._now()))
        return {
            name: {"scheduled": scheduled.get(name, 0), "dead": dead.get(name, 0)}
            for name in sorted({*scheduled, *dead})
        }

    def throughput(
        self, seconds: float = 3600.0, step: float = 60.0, *, after_id: int = 0
    ) -> dict[str, dict[str, list[int]]]:
        """Jobs finished in each `step` of the last `seconds` by the queue's clock, per named
        queue and final state (done, dead, cancelled): counts, the oldest step first and the
        step ending now last. Like finished_within(), one read of the table (no index on
        finished_at): for a dashboard's chart, not the hot path. `after_id` counts only the
        jobs with a larger id, read as a range of the primary key: a bound on the rows read."""
        seconds = validate.positive("seconds", seconds)
        after_id = 0 if after_id <= 0 else validate.job_id(after_id)
        step = validate.positive("step", step)
        steps = max(1, math.ceil(seconds / step))
        if steps > MAX_THROUGHPUT_STEPS:
            raise InvalidArgument(
                f"seconds / step must be at most {MAX_THROUGHPUT_STEPS} steps, got {seconds:g} / {step:g}"
            )
        found: dict[str, dict[str, list[int]]] = {}
        for name, state, ago, n in self._read(
            lambda: self._d.throughput(self._now(), seconds, step, after_id)
        ):
            if 0 <= ago < steps:
                found.setdefault(name, {}).setdefault(state, [0] * steps)[steps - 1 - ago] += n
        return found

    def read_only(self, *, timeout: float | None = None) -> AbstractContextManager[Any]:
        """A block whose reads all see one snapshot of the queue, in one read-only
        transaction: no lock is taken that a worker could wait on (SQLite's WAL readers never
        block a writer), and a write in the block is refused. A dashboard's page reads in one,
        and renders after it ends. With a `timeout` (seconds), a read still running after it
        is stopped and raises QueueBusy (PostgreSQL: each statement's statement_timeout;
        SQLite: the block's reads together), so a reader never holds its snapshot long."""
        if timeout is not None:
            timeout = validate.positive("timeout", timeout)
        return Transaction(self, self._d.snapshot(timeout))

    def longest_waiting(self) -> tuple[int, float] | None:
        """The queued job created longest ago and how long ago (seconds, by the queue's clock),
        whatever keeps it waiting: no running worker handles its kind (each gives it back),
        its queue is paused or served by no worker, a delay, retries. None when no job is
        queued. stats()' oldest ready job misses such a job, hidden most of the time. Reads
        every queued row's created_at (through the live rows' index): for a probe."""
        found = self._read(lambda: self._d.longest_waiting(self._now()))
        return None if found is None else (found[0], round(max(float(found[1]), 0.0), 1))

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state (every state listed, zeros included). Counts
        the whole table: stats() is the cheap reading for a dashboard."""
        found = self._read(self._d.counts)
        return {state: found.get(state, 0) for state in STATES}
