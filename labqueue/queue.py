"""A durable job queue on one SQLite file: leases, fencing tokens, retries, dead letters."""

from __future__ import annotations

import functools
import json
import math
import os
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar

from . import sql, validate, wakeup
from .errors import (
    CannotCancel,
    CannotOpen,
    EffectEndedTransaction,
    ForeignDatabase,
    ForeignJobsTable,
    InvalidArgument,
    JobNotFound,
    NotADatabase,
    PayloadNotSerializable,
    QueueBusy,
    QueueNotFound,
    SchemaTooNew,
    StorageFull,
)
from .sql import MAX_ERROR_CHARS
from .validate import DEFAULT_QUEUE, MAX_CLAIM_LIMIT, STATES
from .versions import require_returning

SQLITE_HEADER = b"SQLite format 3\x00"
SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
# The deepest nesting of lists and dicts a payload may have. Python's json decodes far
# deeper, but not without limit: a payload enqueue accepts must always be readable.
MAX_PAYLOAD_DEPTH = 100
# How long SQLite itself waits for the write lock before Python tries again: between
# tries Python runs its signal handlers, so a second stop signal is not held up by a
# wait in C. The queue's `timeout` is the total over all tries.
BUSY_SLICE = 0.1

__all__ = [
    "MAX_CLAIM_LIMIT",
    "MAX_ERROR_CHARS",
    "MAX_PAYLOAD_DEPTH",
    "STATES",
    "Job",
    "JobQueue",
    "JobRecord",
    "Purged",
    "new_token",
]

Clock = Callable[[], float]
T = TypeVar("T")
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
    priority: int = 0
    queue: str = DEFAULT_QUEUE


@dataclass(frozen=True)
class Purged:
    """What one purge() did: rows removed (and archived, if asked), in how many write
    transactions, and the longest of them, from BEGIN to COMMIT, in seconds."""

    removed: int
    archived: int
    batches: int
    longest_hold_s: float


@dataclass(frozen=True)
class Finished:
    """What running one claimed job came to, for settle(): a success (with the effect
    to commit alongside the completion, if any) or a failure (`error` set)."""

    job: Job
    effect: Effect | None = None
    error: str | None = None
    retry: bool = True
    exception: BaseException | None = field(default=None, compare=False, repr=False)  # for the log


