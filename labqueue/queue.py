"""A durable job queue on one SQLite file: leases, fencing tokens, retries, dead letters."""

from __future__ import annotations

import json
import math
import os
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, NoReturn

from . import sql
from .errors import (
    CannotOpen,
    ForeignJobsTable,
    InvalidArgument,
    NotADatabase,
    PayloadNotSerializable,
    QueueBusy,
    StorageFull,
)
from .versions import require_returning

SQLITE_HEADER = b"SQLite format 3\x00"
SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
MAX_ERROR_CHARS = 500

Clock = Callable[[], float]
Effect = Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True)
class Job:
    """One claimed job, as the worker that holds its lease sees it."""

    id: int
    kind: str
    payload: Any
    attempts: int
    max_attempts: int
    lease_token: str
    lease_expires_at: float


@dataclass(frozen=True)
class JobRecord:
    """A job's row as stored, read back for a person or a test (not a lease: use claim()).
    `payload` is the stored JSON text, undecoded, so any row can be read."""

    id: int
    kind: str
    payload: str
    state: str
    attempts: int
    max_attempts: int
    visible_at: float
    lease_token: str | None
    worker: str | None
    last_error: str | None
    dedupe_key: str | None
    created_at: float
    finished_at: float | None


STATES = ("queued", "running", "done", "dead")


@dataclass(frozen=True)
class Finished:
    """What running one claimed job came to, for settle(): a success (with the effect
    to commit alongside the completion, if any) or a failure (`error` set)."""

    job: Job
    effect: Effect | None = None
    error: str | None = None
    retry: bool = True