def new_token() -> str:
    """A fresh lease token: 128 random bits. Every claim, single or batch, takes its
    token from here."""
    return secrets.token_hex(16)


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

    Opening a file: a new path becomes a queue. An SQLite file without a `jobs` table
    (another application's database, say) is changed: labqueue switches it to WAL
    journal mode and adds its `jobs` table and indexes, and records its schema version
    in the file's `PRAGMA user_version` (so it refuses a file whose user_version another
    application already uses). Pass `create=False` to open only an existing queue:
    then a missing file, or one without a jobs table, raises QueueNotFound and nothing
    is created or changed. A `jobs` table that is not labqueue's shape raises
    ForeignJobsTable (extra columns that may be NULL or have a default are allowed), a
    newer schema version SchemaTooNew, a file, -wal, -shm or folder this user cannot
    write CannotOpen, all before anything is written; a queue made before schema
    versions existed is upgraded in place. `schema=None` opens without creating or
    upgrading anything.

    `timeout` is how long a write waits for another connection's write lock before
    QueueBusy. SQLite waits in slices of BUSY_SLICE and Python retries between them,
    so a signal handler (a worker's second stop signal) is never held up by the wait.
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
        create: bool = True,
        wake: bool = True,
    ) -> None:
        require_returning()
        self.lease_seconds = validate.positive("lease_seconds", lease_seconds)
        self.max_attempts = validate.attempts("max_attempts", max_attempts)
        self.backoff_base = validate.positive("backoff_base", backoff_base)
        self.backoff_cap = validate.positive("backoff_cap", backoff_cap)
        self.timeout = validate.positive("timeout", timeout, allow_zero=True)
        level = str(synchronous).upper()
        if level not in SYNCHRONOUS_LEVELS:
            raise InvalidArgument(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got {synchronous!r}"
            )
        if not isinstance(create, bool):
            raise InvalidArgument(f"create must be True or False, got {create!r}")
        if not isinstance(wake, bool):
            raise InvalidArgument(f"wake must be True or False, got {wake!r}")
        self.clock = clock
        self.rng = rng
        self.wake = wake  # notify idle workers after an enqueue, and wait for hints when idle
        self._waiter: wakeup.Waiter | None = None
        self.path = Path(validate.db_path(path))
        _check_is_sqlite_file(self.path)
        if not create and not self.path.is_file():
            raise QueueNotFound(
                f"{self.path} does not exist: create=False opens an existing queue only, "
                "so nothing was created (is the path mistyped?)"
            )
        _check_writable(self.path)
        # isolation_level=None: sqlite3 issues no implicit BEGIN. Writes get their
        # transaction from _tx(); a lone read runs in autocommit. The busy timeout is
        # one slice of self.timeout: _retry_busy() makes up the rest in Python.
        self._checked_worker: str | None = None
        try:
            if create:
                self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=self._slice())
            else:  # mode=rw: SQLite itself never creates the file, even if it vanished meanwhile
                uri = self.path.absolute().as_uri() + "?mode=rw"
                self.db = sqlite3.connect(uri, isolation_level=None, timeout=self._slice(), uri=True)
        except sqlite3.OperationalError as exc:  # a missing folder, or one we may not write to
            if not create:
                raise QueueNotFound(f"cannot open the existing queue {self.path} ({exc})") from exc
            raise CannotOpen(
                f"cannot open or create {self.path} ({exc}): check that its folder "
                f"{self.path.parent} exists and is writable"
            ) from exc
        self.db.row_factory = sqlite3.Row
        # The worker loop's statements run on one reused cursor that yields plain tuples:
        # no cursor or Row object per statement on the hot path.
        self._hot = self.db.cursor()
        self._hot.row_factory = None
        # Consulted by SQLite only when it prepares a statement, so it costs the cached
        # statements of the hot path nothing.
        self._guard = _EffectGuard()
        self.db.set_authorizer(self._guard)
        try:
            self._retry_busy(lambda: self._open(schema, level, create))
        except sqlite3.OperationalError as exc:  # locked, full or read-only while preparing the file
            self.db.close()
            self._raise_translated(exc)
        except sqlite3.DatabaseError as exc:  # an SQLite header on a damaged or foreign file
            self.db.close()
            raise NotADatabase(f"{self.path} is not a usable SQLite database ({exc})") from exc
        except BaseException:
            self.db.close()
            raise

    def _open(self, schema: str | None, level: str, create: bool) -> None:
        """Check the file, then set it up. Everything that can refuse the file reads
        only, so a refused file is left as it was."""
        found = self.db.execute(sql.JOBS_OBJECT).fetchone()
        version = self.db.execute(sql.USER_VERSION).fetchone()[0]
        if found is None:
            if not create:
                raise QueueNotFound(
                    f"{self.path} has no jobs table: create=False opens an existing queue only, "
                    "so no table was added and the file was not changed"
                )
            if version != 0:
                raise ForeignDatabase(
                    f"{self.path} has no jobs table and its PRAGMA user_version is {version}: it is "
                    "another application's database that keeps its own schema version where labqueue "
                    "keeps its, so labqueue will not add its tables to it; use a file of its own"
                )
        else:
            if version > sql.SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} has labqueue schema version {version} (PRAGMA user_version); this "
                    f"labqueue knows versions up to {sql.SCHEMA_VERSION}: upgrade labqueue to open it"
                )
            _check_jobs_table(self.db, self.path, found, _versioned(self.db, version))
        if found is None and not self.db.execute(sql.PAGE_COUNT).fetchone()[0]:
            # A brand-new file: freed pages can be handed back later (reclaim_space). The
            # setting only takes before the first table exists; a full VACUUM applies it later.
            self.db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self.db.execute("PRAGMA journal_mode = WAL")
        # A PRAGMA takes no parameters; the level was checked against a fixed list.
        self.db.execute(f"PRAGMA synchronous = {level}")
        if schema == sql.SCHEMA:
            if found is None or version < sql.SCHEMA_VERSION:
                self._migrate()
        elif schema:  # a schema of the caller's own (the course's index experiments)
            self.db.executescript(schema)

    def _migrate(self) -> None:
        """Bring the file to SCHEMA_VERSION, one step of sql.MIGRATIONS at a time, in one
        write transaction. The version is read again under the write lock: another
        process may have created or upgraded the queue since we looked."""
        with self._tx() as db:
            stamped = db.execute(sql.USER_VERSION).fetchone()[0]
            version = _versioned(db, stamped, unversioned=0)
            if version > sql.SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} was upgraded to labqueue schema version {version} while opening; "
                    f"this labqueue knows versions up to {sql.SCHEMA_VERSION}"
                )
            for step in sql.MIGRATIONS[version:]:
                run_migration(db, step)
            if version == sql.SCHEMA_VERSION:  # the current table, made by hand: add what is missing
                run_migration(db, sql.SCHEMA)
            if stamped < sql.SCHEMA_VERSION:
                # An integer constant of ours: PRAGMA takes no parameters.
                db.execute(f"PRAGMA user_version = {int(sql.SCHEMA_VERSION)}")

    # -- plumbing -------------------------------------------------------------

    def _slice(self) -> float:
        return min(self.timeout, BUSY_SLICE)

    def _retry_busy(self, action: Callable[[], T], *, waited: float = 0.0) -> T:
        """Run `action`, trying again while the database is locked, for up to
        self.timeout seconds in all (less `waited`, already spent). SQLite waits one
        short slice per try, so Python's signal handlers run between tries: a second
        stop signal ends the wait at once."""
        give_up = time.monotonic() + self.timeout - waited - self._slice()
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > give_up:
                    raise

    def _begin(self) -> None:
        self._own(sql.BEGIN)

    def _own(self, statement: str) -> None:
        """Run one of labqueue's own transaction statements (the authorizer lets them by)."""
        self._guard.ours = True
        try:
            self.db.execute(statement)
        finally:
            self._guard.ours = False

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """Run the block as a single write transaction. BEGIN IMMEDIATE acquires the
        write lock up front, before anything is read, so no other writer can change a
        row between our reading it and our writing it. Any exception, including
        KeyboardInterrupt, rolls the whole of it back."""
        try:
            try:
                self._begin()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    self._raise_translated(exc)
                try:  # the first try has waited one slice
                    self._retry_busy(self._begin, waited=self._slice())
                except sqlite3.OperationalError as again:
                    self._raise_translated(again)
        except BaseException:  # a signal's exception the instant BEGIN succeeded: undo it
            if self.db.in_transaction:
                self._own(sql.ROLLBACK)
            raise
        try:
            yield self.db
            self._own(sql.COMMIT)
        except BaseException as exc:
            if self.db.in_transaction:
                self._own(sql.ROLLBACK)
            if isinstance(exc, sqlite3.OperationalError):
                self._raise_translated(exc)
            raise

    def _raise_translated(self, exc: sqlite3.OperationalError) -> NoReturn:
        """Raise a lock timeout, a full disk or a read-only file as labqueue's own error,
        naming the file; anything else is raised unchanged."""
        message = str(exc)
        if "readonly" in message or "unable to open" in message:
            raise CannotOpen(
                f"{self.path}: cannot write ({message}): the file, its -wal or -shm file, or its "
                "folder is read-only for this user; nothing was changed"
            ) from exc
        if _is_busy(exc):
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
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
    ) -> int | None:
        """Add one job, ready after `delay` seconds, and return the new row's id. If a
        job with this dedupe_key is already stored, nothing changes and the result is None.
        A higher `priority` is claimed first; `queue` names the queue it waits in (a
        worker may take from some queues only). Idle workers of this file are woken.

        The payload must read back as it went in: JSON without NaN or infinity, nested
        at most MAX_PAYLOAD_DEPTH deep, dict keys strings (JSON would turn 1 into "1",
        and {1: 'a', '1': 'b'} would lose a value); tuples come back as lists.
        Anything else raises PayloadNotSerializable."""
        validate.kind(kind)
        delay = validate.positive("delay", delay, allow_zero=True)
        attempts = self.max_attempts
        if max_attempts is not None:
            attempts = validate.attempts("max_attempts", max_attempts)
        dedupe_key = validate.optional_text("dedupe_key", dedupe_key)
        priority = validate.priority(priority)
        queue = validate.queue_name(queue)
        body = _to_json(payload)
        now = self.clock()
        with self._tx() as db:
            row = db.execute(
                sql.ENQUEUE, (kind, body, attempts, now + delay, dedupe_key, now, priority, queue)
            ).fetchone()
        if row is not None and delay == 0:
            self.wake_workers()
        return None if row is None else row["id"]

    def enqueue_many(
        self, kind: str, payloads: Iterable[Any], *, priority: int = 0, queue: str = DEFAULT_QUEUE
    ) -> int:
        """Add many jobs in one transaction: all of them, or (on any error) none.
        Each payload follows enqueue()'s rules."""
        validate.kind(kind)
        priority = validate.priority(priority)
        queue = validate.queue_name(queue)
        bodies = []
        for index, payload in enumerate(payloads):
            try:
                bodies.append(_to_json(payload))
            except PayloadNotSerializable as exc:
                raise PayloadNotSerializable(f"payload #{index}: {exc}") from None
        now = self.clock()
        rows = [(kind, body, self.max_attempts, now, now, priority, queue) for body in bodies]
        with self._tx() as db:
            db.executemany(sql.ENQUEUE_MANY, rows)
        if bodies:
            self.wake_workers()
        return len(bodies)

    def wake_workers(self) -> int:
        """Hint this file's idle workers that a job may be ready (after a COMMIT, never
        inside a transaction). Returns how many took the hint; never raises. The hint
        only ends a wait early: see labqueue.wakeup."""
        return wakeup.notify(self.path) if self.wake else 0

    # -- consuming --------------------------------------------------------------

    def claim(self, worker: str, *, limit: int = 1, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, highest priority first and then
        oldest first, from `queues` (None: every queue), returned sorted by id.

        Readiness is a single test, visible_at <= now. The column holds a queued job's
        start time and a running job's lease deadline, so an expired lease is picked up
        here and no reaper is needed. Jobs whose lease ran out on their last attempt
        become dead. A claimed row that cannot be read (its payload is not JSON text)
        is dead-lettered in the same transaction, with the reason, and left out; the
        rest of the batch is returned. `limit` is at most MAX_CLAIM_LIMIT. It looks
        before it locks: on an empty queue it returns [] after one read, without the
        write lock."""
        limit = validate.claim_limit(limit)
        self._check_worker(worker)
        scope, where = _scope(queues)
        if not self.any_ready(queues):  # look before locking: an empty queue costs one read
            return []
        now = self.clock()
        params = {
            "now": now,
            "lease_end": now + self.lease_seconds,
            "token": new_token(),
            "worker": worker,
            "limit": limit,
            **where,
        }
        with self._tx() as db:
            db.execute(sql.RETIRE_EXHAUSTED, {"now": now, "reason": sql.LAST_ATTEMPT_EXPIRED})
            # fetchall() matters: an undrained RETURNING cursor keeps the statement,
            # and with it the write lock, alive.
            rows = self._claimed(sql.CLAIM_IN[scope], params)
            jobs = [job for job in (self._job(row, now) for row in rows) if job is not None]
        return sorted(jobs, key=lambda job: job.id)

    def _claimed(self, statement: str, params: dict[str, Any]) -> list[tuple]:
        """Run a claim statement and return its rows. A row whose text SQLite holds as
        invalid UTF-8 cannot even be fetched; then the rows claimed under this token are
        read again as bytes, so that row alone can be set aside (retired rows, which
        are dead already, are not read again)."""
        try:
            return self._hot.execute(statement, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):
                raise
        rows = []
        for job_id, kind, kind_type, payload, payload_type, *rest in self._hot.execute(
            sql.CLAIMED_RAW, {"token": params["token"], "lease_end": params["lease_end"]}
        ):
            kind, payload = _raw_text(kind, kind_type), _raw_text(payload, payload_type)
            rows.append((job_id, kind, payload, *rest, "running"))
        return rows

    def _job(self, row: tuple, now: float) -> Job | None:
        """The Job of a claimed row (id, kind, payload, attempts, max_attempts, lease_token,
        visible_at, ...), or None after dead-lettering a row that cannot be read: no
        retry can change a stored payload, so that job is never run."""
        kind, payload = row[1], row[2]
        if type(kind) is str and type(payload) is str:
            try:
                return Job(row[0], kind, json.loads(payload), row[3], row[4], row[5], row[6])
            except (ValueError, RecursionError):
                pass
        reason = f"unreadable job, not run: {_unreadable(kind, payload)}"
        self._hot.execute(sql.BURY, {"now": now, "reason": reason, "id": row[0], "token": row[5]})
        return None

    def _check_worker(self, worker: object) -> None:
        if worker is not self._checked_worker:  # the same name again costs one comparison
            validate.text("worker", worker)
            self._checked_worker = worker  # type: ignore[assignment]

    def complete(self, job: Job, effect: Effect | None = None) -> bool:
        """Mark `job` done if this worker still holds its lease. `effect(db)` runs only
        once the fence has passed, inside the completing transaction, so its writes are
        saved together with the done state or not saved at all. Returns False, without
        running the effect, for a stale lease.

        The effect must leave the transaction to labqueue: one that commits, rolls back
        or begins a transaction (COMMIT, executescript(), db.commit(), ...) is stopped
        and raises EffectEndedTransaction, with everything rolled back."""
        with self._tx() as db:
            cur = db.execute(sql.COMPLETE, (self.clock(), job.id, job.lease_token))
            if cur.rowcount != 1:
                return False
            if effect is not None:
                self._run_effect(job, effect)
        return True

    def _run_effect(self, job: Job, effect: Effect) -> None:
        """Run an effect inside the completing transaction, refusing any statement of
        its that would begin or end a transaction (the authorizer denies them as SQLite
        prepares them), and checking afterwards that the transaction is still open."""
        guard = self._guard
        if guard.stale:  # someone prepared a transaction statement: make SQLite prepare it again
            self.db.set_authorizer(guard)  # (which expires every prepared statement)
            guard.stale = False
        guard.active, guard.refused = True, False
        try:
            effect(self.db)
        except sqlite3.DatabaseError as exc:
            if guard.refused:
                raise EffectEndedTransaction(_effect_message(job)) from exc
            raise
        finally:
            guard.active = False
        if guard.refused or not self.db.in_transaction:
            raise EffectEndedTransaction(_effect_message(job))

    def fail(self, job: Job, error: str, *, retry: bool = True) -> Literal["queued", "dead"] | None:
        """Record a failure. Returns "queued" (a retry after full-jitter backoff),
        "dead" (out of attempts, or retry=False), or None for a stale lease. The
        error keeps its first MAX_ERROR_CHARS characters; text UTF-8 cannot encode
        (a lone surrogate) is kept as a backslash escape."""
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a string, got {type(error).__name__}")
        with self._tx():
            return self._fail(job, error, retry=retry, now=self.clock())

    def _fail(self, job: Job, error: str, *, retry: bool, now: float) -> Literal["queued", "dead"] | None:
        """FAIL inside the caller's transaction."""
        params = {
            "final": not retry,
            "retry_at": now + self.backoff_delay(job.attempts),
            "now": now,
            "error": error[:MAX_ERROR_CHARS].encode("utf-8", "backslashreplace").decode("utf-8"),
            "id": job.id,
            "token": job.lease_token,
        }
        row = self._hot.execute(sql.FAIL, params).fetchone()
        return None if row is None else row[0]

    def backoff_delay(self, attempts: int) -> float:
        """Full jitter: a uniform pick between 0 and a ceiling that doubles per attempt,
        up to backoff_cap. The doubling stops at the cap: 2 ** attempts is never
        computed past it, so any attempt number works."""
        return self.rng() * backoff_ceiling(attempts, self.backoff_base, self.backoff_cap)

    # -- the worker loop's fast path -----------------------------------------------
    # Same rules as claim() and complete(), fewer round trips: one write transaction
    # per job instead of two, the retire folded into the claim, and an idle worker
    # that looks with a read instead of taking the write lock.

    def any_ready(self, queues: Sequence[str] | None = None) -> bool:
        """Whether a claim would find something now: a job to run (in `queues`, None for
        every queue), or an expired lease on a last attempt to retire. One read and no
        write lock, so producers and busy workers carry on while an idle worker looks."""
        return self._ready(*_scope(queues))

    def _ready(self, scope: str, where: dict[str, str]) -> bool:
        return bool(self._hot.execute(sql.READY_PROBE_IN[scope], {"now": self.clock(), **where}).fetchall())

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """When the next live job (in `queues`, None for every queue) is due by the clock:
        a delayed job's start, a retry's backoff, a lease's end (None when nothing is
        queued or running). An idle worker waits no longer than this."""
        scope, where = _scope(queues)
        return self._hot.execute(sql.NEXT_DUE_IN[scope], where).fetchone()[0]

    def listen(self) -> bool:
        """Start listening for producers' hints (a worker calls it once, before its first
        idle wait). True if hints can reach this queue; False means wait_for_jobs() only
        sleeps: wake=False, no Unix datagram sockets, or no private folder for them."""
        if self._waiter is None:
            self._waiter = wakeup.Waiter(self.path if self.wake else "").open()
        return self._waiter.active

    def wait_for_jobs(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a producer's hint that a job was enqueued.
        True if one came. Where hints cannot come (see listen()) it sleeps the timeout.
        A hint is never the truth: look (any_ready) and claim after it, as after a poll."""
        self.listen()
        assert self._waiter is not None
        return self._waiter.wait(timeout)

    def interrupt_wait(self) -> None:
        """End a wait_for_jobs() in progress early (a stop signal's handler calls it)."""
        if self._waiter is not None:
            self._waiter.poke()

    def claim_next(self, worker: str, *, queues: Sequence[str] | None = None) -> Job | None:
        """Lease the next ready job to `worker`, or return None. The same rules as
        claim(worker): oldest first, attempts counted, and jobs whose lease ran out on
        their last attempt retired as dead, all in one statement. An unreadable row
        is dead-lettered, as claim() does, and the next ready job is claimed instead."""
        self._check_worker(worker)
        with self._tx():
            return self._claim_next(worker, queues)

    def complete_and_claim(
        self, job: Job, worker: str, effect: Effect | None = None, *, queues: Sequence[str] | None = None
    ) -> tuple[bool, Job | None]:
        """complete(job, effect), then claim_next(worker), in one write transaction.

        Returns (accepted, next job or None). The fence, the effect and its rollback
        are complete()'s: a stale lease returns False without running the effect and
        still claims; an effect that raises rolls back the completion and the claim
        together, and the exception propagates with the job still leased to us."""
        self._check_worker(worker)
        with self._tx():
            accepted = self._hot.execute(sql.COMPLETE, (self.clock(), job.id, job.lease_token)).rowcount == 1
            if accepted and effect is not None:
                self._run_effect(job, effect)
            return accepted, self._claim_next(worker, queues)

    def _claim_next(self, worker: str, queues: Sequence[str] | None = None) -> Job | None:
        """CLAIM_NEXT inside the caller's transaction: the claimed job, if any (retired
        rows are dropped). An unreadable row is dead-lettered and the next one claimed."""
        scope, where = _scope(queues)
        while True:
            now = self.clock()
            params = {
                "now": now,
                "lease_end": now + self.lease_seconds,
                "token": new_token(),
                "worker": worker,
                "limit": 1,
                "reason": sql.LAST_ATTEMPT_EXPIRED,
                **where,
            }
            for row in self._claimed(sql.CLAIM_NEXT_IN[scope], params):
                if row[7] == "running":
                    break
            else:
                return None
            job = self._job(row, now)
            if job is not None:
                return job

    def heartbeat(self, job: Job) -> bool:
        """Move the lease deadline to clock() + lease_seconds. Returns False, changing
        nothing, once our token no longer matches a running job."""
        with self._tx() as db:
            cur = db.execute(sql.HEARTBEAT, (self.clock() + self.lease_seconds, job.id, job.lease_token))
        return cur.rowcount == 1

    # -- group commit: a batch per write transaction -------------------------------
    # The worker's path: claim a batch, run it, then report every job of it and claim
    # the next batch in one write transaction. Each job keeps its own rules: its
    # completion is fenced by its token, its effect commits with its completion or not
    # at all (a savepoint per job), its failure is retried or dead-lettered. What the
    # batch shares is the transaction, so one commit serves many jobs.

    def claim_batch(self, worker: str, limit: int, *, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, oldest first, after a read has shown
        that something is ready (an empty queue costs no write lock). A job handed out
        before (attempts > 0: its worker may have crashed on it) comes alone, so a job
        that kills its worker cannot take a batch of others down with it twice."""
        limit = validate.claim_limit(limit)
        self._check_worker(worker)
        scope, where = _scope(queues)
        if not self._ready(scope, where):
            return []
        with self._tx():
            return self._claim_batch(worker, limit, scope, where)

    def settle(
        self,
        finished: Sequence[Finished],
        *,
        claim_for: str | None = None,
        limit: int = 1,
        queues: Sequence[str] | None = None,
    ) -> tuple[list[str], list[Job]]:
        """Report every job in `finished` in one write transaction and, when `claim_for`
        names a worker, claim its next batch of up to `limit` jobs in the same one.

        Returns each job's outcome ("done", "queued", "dead", "cancelled" for a job
        cancelled while it ran, or "lost" for a job whose lease was no longer ours) and
        the jobs claimed (from `queues`, None for every queue). A stale token rejects that job
        only; an effect that raises rolls back that job's completion only (a savepoint)
        and fails it with the error, while the rest of the batch still commits. An
        effect that tries to end the transaction raises EffectEndedTransaction and
        nothing of the batch is saved, as complete() does."""
        if claim_for is not None:
            limit = validate.claim_limit(limit)
            self._check_worker(claim_for)
            scope, where = _scope(queues)
        outcomes: list[str] = []
        with self._tx():
            now = self.clock()
            for report in finished:
                outcomes.append(self._settle_one(report, now))
            jobs = [] if claim_for is None else self._claim_batch(claim_for, limit, scope, where)
        return outcomes, jobs

    def extend(self, jobs: Sequence[Job]) -> list[Job]:
        """Heartbeat several jobs in one write transaction: each lease still ours runs to
        clock() + lease_seconds. Returns those jobs with their new deadline; a job missing
        from the result has been taken over and must not be run or reported."""
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

    def _claim_batch(self, worker: str, limit: int, scope: str, where: dict[str, str]) -> list[Job]:
        """The batch claim inside the caller's transaction, from the queues `scope` and
        `where` name (_scope()): read the attempts of the next ready jobs, then lease the
        leading run never handed out (or one job handed out before) with CLAIM_NEXT, which
        also retires leases that ran out on a last attempt. Unreadable rows are
        dead-lettered and left out, as claim() does."""
        now = self.clock()
        size = 1
        if limit > 1:
            look = {"now": now, "limit": limit, **where}
            attempts = [row[0] for row in self._hot.execute(sql.READY_ATTEMPTS_IN[scope], look)]
            size = max(1, batch_size(attempts))
        params = {
            "now": now,
            "lease_end": now + self.lease_seconds,
            "token": new_token(),
            "worker": worker,
            "limit": size,
            "reason": sql.LAST_ATTEMPT_EXPIRED,
            **where,
        }
        rows = [row for row in self._claimed(sql.CLAIM_NEXT_IN[scope], params) if row[7] == "running"]
        jobs = [job for job in (self._job(row, now) for row in rows) if job is not None]
        return sorted(jobs, key=lambda job: job.id)

    def _settle_one(self, report: Finished, now: float) -> str:
        job = report.job
        if report.error is not None:
            return self._fail(job, report.error, retry=report.retry, now=now) or self._why_lost(job)
        if report.effect is None:
            accepted = self._hot.execute(sql.COMPLETE, (now, job.id, job.lease_token)).rowcount == 1
            return "done" if accepted else self._why_lost(job)
        self._hot.execute("SAVEPOINT job")
        try:
            if self._hot.execute(sql.COMPLETE, (now, job.id, job.lease_token)).rowcount != 1:
                return self._why_lost(job)
            self._run_effect(job, report.effect)
            return "done"
        except EffectEndedTransaction:
            raise  # the transaction itself is in question: the whole batch rolls back
        except Exception as exc:  # this job's completion and effect are undone, no other job's
            self._hot.execute("ROLLBACK TO job")
            return self._fail(job, f"{type(exc).__name__}: {exc}", retry=True, now=now) or self._why_lost(job)
        finally:
            if self.db.in_transaction:
                self._hot.execute("RELEASE job")

    def _why_lost(self, job: Job) -> str:
        """A report refused by the fence: "cancelled" if the job was cancelled, else "lost"
        (another worker holds it now, or it was retired). Read on the rare path only."""
        row = self._hot.execute(sql.JOB_STATE, (job.id,)).fetchone()
        return "cancelled" if row is not None and row[0] == "cancelled" else "lost"

    # -- operating --------------------------------------------------------------

    def cancel(self, job_id: int) -> str:
        """Cancel job `job_id` and return the state it was cancelled in. "queued": it will
        never run. "running": its lease is void, so its worker's next heartbeat, completion
        or failure is refused (a late completion's effect never commits) and the worker can
        see the job's state is "cancelled". A finished job (done, dead, or cancelled
        already) raises CannotCancel and nothing changes; an unknown id JobNotFound."""
        validate.job_id(job_id)
        with self._tx() as db:
            row = db.execute(sql.JOB_STATE, (job_id,)).fetchone()
            if row is None:
                raise JobNotFound(f"no job has id {job_id}: nothing was cancelled")
            state = row[0]
            if state not in ("queued", "running"):
                raise CannotCancel(
                    f"job {job_id} is {state} already: only a queued or running job can be cancelled"
                )
            db.execute(sql.CANCEL, {"now": self.clock(), "id": job_id})
        return state

    def every(
        self,
        kind: str,
        seconds: float,
        payload: Any = None,
        *,
        name: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int | None = None,
    ) -> int | None:
        """One tick of a periodic schedule: enqueue this period's job unless it exists.

        Periods are the clock's multiples of `seconds` (a 60 s schedule's periods start
        on the minute). The job carries the dedupe key "every:<name>:<period start>", so
        however many schedulers tick at once, each period gets exactly one job; call it
        as often as you like. Returns the new job's id, or None if this period's job was
        enqueued already. Missed periods are skipped: after downtime the current period
        runs once, the ones that passed do not run. `name` (default: kind) tells two
        schedules of one kind apart."""
        key = every_key(kind, seconds, name, self.clock())
        return self.enqueue(
            kind, payload, dedupe_key=key, priority=priority, queue=queue, max_attempts=max_attempts
        )

    def purge(
        self,
        older_than: float,
        *,
        states: str | Iterable[str] = ("done",),
        batch: int = 1000,
        archive: bool = False,
    ) -> Purged:
        """Remove finished jobs (`states`: done by default; dead and cancelled only when
        named) that finished at least `older_than` seconds ago, and return what was done.

        The table is walked by id in windows of `batch` rows, each window its own short
        write transaction, so producers and workers wait at most one window's work.
        (`longest_hold_s` is measured around BEGIN ... COMMIT, so it also counts the WAL
        checkpoint a COMMIT sometimes runs; that runs after the write lock is released.)
        Queued and running jobs are never removed, nor is the newest row (ids are never
        handed out twice). With `archive`, each removed row is first copied to the
        jobs_archive table in the same transaction. Freed pages stay in the file for
        new jobs; reclaim_space() hands them back to the file system."""
        older_than, chosen, batch = purge_settings(older_than, states, batch, archive)
        first, last = self.db.execute(sql.ID_RANGE).fetchone()
        params = {"states": json.dumps(chosen), "before": self.clock() - older_than}

        def next_job(after: int) -> tuple[int, float] | None:
            return self.db.execute(sql.CREATED_FROM, (after,)).fetchone()

        def window(after: int, size: int) -> tuple[int, int]:
            where = {**params, "after": after, "batch": size, "now": self.clock()}
            with self._tx() as db:
                copied = db.execute(sql.PURGE_ARCHIVE, where).rowcount if archive else 0
                return db.execute(sql.PURGE, where).rowcount, copied

        return walk_purge(first, last, batch, params["before"], next_job, window)

    def space(self) -> dict[str, int]:
        """The file's pages: in use, free (kept for new rows), their size in bytes, and
        whether freed pages can be handed back (auto_vacuum 2 is INCREMENTAL)."""
        read = lambda statement: self.db.execute(statement).fetchone()[0]  # noqa: E731
        return {
            "page_count": read(sql.PAGE_COUNT),
            "freelist_count": read(sql.FREELIST),
            "page_size": read(sql.PAGE_SIZE),
            "auto_vacuum": read(sql.AUTO_VACUUM),
        }

    def reclaim_space(self, pages: int | None = None) -> int:
        """Hand free pages back to the file system (all of them, or `pages`), so the file
        shrinks; returns how many were freed. Works on files labqueue created (auto_vacuum
        INCREMENTAL); on an older file it frees nothing until vacuum() has run once."""
        if pages is not None:
            pages = validate.whole("pages", pages, low=1)
        before = self.space()
        if before["auto_vacuum"] != 2 or not before["freelist_count"]:
            return 0
        # A PRAGMA takes no parameters; the count was checked as a whole number. It frees one
        # page per step and returns no rows, so Python's execute() would step it once: a
        # script runs it to the end (in autocommit, as this connection is between writes).
        count = "" if pages is None else f"({int(pages)})"
        self._retry_busy(lambda: self.db.executescript(f"PRAGMA incremental_vacuum{count};"))
        return before["freelist_count"] - self.space()["freelist_count"]

    def vacuum(self) -> None:
        """Rebuild the whole file (SQLite's VACUUM), switching it to auto_vacuum INCREMENTAL
        on the way. It holds the write lock for the whole rebuild and needs free disk space
        for a copy: run it when the queue is quiet. Afterwards reclaim_space() works."""
        self.db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        try:
            self._retry_busy(lambda: self.db.execute("VACUUM"))
        except sqlite3.OperationalError as exc:
            self._raise_translated(exc)

    def requeue_dead(self, ids: Sequence[int] | None = None) -> list[int]:
        """Put dead jobs (all of them, or those in `ids`) back in the queue, attempts reset to 0.
        Returns the ids requeued, sorted. An empty `ids` requeues nothing."""
        if ids is None:
            statement, params = sql.REQUEUE_DEAD, (self.clock(),)
        else:
            statement, params = sql.REQUEUE_DEAD_IDS, (self.clock(), json.dumps(validate.job_ids(ids)))
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

    def queue_stats(self) -> dict[str, dict[str, float | int]]:
        """stats() per named queue (live rows only): queued, running, ready_now and
        oldest_ready_age_s. A queue with no live job is not listed."""
        now = self.clock()
        return {
            row["queue"]: {
                "queued": row["queued"],
                "running": row["running"],
                "ready_now": row["ready_now"],
                "oldest_ready_age_s": round(now - row["oldest"], 1) if row["oldest"] is not None else 0.0,
            }
            for row in self.db.execute(sql.STATS_BY_QUEUE, (now, now))
        }

    # -- reading jobs back --------------------------------------------------------

    def job(self, job_id: int) -> JobRecord | None:
        """The stored row of job `job_id`, or None if there is none."""
        validate.job_id(job_id)
        with self._lenient_text():
            row = self.db.execute(sql.JOB, (job_id,)).fetchone()
        return None if row is None else _record(row)

    def jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
    ) -> list[JobRecord]:
        """Stored rows in id order, filtered by state (one or several), kind and queue.
        Reads the whole table when unfiltered: for people and tests, not the hot path."""
        states = validate.states(state)
        if kind is not None:
            validate.kind(kind)
        if queue is not None:
            validate.queue_name(queue)
        if limit is not None:
            validate.read_limit(limit)
        params = {
            "states": None if states is None else json.dumps(states),
            "kind": kind,
            "queue": queue,
            "limit": -1 if limit is None else limit,
        }
        with self._lenient_text():
            return [_record(row) for row in self.db.execute(sql.JOBS, params)]

    @contextmanager
    def _lenient_text(self) -> Iterator[None]:
        """Read any row, even one whose text another program stored as invalid UTF-8
        (its bad bytes shown as escapes): rows read back are for people to look at."""
        self.db.text_factory = _lenient_text
        try:
            yield
        finally:
            self.db.text_factory = str

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state (every state listed, zeros included). Counts
        the whole table: stats() is the cheap reading for a dashboard."""
        found = {row["state"]: row["n"] for row in self.db.execute(sql.COUNTS)}
        return {state: found.get(state, 0) for state in STATES}

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.close()
        self.db.close()

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JobQueue({str(self.path)!r}, lease_seconds={self.lease_seconds})"

    # -- operating a fleet (issue 23) ---------------------------------------------

    def put_back(self, jobs: Sequence[Job], delay: float, note: str) -> int:
        """Give back claimed jobs this worker cannot run (no handler for their kind):
        queued again with the claim's attempt returned, hidden for `delay` seconds so no
        worker claims them in a tight loop, and `note` in last_error saying why. Fenced
        like release(). Returns how many were still ours."""
        delay = validate.positive("delay", delay, allow_zero=True)
        note = validate.text("note", note)[:MAX_ERROR_CHARS]
        put = 0
        with self._tx():
            now = self.clock()
            for job in jobs:
                params = {"now": now, "delay": delay, "note": note, "id": job.id, "token": job.lease_token}
                put += self._hot.execute(sql.PUT_BACK, params).rowcount
        return put

    def note_crash(self, worker: str, message: str) -> list[int]:
        """Write `message` into last_error of every job still running under `worker`'s
        name (a supervisor's note that the process died holding them), and return their
        ids. Leases are untouched: each job goes to another worker when its lease ends."""
        validate.text("worker", worker)
        message = validate.text("message", message)[:MAX_ERROR_CHARS]
        with self._tx() as db:
            rows = db.execute(sql.NOTE_CRASH, {"worker": worker, "message": message}).fetchall()
        return sorted(row[0] for row in rows)

    def finished_within(self, seconds: float) -> dict[str, dict[str, int]]:
        """How many jobs finished in the last `seconds` by the queue's clock, per named
        queue and final state (done, dead, cancelled). Reads the whole table (there is no
        index on finished_at): for a metrics scrape, not the hot path."""
        seconds = validate.positive("seconds", seconds)
        found: dict[str, dict[str, int]] = {}
        for row in self.db.execute(sql.FINISHED_WITHIN, {"now": self.clock(), "window": seconds}):
            found.setdefault(row[0], {})[row[1]] = row[2]
        return found

    def latest_jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
    ) -> list[JobRecord]:
        """jobs(), newest first: the last `limit` rows matching the filters."""
        states = validate.states(state)
        if kind is not None:
            validate.kind(kind)
        if queue is not None:
            validate.queue_name(queue)
        if limit is not None:
            validate.read_limit(limit)
        params = {
            "states": None if states is None else json.dumps(states),
            "kind": kind,
            "queue": queue,
            "limit": -1 if limit is None else limit,
        }
        with self._lenient_text():
            return [_record(row) for row in self.db.execute(sql.LATEST_JOBS, params)]


def backoff_ceiling(attempts: int, base: float, cap: float) -> float:
    """The full-jitter ceiling after `attempts`: base doubled per attempt, at most cap. The
    doubling stops at the cap, so 2 ** attempts is never computed past it."""
    doublings = attempts - 1
    if doublings >= math.log2(cap) - math.log2(base):
        return cap
    return min(cap, math.ldexp(base, max(doublings, -1100)))  # below the cap: ldexp cannot overflow


def purge_settings(
    older_than: object, states: object, batch: object, archive: object
) -> tuple[float, list[str], int]:
    """purge()'s arguments checked, for both backends: the age, the states, the window."""
    older_than = validate.positive("older_than", older_than, allow_zero=True)
    chosen = validate.finished_states(states)
    batch = validate.whole("batch", batch, low=1, high=MAX_CLAIM_LIMIT * 10, why="rows per transaction")
    if not isinstance(archive, bool):
        raise InvalidArgument(f"archive must be True or False, got {archive!r}")
    return older_than, chosen, batch


def walk_purge(
    first: int | None,
    last: int | None,
    batch: int,
    before: float,
    next_job: Callable[[int], tuple[int, float] | None],
    window: Callable[[int, int], tuple[int, int]],
) -> Purged:
    """purge()'s walk, for both backends: ids from `first` up to (not including) `last`, the
    newest, in windows of `batch` ids, each one `window(after, size)` -> (removed, archived)
    in its own transaction. Gaps are jumped (`next_job(after)`: the next id and its
    created_at), and the walk stops at a job created after `before`: it cannot have
    finished before it (ids follow creation, near enough; a job missed is purged next time)."""
    removed = archived = batches = 0
    longest = 0.0
    after = (first or 0) - 1
    while last is not None and after + 1 < last:
        nxt = next_job(after)
        if nxt is None or nxt[1] > before:
            break
        after = max(after, nxt[0] - 1)
        size = min(batch, last - 1 - after)
        began = time.monotonic()
        gone, copied = window(after, size)
        longest = max(longest, time.monotonic() - began)
        removed, archived, batches = removed + gone, archived + copied, batches + 1
        after += size
    return Purged(removed, archived, batches, longest)


def period_start(now: float, seconds: float) -> float:
    """The start of the period of length `seconds` that `now` falls in (multiples of
    `seconds` since the epoch), the same for every process that reads the same clock."""
    return math.floor(now / seconds) * seconds


def every_key(kind: object, seconds: object, name: object, now: float) -> str:
    """every()'s arguments checked, for both backends, and the dedupe key of the period
    that `now` falls in."""
    validate.kind(kind)
    seconds = validate.positive("seconds", seconds)
    label = validate.text("name", kind if name is None else name)
    return period_key(label, period_start(now, seconds))


def period_key(name: str, start: float) -> str:
    """The dedupe key of a schedule's period: "every:<name>:<start>", the start in whole
    seconds when it is whole (as it is for whole-second periods)."""
    start = float(start)
    return f"every:{name}:{int(start) if start.is_integer() else repr(start)}"


def _scope(queues: Sequence[str] | None) -> tuple[str, dict[str, str]]:
    """Which claim statement serves `queues`, and its parameter: every queue, one named
    queue or several (through jobs_queue_ready), the default queue alone or among others
    (through jobs_ready); see sql.SCOPES."""
    names = validate.queue_names(queues)
    if names is None:
        return "all", {}
    if names == [DEFAULT_QUEUE]:
        return "default", {}
    if len(names) == 1:
        return "one", {"queue": names[0]}
    return ("some_default" if DEFAULT_QUEUE in names else "some"), {"queues": json.dumps(names)}


def run_migration(db: sqlite3.Connection, step: str) -> None:
    """One step of sql.MIGRATIONS inside the caller's transaction (or on a scratch
    connection, for the expected shape of a version)."""
    if step == "rebuild_jobs_v2":
        _rebuild_jobs_v2(db)
        return
    for statement in _statements(step):
        db.execute(statement)


def _rebuild_jobs_v2(db: sqlite3.Connection) -> None:
    """Version 1 to 2: a new jobs table with priority, queue and the 'cancelled' state,
    every row copied, then swapped in. A column another program added to the table
    (allowed if it may be NULL or has a default) is carried over with its data."""
    known = {name.strip() for name in sql.V1_COLUMNS.split(",")}
    extra = [row for row in db.execute(sql.TABLE_INFO) if row[1] not in known]
    extra_sql = "".join(
        f',\n    "{name}" {kind or ""}{" NOT NULL" if notnull else ""}'
        + ("" if default is None else f" DEFAULT {default}")
        for _, name, kind, notnull, default, _pk in extra
    )
    copied = sql.V1_COLUMNS + "".join(f', "{row[1]}"' for row in extra)
    # Column names come from the file's own schema, quoted; no value is formatted in.
    db.execute(sql.TABLE_TEMPLATE.format(name="jobs_v2", extra=extra_sql))
    db.execute(f"INSERT INTO jobs_v2 ({copied}) SELECT {copied} FROM jobs")
    for statement in _statements(sql.V2_SWAP):
        db.execute(statement)


def _versioned(db: sqlite3.Connection, version: int, *, unversioned: int = 1) -> int:
    """The schema version a file's jobs table has. A file without a version number
    (user_version 0) is a queue made before versions existed (version 1's shape), or one
    whose tables were made from sql.SCHEMA by hand (the course does), which is current."""
    if version:
        return version
    columns = {row[1] for row in db.execute(sql.TABLE_INFO)}
    return sql.SCHEMA_VERSION if "queue" in columns else (unversioned if columns else 0)


def batch_size(attempts: Sequence[int]) -> int:
    """How many of the next ready jobs (their attempts, in claim order) one batch takes:
    one job handed out before alone, else the leading run of jobs never handed out."""
    if not attempts:
        return 0
    if attempts[0] > 0:
        return 1
    run = 0
    for n in attempts:
        if n > 0:
            break
        run += 1
    return run


def _record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(**{name: row[name] for name in sql.COLUMNS})


# The argument checks live in labqueue.validate; these names stay for the modules
# that imported them from here (keepalive, the PostgreSQL queue).
_positive = validate.positive
_attempts = validate.attempts
_kind = validate.kind
_whole_id = validate.job_id
_states = validate.states

class _EffectGuard:
    """The connection's SQLite authorizer. While an effect runs, a statement that would
    begin, commit or roll back a transaction is denied as SQLite prepares it (savepoints
    are allowed: they nest inside our transaction).

    SQLite asks only when it prepares a statement, and sqlite3 caches prepared
    statements by their text. labqueue's own BEGIN, COMMIT and ROLLBACK have texts of
    their own, so an effect's "COMMIT" is never one of ours from the cache; and when
    anyone else prepares a transaction statement on this connection (`stale`), the next
    effect first re-installs the authorizer, which makes SQLite prepare every statement
    afresh, so that cached one is asked about too."""

    __slots__ = ("active", "ours", "refused", "stale")

    def __init__(self) -> None:
        self.active = False
        self.ours = False
        self.refused = False
        self.stale = False

    def __call__(self, action: int, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION:
            if self.active:
                self.refused = True
                return sqlite3.SQLITE_DENY
            if not self.ours:
                self.stale = True
        return sqlite3.SQLITE_OK


def _effect_message(job: Job) -> str:
    return (
        f"the effect of job {job.id} ({job.kind!r}) tried to begin, commit or roll back a "
        "transaction itself (COMMIT, ROLLBACK, BEGIN, executescript() or db.commit()): labqueue "
        "commits an effect's writes together with the job's done state, so the completion and "
        "the effect's writes were rolled back and the job is still leased"
    )


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc)
    return "locked" in message or "busy" in message


class _Unreadable:
    """A stored value that could not be decoded as text, standing in for it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _raw_text(value: bytes | None, stored_as: str) -> str | bytes | _Unreadable | None:
    """A column read as bytes: its text if it is valid UTF-8 text, else what it is."""
    if stored_as == "blob":
        return value
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Unreadable(f"stored as text that is not valid UTF-8 ({exc.reason} at byte {exc.start})")


def _unreadable(kind: object, payload: object) -> str:
    """Why a claimed row cannot become a Job."""
    if isinstance(kind, _Unreadable):
        return f"its kind is {kind.reason}"
    if type(kind) is not str:
        return f"its kind is stored as {type(kind).__name__} {kind!r:.80}, not text"
    if isinstance(payload, _Unreadable):
        return f"its payload is {payload.reason}"
    if isinstance(payload, bytes):
        return f"its payload is stored as a BLOB ({len(payload)} bytes), not JSON text"
    if type(payload) is not str:
        return f"its payload is stored as {type(payload).__name__} {payload!r:.80}, not JSON text"
    try:
        json.loads(payload)
    except RecursionError:
        return "its payload is JSON nested too deeply for Python to decode"
    except ValueError as exc:
        return f"its payload is not valid JSON ({exc}): {payload[:80]!r}"
    return "its payload cannot be decoded"


def _to_json(payload: Any) -> str:
    """The payload as JSON text that json.loads() turns back into the same value (tuples
    become lists), or PayloadNotSerializable saying why not."""
    try:
        body = json.dumps(payload, allow_nan=False)
    except RecursionError:
        raise PayloadNotSerializable(
            f"payload is nested deeper than MAX_PAYLOAD_DEPTH = {MAX_PAYLOAD_DEPTH} levels "
            "(or contains itself)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise PayloadNotSerializable(f"payload is not JSON-serialisable: {exc}") from None
    if body.count("[") + body.count("{") > MAX_PAYLOAD_DEPTH:  # cheap: most payloads stop here
        _check_depth(payload)
    if "{" in body and not _string_keys_only(payload):  # only dicts have keys
        problem = _key_problem(payload)
        if problem:
            raise PayloadNotSerializable(problem)
    return body


def _string_keys_only(value: Any) -> bool:
    """The fast check (nesting is bounded by now): every dict key is exactly a str."""
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) in _CONTAINERS and not _string_keys_only(item):
                return False
    elif type(value) in (list, tuple):
        for item in value:
            if type(item) in _CONTAINERS and not _string_keys_only(item):
                return False
    return True


_CONTAINERS = (dict, list, tuple)


def _check_depth(payload: Any) -> None:
    stack = [(payload, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list, tuple)):
            depth += 1
            if depth > MAX_PAYLOAD_DEPTH:
                raise PayloadNotSerializable(
                    f"payload is nested deeper than MAX_PAYLOAD_DEPTH = {MAX_PAYLOAD_DEPTH} levels"
                )
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth) for item in items)


def _key_problem(payload: Any) -> str | None:
    """The first dict key JSON would change (any key that is not a string), or None."""
    stack = [(payload, "payload")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    as_json = next(iter(json.loads(json.dumps({key: 0}))))
                    clash = as_json in value
                    return (
                        f"{where} has the {type(key).__name__} key {key!r}: JSON stores every key as a "
                        f"string, so it would come back as {as_json!r}"
                        + (f" and collide with the key {as_json!r} already there" if clash else "")
                        + "; use string keys"
                    )
                stack.append((item, f"{where}[{key!r}]"))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None


def _statements(script: str) -> list[str]:
    """A script split into its statements (sqlite3 runs one per execute())."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


def _check_is_sqlite_file(path: Path) -> None:
    """Refuse anything that is not an SQLite file (or nothing yet) before connecting,
    so a wrong path is never touched, let alone turned into a database."""
    if path.is_dir():
        raise NotADatabase(f"{path} is a directory, not an SQLite database file")
    if path.exists() and path.stat().st_size > 0:
        try:
            with path.open("rb") as f:
                header = f.read(len(SQLITE_HEADER))
        except PermissionError as exc:
            raise CannotOpen(f"{path} cannot be read by this user ({exc.strerror}); not touched") from exc
        if header != SQLITE_HEADER:
            raise NotADatabase(f"{path} is not an SQLite database (its header is {header[:16]!r})")


def _check_writable(path: Path) -> None:
    """Say, before connecting, which file or folder this user cannot write: SQLite would
    open a read-only file without a word and fail at the first write."""
    folder = path.parent
    if not folder.is_dir():
        raise CannotOpen(f"cannot open or create {path}: its folder {folder} does not exist")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise CannotOpen(
            f"{path} is read-only for this user: the queue writes to its file "
            "(give this user write permission, or open a copy); nothing was changed"
        )
    sides = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    for side in sides:
        if side.exists() and not os.access(side, os.R_OK | os.W_OK):
            raise CannotOpen(
                f"{side} is read-only for this user: SQLite writes {path.name}'s write-ahead log "
                "there (give this user write permission on it); nothing was changed"
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        if not path.exists():
            raise CannotOpen(f"cannot create {path}: its folder {folder} is read-only for this user")
        if not all(side.exists() for side in sides):
            raise CannotOpen(
                f"the folder {folder} is read-only for this user: in WAL mode SQLite must create "
                f"{sides[0].name} and {sides[1].name} beside {path.name}; nothing was changed"
            )


@dataclass(frozen=True)
class _Shape:
    columns: dict[str, tuple]
    unique: frozenset[tuple[str, int]]
    checks: tuple[str, ...]


def _shape(db: sqlite3.Connection, create_sql: str) -> _Shape:
    columns = {row[0]: tuple(row[1:]) for row in db.execute(sql.TABLE_SHAPE)}
    unique = frozenset((row[0], row[1]) for row in db.execute(sql.UNIQUE_KEYS))
    return _Shape(columns, unique, _checks(create_sql or ""))


@functools.cache
def _expected_shape(version: int) -> _Shape:
    """The jobs table of schema `version`, as its migrations build it (in memory)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for step in sql.MIGRATIONS[:version]:
            run_migration(db, step)
        return _shape(db, db.execute(sql.JOBS_OBJECT).fetchone()[1])
    finally:
        db.close()


def _checks(create_sql: str) -> tuple[str, ...]:
    """The CHECK constraints of a CREATE TABLE statement, whitespace normalised."""
    text = " ".join(create_sql.split())
    lower = text.lower()
    found, i = [], 0
    while (i := lower.find("check", i)) != -1:
        start = i + len("check")
        inside_a_name = i > 0 and (lower[i - 1].isalnum() or lower[i - 1] == "_")
        if inside_a_name or not lower[start:].lstrip().startswith("("):
            i = start
            continue
        j = lower.index("(", start)
        depth, k = 0, j
        for k in range(j, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                break
        found.append(text[j : k + 1].replace("( ", "(").replace(" )", ")"))
        i = k
    return tuple(sorted(found))


def _column_text(spec: tuple) -> str:
    kind, notnull, default, pk = spec
    parts = [kind or "(no type)"] + ["NOT NULL"] * bool(notnull)
    parts += [f"DEFAULT {default}"] * (default is not None) + ["PRIMARY KEY"] * bool(pk)
    return " ".join(parts)


def _check_jobs_table(db: sqlite3.Connection, path: Path, found: tuple, version: int) -> None:
    """Refuse a jobs table that is not labqueue's (of this schema version): reads only."""
    kind, create_sql = found
    if kind != "table":
        raise ForeignJobsTable(f"{path} already has a {kind} named 'jobs', not labqueue's table")
    have, want = _shape(db, create_sql), _expected_shape(version)
    missing = [name for name in want.columns if name not in have.columns]
    if missing:
        raise ForeignJobsTable(
            f"{path} already has a 'jobs' table that is not labqueue's "
            f"(missing columns: {', '.join(missing)})"
        )
    problems = [
        f"column {name} is {_column_text(have.columns[name])}, labqueue's is {_column_text(spec)}"
        for name, spec in want.columns.items()
        if have.columns[name] != spec
    ]
    problems += [
        f"its extra column {name} is NOT NULL without a default, so labqueue could not add a job"
        for name, (_, notnull, default, pk) in have.columns.items()
        if name not in want.columns and notnull and default is None and not pk
    ]
    if have.unique != want.unique:
        shown = ", ".join(sorted(f"UNIQUE ({cols})" for cols, _ in have.unique)) or "none"
        problems.append(f"its unique keys are {shown}, labqueue's table has UNIQUE (dedupe_key) only")
    if have.checks != want.checks:
        problems.append(
            f"its CHECK constraints are {list(have.checks) or 'none'}, labqueue's are {list(want.checks)}"
        )
    if problems:
        raise ForeignJobsTable(
            f"{path} already has a 'jobs' table that is not labqueue's ({'; '.join(problems)}); "
            "it was not changed"
        )