class JobQueue:
    """The queue on one SQLite file. Open one per process or thread; it is not shared.

    Every deadline (a job's run time, the end of its lease, its retry time) is an
    absolute reading of `clock` taken when it was set, compared with `clock()` at each
    claim. A step in the clock therefore moves all deadlines at once. Forward by d:
    every lease and delay is d shorter, so a live job may be claimed by a second
    worker, whose new token fences the first one out. Back by d: they all last d
    longer, so a crashed worker's job waits d more before it is handed over. Either
    way nothing is lost or finished twice: complete, fail and heartbeat check the
    token, never the clock, and a heartbeat renews the lease from the clock's reading.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: float = 30.0,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        synchronous: str = "NORMAL",
        clock: Clock = time.time,
        rng: Callable[[], float] = random.random,
        schema: str | None = sql.SCHEMA,
        timeout: float = 30.0,
    ) -> None:
        require_returning()
        self.lease_seconds = _positive("lease_seconds", lease_seconds)
        self.max_attempts = _attempts("max_attempts", max_attempts)
        self.backoff_base = _positive("backoff_base", backoff_base)
        self.backoff_cap = _positive("backoff_cap", backoff_cap)
        self.timeout = _positive("timeout", timeout, allow_zero=True)
        level = str(synchronous).upper()
        if level not in SYNCHRONOUS_LEVELS:
            raise InvalidArgument(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got {synchronous!r}"
            )
        self.clock = clock
        self.rng = rng
        self.path = Path(path)
        _check_is_sqlite_file(self.path)
        # isolation_level=None: sqlite3 issues no implicit BEGIN. Writes get their
        # transaction from _tx(); a lone read runs in autocommit.
        try:
            self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=self.timeout)
        except sqlite3.OperationalError as exc:  # a missing folder, or one we may not write to
            raise CannotOpen(
                f"cannot open or create {self.path} ({exc}): check that its folder "
                f"{self.path.parent} exists and is writable"
            ) from exc
        self.db.row_factory = sqlite3.Row
        # The worker loop's statements run on one reused cursor that yields plain tuples:
        # no cursor or Row object per statement on the hot path.
        self._hot = self.db.cursor()
        self._hot.row_factory = None
        try:
            _check_jobs_table(self.db, self.path)
            self.db.execute("PRAGMA journal_mode = WAL")
            # A PRAGMA takes no parameters; the level was checked against a fixed list.
            self.db.execute(f"PRAGMA synchronous = {level}")
            if schema:
                self.db.executescript(schema)
        except sqlite3.OperationalError as exc:  # locked, or full while creating the schema
            self.db.close()
            self._raise_translated(exc)
        except sqlite3.DatabaseError as exc:  # an SQLite header on a damaged or foreign file
            self.db.close()
            raise NotADatabase(f"{self.path} is not a usable SQLite database ({exc})") from exc
        except BaseException:
            self.db.close()
            raise

    # -- plumbing -------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """Run the block as a single write transaction. BEGIN IMMEDIATE acquires the
        write lock up front, before anything is read, so no other writer can change a
        row between our reading it and our writing it. Any exception, including
        KeyboardInterrupt, rolls the whole of it back."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            self._raise_translated(exc)
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                self._raise_translated(exc)
            raise

    def _raise_translated(self, exc: sqlite3.OperationalError) -> NoReturn:
        """Raise a lock timeout or a full disk as labqueue's own error, naming the file;
        anything else is raised unchanged."""
        message = str(exc)
        if "locked" in message or "busy" in message:
            raise QueueBusy(
                f"{self.path}: another connection held the write lock for longer than "
                f"the busy timeout of {self.timeout} s ({message}); nothing was changed"
            ) from exc
        if "full" in message:
            raise StorageFull(f"{self.path}: {message}; the transaction was rolled back") from exc
        raise exc

    # -- producing --------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: Any,
        *,
        delay: float = 0.0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
    ) -> int | None:
        """Add one job, ready after `delay` seconds, and return the new row's id. If a
        job with this dedupe_key is already stored, nothing changes and the result is None."""
        _kind(kind)
        delay = _positive("delay", delay, allow_zero=True)
        attempts = self.max_attempts if max_attempts is None else _attempts("max_attempts", max_attempts)
        if dedupe_key is not None and not isinstance(dedupe_key, str):
            raise InvalidArgument(f"dedupe_key must be a string or None, got {dedupe_key!r}")
        body = _to_json(payload)
        now = self.clock()
        with self._tx() as db:
            row = db.execute(sql.ENQUEUE, (kind, body, attempts, now + delay, dedupe_key, now)).fetchone()
        return None if row is None else row["id"]

    def enqueue_many(self, kind: str, payloads: Iterable[Any]) -> int:
        """Add many jobs in one transaction: all of them, or (on any error) none."""
        _kind(kind)
        bodies = []
        for index, payload in enumerate(payloads):
            try:
                bodies.append(_to_json(payload))
            except PayloadNotSerializable as exc:
                raise PayloadNotSerializable(f"payload #{index}: {exc}") from None
        now = self.clock()
        with self._tx() as db:
            db.executemany(sql.ENQUEUE_MANY, [(kind, body, self.max_attempts, now, now) for body in bodies])
        return len(bodies)

    # -- consuming --------------------------------------------------------------

    def claim(self, worker: str, *, limit: int = 1) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, oldest first, sorted by id.

        Readiness is a single test, visible_at <= now. The column holds a queued job's
        start time and a running job's lease deadline, so an expired lease is picked up
        here and no reaper is needed. Jobs whose lease ran out on their last attempt
        become dead. It looks before it locks: on an empty queue it returns [] after one
        read, without taking the write lock."""
        _limit(limit)
        if not self.any_ready():
            return []
        with self._tx():
            rows = self._claim_rows(worker, limit, alone_if_handed_out=False)
        return self._decoded(rows)

    def complete(self, job: Job, effect: Effect | None = None) -> bool:
        """Mark `job` done if this worker still holds its lease. `effect(db)` runs only
        once the fence has passed, inside the completing transaction, so its writes are
        saved together with the done state or not saved at all. Returns False, without
        running the effect, for a stale lease."""
        with self._tx() as db:
            cur = db.execute(sql.COMPLETE, (self.clock(), job.id, job.lease_token))
            if cur.rowcount != 1:
                return False
            if effect is not None:
                effect(db)
        return True

    def fail(self, job: Job, error: str, *, retry: bool = True) -> Literal["queued", "dead"] | None:
        """Record a failure. Returns "queued" (a retry after full-jitter backoff),
        "dead" (out of attempts, or retry=False), or None for a stale lease."""
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a string, got {type(error).__name__}")
        now = self.clock()
        params = {
            "final": not retry,
            "retry_at": now + self.backoff_delay(job.attempts),
            "now": now,
            "error": error[:MAX_ERROR_CHARS],
            "id": job.id,
            "token": job.lease_token,
        }
        with self._tx() as db:
            row = db.execute(sql.FAIL, params).fetchone()
        return None if row is None else row["state"]

    def backoff_delay(self, attempts: int) -> float:
        """Full jitter: a uniform pick between 0 and a ceiling that doubles per attempt."""
        ceiling = min(self.backoff_cap, self.backoff_base * 2 ** (attempts - 1))
        return self.rng() * ceiling

    # -- the worker loop's fast path -----------------------------------------------
    # Same rules as claim() and complete(), fewer round trips: one write transaction
    # per job instead of two, the retire folded into the claim, and an idle worker
    # that looks with a read instead of taking the write lock.

    def any_ready(self) -> bool:
        """Whether a claim would find something now: a job to run, or an expired lease
        on a last attempt to retire. One read and no write lock, so producers and busy
        workers carry on while an idle worker looks."""
        return bool(self._hot.execute(sql.READY_PROBE, (self.clock(),)).fetchall())

    def claim_next(self, worker: str) -> Job | None:
        """Lease the next ready job to `worker`, or return None: claim_batch(worker, 1)."""
        jobs = self.claim_batch(worker, 1)
        return jobs[0] if jobs else None

    def complete_and_claim(
        self, job: Job, worker: str, effect: Effect | None = None
    ) -> tuple[bool, Job | None]:
        """complete(job, effect), then claim_next(worker), in one write transaction.

        Returns (accepted, next job or None). The fence, the effect and its rollback
        are complete()'s: a stale lease returns False without running the effect and
        still claims; an effect that raises rolls back the completion and the claim
        together, and the exception propagates with the job still leased to us."""
        with self._tx() as db:
            accepted = self._hot.execute(sql.COMPLETE, (self.clock(), job.id, job.lease_token)).rowcount == 1
            if accepted and effect is not None:
                effect(db)
            rows = self._claim_rows(worker, 1, alone_if_handed_out=True)
        jobs = self._decoded(rows)
        return accepted, (jobs[0] if jobs else None)

    def heartbeat(self, job: Job) -> bool:
        """Move the lease deadline to clock() + lease_seconds. Returns False, changing
        nothing, once our token no longer matches a running job."""
        with self._tx() as db:
            cur = db.execute(sql.HEARTBEAT, (self.clock() + self.lease_seconds, job.id, job.lease_token))
        return cur.rowcount == 1

    # -- group commit: a batch per write transaction -------------------------------
    # The worker's path when the queue is deep: claim a batch, run it, then report every
    # job of it and claim the next batch in one write transaction. Each job keeps its own
    # rules: its completion is fenced by its token, its effect commits with its completion
    # or not at all (a savepoint per job), its failure is retried or dead-lettered. What
    # the batch shares is the transaction, so one commit (one WAL sync) serves many jobs.

    def claim_batch(self, worker: str, limit: int) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, oldest first, after a read has shown
        that something is ready (an empty queue costs no write lock). A job that was
        handed out before (attempts > 0: its worker may have crashed on it) comes alone,
        so a job that kills its worker cannot take a batch of others down with it twice."""
        _limit(limit)
        if not self.any_ready():
            return []
        with self._tx():
            rows = self._claim_rows(worker, limit, alone_if_handed_out=True)
        return self._decoded(rows)

    def settle(
        self, finished: Sequence[Finished], *, claim_for: str | None = None, limit: int = 1
    ) -> tuple[list[str], list[Job]]:
        """Report every job in `finished` in one write transaction and, when `claim_for`
        names a worker, claim its next batch of up to `limit` jobs in the same one.

        Returns each job's outcome ("done", "queued", "dead", or "lost" for a job whose
        lease was no longer ours) and the jobs claimed. A stale token rejects that job
        only; an effect that raises rolls back that job's completion only (a savepoint)
        and fails it with the error, while the rest of the batch still commits."""
        outcomes: list[str] = []
        with self._tx():
            now = self.clock()
            for report in finished:
                outcomes.append(self._settle_one(report, now))
            rows = [] if claim_for is None else self._claim_rows(claim_for, limit, alone_if_handed_out=True)
        return outcomes, self._decoded(rows)

    def extend(self, jobs: Sequence[Job]) -> list[Job]:
        """Heartbeat several jobs in one write transaction: each lease that is still ours
        runs to clock() + lease_seconds. Returns those jobs with their new deadline; a job
        missing from the result has been taken over and must not be run or reported."""
        kept = []
        with self._tx():
            deadline = self.clock() + self.lease_seconds
            for job in jobs:
                if self._hot.execute(sql.HEARTBEAT, (deadline, job.id, job.lease_token)).rowcount == 1:
                    kept.append(replace(job, lease_expires_at=deadline))
        return kept

    def release(self, jobs: Sequence[Job]) -> int:
        """Give back claimed jobs that were never started (a warm stop mid-batch): queued
        and ready at once, the attempt the claim counted returned. Returns how many were
        still ours."""
        released = 0
        with self._tx():
            now = self.clock()
            for job in jobs:
                params = {"now": now, "id": job.id, "token": job.lease_token}
                released += self._hot.execute(sql.RELEASE, params).rowcount
        return released

    def _claim_rows(self, worker: str, limit: int, *, alone_if_handed_out: bool) -> list[tuple]:
        """The claim inside the caller's write transaction: retire the leases that ran out
        on a last attempt, read the next ready ids, lease exactly those. Under SQLite's
        single writer nothing can change a row between the read and the update, because
        BEGIN IMMEDIATE took the write lock before either ran."""
        _limit(limit)
        now = self.clock()
        self._hot.execute(sql.RETIRE_EXHAUSTED, {"now": now, "reason": sql.LAST_ATTEMPT_EXPIRED})
        ready = self._hot.execute(sql.READY_IDS, {"now": now, "limit": limit}).fetchall()
        ids = _batch_ids(ready) if alone_if_handed_out else [job_id for job_id, _ in ready]
        if not ids:
            return []
        params = (now + self.lease_seconds, secrets.token_hex(16), worker, *ids)
        # fetchall() matters: an undrained RETURNING cursor keeps the statement, and with
        # it the write lock, alive.
        return self._hot.execute(sql.claim_ids(len(ids)), params).fetchall()

    def _settle_one(self, report: Finished, now: float) -> str:
        job = report.job
        if report.error is not None:
            return self._fail_in_tx(job, report.error, retry=report.retry, now=now)
        if report.effect is None:
            accepted = self._hot.execute(sql.COMPLETE, (now, job.id, job.lease_token)).rowcount == 1
            return "done" if accepted else "lost"
        self._hot.execute("SAVEPOINT job")
        try:
            if self._hot.execute(sql.COMPLETE, (now, job.id, job.lease_token)).rowcount != 1:
                return "lost"
            report.effect(self.db)
            return "done"
        except Exception as exc:  # this job's completion and effect are undone, no other job's
            self._hot.execute("ROLLBACK TO job")
            return self._fail_in_tx(job, f"{type(exc).__name__}: {exc}", retry=True, now=now)
        finally:
            self._hot.execute("RELEASE job")

    def _fail_in_tx(self, job: Job, error: str, *, retry: bool, now: float) -> str:
        params = {
            "final": not retry,
            "retry_at": now + self.backoff_delay(job.attempts),
            "now": now,
            "error": error[:MAX_ERROR_CHARS],
            "id": job.id,
            "token": job.lease_token,
        }
        row = self._hot.execute(sql.FAIL, params).fetchone()
        return "lost" if row is None else row[0]

    def _decoded(self, rows: list[tuple]) -> list[Job]:
        """Claimed rows as Jobs, decoded after COMMIT so the write lock is held no longer
        than needed."""
        return sorted((_job_from_tuple(row) for row in rows), key=lambda job: job.id)

    # -- operating --------------------------------------------------------------

    def requeue_dead(self, ids: Sequence[int] | None = None) -> list[int]:
        """Put dead jobs (all of them, or those in `ids`) back in the queue, attempts reset to 0.
        Returns the ids requeued, sorted. An empty `ids` requeues nothing."""
        now = self.clock()
        if ids is None:
            statement, params = sql.REQUEUE_DEAD, (now,)
        else:
            ids = list(ids)
            bad = [i for i in ids if not isinstance(i, int) or isinstance(i, bool)]
            if bad:
                raise InvalidArgument(f"ids must be whole numbers, got {bad[0]!r}")
            statement, params = sql.REQUEUE_DEAD_IDS, (now, json.dumps(ids))
        with self._tx() as db:
            rows = db.execute(statement, params).fetchall()
        return sorted(row["id"] for row in rows)

    def stats(self) -> dict[str, float | int]:
        """What to watch, read through the partial indexes only: finished rows are
        never scanned, however many there are."""
        now = self.clock()
        live = {row["state"]: row["n"] for row in self.db.execute(sql.STATS_LIVE)}
        ready = self.db.execute(sql.STATS_READY, (now,)).fetchone()
        dead = self.db.execute(sql.STATS_DEAD).fetchone()["n"]
        oldest = ready["oldest"]
        return {
            "queued": live.get("queued", 0),
            "running": live.get("running", 0),
            "ready_now": ready["n"],
            "oldest_ready_age_s": round(now - oldest, 1) if oldest is not None else 0.0,
            "dead": dead,
        }

    # -- reading jobs back --------------------------------------------------------

    def job(self, job_id: int) -> JobRecord | None:
        """The stored row of job `job_id`, or None if there is none."""
        _whole_id(job_id)
        row = self.db.execute(sql.JOB, (job_id,)).fetchone()
        return None if row is None else _record(row)

    def jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        """Stored rows in id order, filtered by state (one or several) and kind. Reads the
        whole table when unfiltered: for people and tests, not for the hot path."""
        states = _states(state)
        if kind is not None:
            _kind(kind)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidArgument(f"limit must be a whole number of zero or more, or None, got {limit!r}")
        params = {
            "states": None if states is None else json.dumps(states),
            "kind": kind,
            "limit": -1 if limit is None else limit,
        }
        return [_record(row) for row in self.db.execute(sql.JOBS, params)]

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state (every state listed, zeros included). Counts
        the whole table: stats() is the cheap reading for a dashboard."""
        found = {row["state"]: row["n"] for row in self.db.execute(sql.COUNTS)}
        return {state: found.get(state, 0) for state in STATES}

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JobQueue({str(self.path)!r}, lease_seconds={self.lease_seconds})"


def _record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(**{name: row[name] for name in sql.COLUMNS})


def _job_from_tuple(row: tuple) -> Job:
    """A CLAIM_IDS row (id, kind, payload, attempts, max_attempts, lease_token, visible_at)."""
    return Job(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5], row[6])


def _batch_ids(ready: list[tuple[int, int]]) -> list[int]:
    """Which of the ready (id, attempts) rows one batch takes: a job handed out before
    alone, else the leading run of jobs never handed out."""
    if not ready:
        return []
    if ready[0][1] > 0:
        return [ready[0][0]]
    batch = []
    for job_id, attempts in ready:
        if attempts > 0:
            break
        batch.append(job_id)
    return batch


def _to_json(payload: Any) -> str:
    try:
        return json.dumps(payload, allow_nan=False)
    except TypeError as exc:
        raise PayloadNotSerializable(f"payload is not JSON-serialisable: {exc}") from None
    except ValueError as exc:
        raise PayloadNotSerializable(f"payload is not JSON-serialisable: {exc}") from None


def _kind(kind: object) -> None:
    if not isinstance(kind, str) or not kind:
        raise InvalidArgument(f"kind must be a non-empty string, got {kind!r}")


def _limit(limit: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidArgument(f"limit must be a whole number of at least 1, got {limit!r}")


def _whole_id(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"a job id must be a whole number, got {value!r}")
    return value


def _states(state: str | Iterable[str] | None) -> list[str] | None:
    if state is None:
        return None
    chosen = [state] if isinstance(state, str) else list(state)
    unknown = [s for s in chosen if s not in STATES]
    if unknown or not chosen:
        raise InvalidArgument(f"state must be one or more of {', '.join(STATES)}, got {state!r}")
    return chosen


def _positive(name: str, value: object, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        need = "zero or more" if allow_zero else "more than zero"
        raise InvalidArgument(f"{name} must be a finite number {need}, got {value!r}")
    return float(value)


def _attempts(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def _check_is_sqlite_file(path: Path) -> None:
    """Refuse anything that is not an SQLite file (or nothing yet) before connecting,
    so a wrong path is never touched, let alone turned into a database."""
    if path.is_dir():
        raise NotADatabase(f"{path} is a directory, not an SQLite database file")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
        if header != SQLITE_HEADER:
            raise NotADatabase(f"{path} is not an SQLite database (its header is {header[:16]!r})")


def _check_jobs_table(db: sqlite3.Connection, path: Path) -> None:
    columns = {row[0] for row in db.execute(sql.TABLE_COLUMNS)}
    missing = [name for name in sql.COLUMNS if name not in columns]
    if columns and missing:
        raise ForeignJobsTable(
            f"{path} already has a 'jobs' table that is not labqueue's "
            f"(missing columns: {', '.join(missing)})"
        )
