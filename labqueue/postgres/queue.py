"""The same queue on PostgreSQL: JobQueue's API, rules and errors, for workers on several machines.

Each queue lives in its own schema (`schema=`, default "labqueue"): a table `jobs` with
the same columns, states, CHECK and partial indexes as on SQLite. The connection's
search_path is that schema, so an effect's SQL names its tables without a prefix, and
two queues (or two tests) on one server never see each other's jobs.
"""

from __future__ import annotations

import json
import random
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from .. import validate
from ..errors import (
    CannotCancel,
    CannotOpen,
    ForeignJobsTable,
    InvalidArgument,
    JobNotFound,
    LabqueueError,
    PayloadNotSerializable,
    QueueBusy,
    StorageFull,
)
from ..queue import (
    MAX_ERROR_CHARS,
    STATES,
    Finished,
    Job,
    JobRecord,
    Purged,
    _scope,
    backoff_ceiling,
    every_key,
    purge_settings,
    walk_purge,
)
from . import checks, sql

try:
    from ..errors import EffectEndedTransaction, QueueNotFound
except ImportError:  # labqueue.errors before it named these errors

    class EffectEndedTransaction(LabqueueError):  # type: ignore[no-redef]
        """A completion's effect ended or aborted the transaction it was given."""

    class QueueNotFound(LabqueueError):  # type: ignore[no-redef]
        """create=False, and there is no queue there; nothing was created."""


Clock = Callable[[], float]
Effect = Callable[[psycopg.Connection], Any]

DEFAULT_SCHEMA = "labqueue"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
BIGINT_MAX = 2**63 - 1


class PgJobQueue:
    """The queue in one schema of a PostgreSQL database. Open one per process or thread.

    Deadlines are read from the server's clock (statement_timestamp()), so workers on
    machines whose clocks disagree agree on every lease and retry time. Pass `clock=`
    (a FakeClock) to drive time yourself instead: its reading is sent with every
    statement. As on SQLite, complete, fail and heartbeat check the lease token, never
    the clock: a replaced worker's report is refused however late or early it comes.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lease_seconds: float = 30.0,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
        timeout: float = 30.0,
        create: bool = True,
    ) -> None:
        self.lease_seconds = checks.positive("lease_seconds", lease_seconds)
        self.max_attempts = checks.attempts("max_attempts", max_attempts)
        self.backoff_base = checks.positive("backoff_base", backoff_base)
        self.backoff_cap = checks.positive("backoff_cap", backoff_cap)
        self.timeout = checks.positive("timeout", timeout, allow_zero=True)
        if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
            raise InvalidArgument(
                f"schema must be a lower-case name of letters, digits and _ (at most 63), got {schema!r}"
            )
        if not isinstance(create, bool):
            raise InvalidArgument(f"create must be True or False, got {create!r}")
        self.url = url
        self.schema = schema
        self.clock = clock
        self.rng = rng
        self._listening = False
        try:
            self.db = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise CannotOpen(f"cannot connect to {redact(url)} ({str(exc).strip()})") from exc
        try:
            self._open_schema(create)
        except BaseException:
            self.db.close()
            raise

    def _open_schema(self, create: bool) -> None:
        """Create the schema, table and indexes if missing (one process at a time; with
        create=False refuse instead), refuse a foreign `jobs` table, and point the
        connection's search_path at the schema."""
        name = pg_sql.Identifier(self.schema)
        with self._tx() as db:
            db.execute(sql.LOCK_SCHEMA, {"schema": self.schema})
            columns = {row[0] for row in db.execute(sql.TABLE_COLUMNS, {"schema": self.schema})}
            missing = [c for c in sql.V1_COLUMNS.replace(" ", "").split(",") if c not in columns]
            if columns and missing:
                raise ForeignJobsTable(
                    f"schema {self.schema!r} at {redact(self.url)} already has a 'jobs' table that is "
                    f"not labqueue's (missing columns: {', '.join(missing)})"
                )
            if not columns and not create:
                raise QueueNotFound(
                    f"there is no queue in schema {self.schema!r} at {redact(self.url)}: create=False "
                    "opens an existing queue only, so nothing was created"
                )
            if db.execute(sql.SCHEMA_EXISTS, {"schema": self.schema}).fetchone() is None:
                db.execute(pg_sql.SQL(sql.CREATE_SCHEMA).format(schema=name))  # needs CREATE on the database
            # set_config(..., false): for the whole session, once this transaction commits
            db.execute(sql.SET_SEARCH_PATH, {"path": name.as_string(db)})
            if not columns:
                db.execute(sql.SCHEMA)
            elif "queue" not in columns:  # a queue of schema version 1: upgraded in place
                db.execute(sql.MIGRATE_V2)
        # PostgreSQL reads a lock_timeout of 0 as "wait forever"; SQLite's 0 means "do not wait".
        db.execute(sql.SET_LOCK_TIMEOUT, {"ms": str(max(1, round(self.timeout * 1000)))})

    # -- plumbing -------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """Run the block as one transaction: committed at its end, rolled back on any
        exception (KeyboardInterrupt included), and database errors named as labqueue's."""
        try:
            with self.db.transaction():
                yield self.db
        except psycopg.errors.LockNotAvailable as exc:
            raise QueueBusy(
                f"{redact(self.url)} ({self.schema}): a row or table stayed locked for longer than "
                f"the lock timeout of {self.timeout} s ({str(exc).strip()}); nothing was changed"
            ) from exc
        except pg_errors.DiskFull as exc:
            self._full(exc)

    def _full(self, exc: Exception) -> NoReturn:
        raise StorageFull(f"{redact(self.url)}: {str(exc).strip()}; the transaction was rolled back") from exc

    def _now(self) -> float | None:
        """The `now` parameter: the injected clock's reading, or None for the server's clock."""
        return None if self.clock is None else self.clock()

    def server_time(self) -> float:
        """The server's clock, in seconds since the epoch (what deadlines are compared with)."""
        return self.db.execute(sql.SERVER_NOW).fetchone()[0]

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
        queue: str = validate.DEFAULT_QUEUE,
    ) -> int | None:
        """Add one job, ready after `delay` seconds, and return the new row's id. If a
        job with this dedupe_key is already stored, nothing changes and the result is None.
        A higher `priority` is claimed first; `queue` names the queue it waits in."""
        checks.kind(kind)
        delay = checks.positive("delay", delay, allow_zero=True)
        if max_attempts is not None:
            max_attempts = checks.attempts("max_attempts", max_attempts)
        dedupe_key = checks.optional_text("dedupe_key", dedupe_key)
        params = {
            "kind": kind,
            "payload": checks.to_json(payload),
            "max_attempts": self.max_attempts if max_attempts is None else max_attempts,
            "delay": delay,
            "dedupe_key": dedupe_key,
            "priority": validate.priority(priority),
            "queue": validate.queue_name(queue),
            "now": self._now(),
        }
        with self._tx() as db:
            row = db.execute(sql.ENQUEUE, params).fetchone()
            if row is not None and delay == 0:
                self._notify(db)
        return None if row is None else row[0]

    def enqueue_many(
        self, kind: str, payloads: Iterable[Any], *, priority: int = 0, queue: str = validate.DEFAULT_QUEUE
    ) -> int:
        """Add many jobs in one statement: all of them, or (on any error) none."""
        checks.kind(kind)
        where = {"priority": validate.priority(priority), "queue": validate.queue_name(queue)}
        bodies = []
        for index, payload in enumerate(payloads):
            try:
                bodies.append(checks.to_json(payload))
            except PayloadNotSerializable as exc:
                raise PayloadNotSerializable(f"payload #{index}: {exc}") from None
        params = {"kind": kind, "payloads": bodies, "max_attempts": self.max_attempts, "now": self._now()}
        params |= where
        with self._tx() as db:
            db.execute(sql.ENQUEUE_MANY, params)
            if bodies:
                self._notify(db)
        return len(bodies)

    # -- waking idle workers (LISTEN/NOTIFY) ----------------------------------------
    # A hint, never the only way work is found: producers NOTIFY the queue's channel (its
    # schema's name) in the transaction that adds ready jobs, so the signal arrives when
    # they are committed; an idle worker waits for it instead of sleeping a fixed poll,
    # and still looks after `timeout`, so a lost notification delays a job, never loses it.

    def _notify(self, db: psycopg.Connection) -> None:
        db.execute(sql.NOTIFY, {"channel": self.schema})

    def wake_workers(self) -> int:
        """JobQueue.wake_workers: here every enqueue NOTIFYs in its own transaction already."""
        with self._tx() as db:
            self._notify(db)
        return 1

    def listen(self) -> bool:
        """Start listening for producers' NOTIFY (JobQueue.listen). Always possible here."""
        if not self._listening:
            self.db.execute(pg_sql.SQL(sql.LISTEN).format(channel=pg_sql.Identifier(self.schema)))
            self._listening = True
        return True

    def interrupt_wait(self) -> None:
        """JobQueue.interrupt_wait: a wait here ends within its timeout (a signal handler
        must not use the connection the wait is reading)."""

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until a producer signals ready jobs or `timeout` seconds pass. Returns True
        when signalled; a signal that came while this connection ran other statements
        counts too (psycopg keeps it). The first call starts listening: only connections
        that wait listen, so a producer's connection never piles up notifications."""
        timeout = checks.positive("timeout", timeout, allow_zero=True)
        self.listen()
        heard = self.db.notifies(timeout=timeout, stop_after=1)
        try:
            return next(heard, None) is not None
        finally:
            heard.close()

    # -- consuming --------------------------------------------------------------

    def claim(self, worker: str, *, limit: int = 1, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker` from `queues` (None: every queue),
        highest priority then oldest first, returned sorted by id, in one
        statement (FOR UPDATE SKIP LOCKED: concurrent claimers skip each other's rows).
        Jobs whose lease ran out on their last attempt become dead, and so does a claimed
        row whose payload is not JSON (written behind the queue's back): it is left out."""
        limit = checks.claim_limit(limit)
        checks.text("worker", worker)
        scope, where = _scope(queues)
        with self._tx() as db:
            rows = db.execute(sql.CLAIM_IN[scope], self._claim_params(worker, limit, where)).fetchall()
            jobs = [job for job in (self._readable(db, row) for row in rows) if job is not None]
        return jobs

    def _claim_batch(
        self, db: psycopg.Connection, worker: str, limit: int, scope: str, where: dict[str, str]
    ) -> list[Job]:
        """Group commit's claim inside the caller's transaction, from the queues `scope` and
        `where` name (_scope()): a job handed out before alone, else the leading run of jobs
        never handed out (sql.BATCH_PICK)."""
        rows = db.execute(sql.CLAIM_BATCH_IN[scope], self._claim_params(worker, limit, where)).fetchall()
        return [job for job in (self._readable(db, row) for row in rows) if job is not None]

    def _readable(self, db: psycopg.Connection, row: tuple) -> Job | None:
        """The Job of a claimed row (id, kind, payload, attempts, max_attempts, lease_token,
        visible_at), or None after dead-lettering a row whose payload cannot be decoded:
        no retry can change a stored payload, so that job is never run."""
        try:
            payload = json.loads(row[2])
        except (ValueError, RecursionError) as exc:
            reason = f"unreadable job, not run: its payload is not JSON ({exc}): {row[2][:80]!r}"
            db.execute(sql.BURY, {"now": self._now(), "reason": reason, "id": row[0], "token": row[5]})
            return None
        return Job(row[0], row[1], payload, row[3], row[4], row[5], row[6])

    def _where(self, where: dict[str, str] | None = None) -> dict[str, Any]:
        """The time and the queues (_scope()'s parameters) for a statement: the queues as
        an array parameter here, not JSON text."""
        params: dict[str, Any] = {**(where or {}), "now": self._now()}
        if "queues" in params:
            params["queues"] = json.loads(params["queues"])
        return params

    def _claim_params(self, worker: str, limit: int, where: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            **self._where(where),
            "lease_seconds": self.lease_seconds,
            "token": secrets.token_hex(16),
            "worker": worker,
            "limit": limit,
            "reason": sql.LAST_ATTEMPT_EXPIRED,
        }

    def complete(self, job: Job, effect: Effect | None = None) -> bool:
        """Mark `job` done if this worker still holds its lease (its token, not just the
        state). `effect(conn)` runs only once the fence has passed, inside the completing
        transaction, on this queue's psycopg connection: its writes are saved together
        with the done state or not at all. Returns False, without running the effect,
        for a stale lease."""
        with self._tx() as db:
            if not self._complete(db, job):
                return False
            if effect is not None:
                self._run_effect(db, job, effect)
        return True

    def _run_effect(self, db: psycopg.Connection, job: Job, effect: Effect) -> None:
        """Run the effect, then make sure the transaction is still the open, healthy one it
        was given: PostgreSQL answers COMMIT on an aborted transaction by rolling it back,
        so an effect that swallowed a database error would otherwise lose the completion
        while complete() reported it accepted."""
        effect(db)
        status = db.info.transaction_status
        if status == psycopg.pq.TransactionStatus.INERROR:
            raise EffectEndedTransaction(
                f"the effect of job {job.id} ({job.kind!r}) caught a database error and carried on: "
                "the transaction was aborted, so the completion and the effect's writes were rolled back"
            )
        if status != psycopg.pq.TransactionStatus.INTRANS:
            raise EffectEndedTransaction(
                f"the effect of job {job.id} ({job.kind!r}) ended the transaction itself (COMMIT or "
                "ROLLBACK): an effect must leave committing to the queue; what it had written before "
                "ending it may have been committed with the completion"
            )

    def _complete(self, db: psycopg.Connection, job: Job) -> bool:
        params = {"now": self._now(), "id": job.id, "token": job.lease_token}
        return db.execute(sql.COMPLETE, params).rowcount == 1

    def fail(self, job: Job, error: str, *, retry: bool = True) -> Literal["queued", "dead"] | None:
        """Record a failure. Returns "queued" (a retry after full-jitter backoff),
        "dead" (out of attempts, or retry=False), or None for a stale lease."""
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a string, got {type(error).__name__}")
        with self._tx() as db:
            return self._fail(db, job, error, retry=retry)

    def _fail(
        self, db: psycopg.Connection, job: Job, error: str, *, retry: bool
    ) -> Literal["queued", "dead"] | None:
        """FAIL inside the caller's transaction."""
        params = {
            "final": not retry,
            "delay": self.backoff_delay(job.attempts),
            "now": self._now(),
            # As on SQLite, text UTF-8 cannot encode (a lone surrogate) is kept as an escape;
            # so is NUL, which PostgreSQL's text cannot hold.
            "error": error[:MAX_ERROR_CHARS]
            .encode("utf-8", "backslashreplace")
            .decode("utf-8")
            .replace("\x00", "\\x00"),
            "id": job.id,
            "token": job.lease_token,
        }
        row = db.execute(sql.FAIL, params).fetchone()
        return None if row is None else row[0]

    def backoff_delay(self, attempts: int) -> float:
        """Full jitter: a uniform pick between 0 and a ceiling that doubles per attempt,
        up to backoff_cap (as JobQueue: 2 ** attempts is never computed past the cap, so
        any attempt number works)."""
        return self.rng() * backoff_ceiling(attempts, self.backoff_base, self.backoff_cap)

    def heartbeat(self, job: Job) -> bool:
        """Move the lease deadline to now + lease_seconds. Returns False, changing
        nothing, once our token no longer matches a running job."""
        params = {"now": self._now(), "lease_seconds": self.lease_seconds}
        params |= {"id": job.id, "token": job.lease_token}
        with self._tx() as db:
            return db.execute(sql.HEARTBEAT, params).rowcount == 1

    # -- the worker loop's fast path -----------------------------------------------

    def any_ready(self, queues: Sequence[str] | None = None) -> bool:
        """Whether a claim would find something now (a job to run in `queues`, or an
        expired last lease to retire): one read, no row locked."""
        return self._ready(*_scope(queues))

    def _ready(self, scope: str, where: dict[str, str]) -> bool:
        return bool(self.db.execute(sql.READY_PROBE_IN[scope], self._where(where)).fetchone()[0])

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """JobQueue.next_due: when the next live job in `queues` is due by the clock."""
        scope, where = _scope(queues)
        return self.db.execute(sql.NEXT_DUE_IN[scope], self._where(where)).fetchone()[0]

    def claim_next(self, worker: str, *, queues: Sequence[str] | None = None) -> Job | None:
        """Lease the next ready job to `worker`, or return None (claim(worker)'s rules)."""
        jobs = self.claim(worker, queues=queues)
        return jobs[0] if jobs else None

    def complete_and_claim(
        self, job: Job, worker: str, effect: Effect | None = None, *, queues: Sequence[str] | None = None
    ) -> tuple[bool, Job | None]:
        """complete(job, effect), then claim_next(worker), in one transaction. Returns
        (accepted, next job or None); a stale lease returns False and still claims; an
        effect that raises rolls back both, with the job still leased to us."""
        checks.text("worker", worker)
        with self._tx() as db:
            accepted = self._complete(db, job)
            if accepted and effect is not None:
                self._run_effect(db, job, effect)
            scope, where = _scope(queues)
            rows = db.execute(sql.CLAIM_IN[scope], self._claim_params(worker, 1, where)).fetchall()
            job = self._readable(db, rows[0]) if rows else None
        return accepted, job

    # -- group commit (JobQueue's batch API) -----------------------------------------
    # The same rules per job as on SQLite: a batch is reported, and the next one claimed,
    # in one transaction; each completion is fenced by its token and each effect has a
    # savepoint of its own. The claim is one statement with SKIP LOCKED that, like
    # SQLite's, leases a job handed out before alone (sql.BATCH_PICK).

    def claim_batch(self, worker: str, limit: int, *, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs after a read has shown something is ready; a job
        handed out before comes alone."""
        limit = checks.claim_limit(limit)
        checks.text("worker", worker)
        scope, where = _scope(queues)
        if not self._ready(scope, where):
            return []
        with self._tx() as db:
            return sorted(self._claim_batch(db, worker, limit, scope, where), key=lambda job: job.id)

    def settle(
        self,
        finished: Sequence[Finished],
        *,
        claim_for: str | None = None,
        limit: int = 1,
        queues: Sequence[str] | None = None,
    ) -> tuple[list[str], list[Job]]:
        """JobQueue.settle: report every job of a batch, and claim the next, in one transaction."""
        if claim_for is not None:
            limit = checks.claim_limit(limit)
            checks.text("worker", claim_for)
            scope, where = _scope(queues)
        outcomes: list[str] = []
        jobs: list[Job] = []
        with self._tx() as db:
            for report in finished:
                outcomes.append(self._settle_one(db, report))
            if claim_for is not None:
                jobs = self._claim_batch(db, claim_for, limit, scope, where)
        return outcomes, sorted(jobs, key=lambda job: job.id)

    def _settle_one(self, db: psycopg.Connection, report: Finished) -> str:
        job = report.job
        if report.error is not None:
            return self._fail(db, job, report.error, retry=report.retry) or self._why_lost(db, job)
        if report.effect is None:
            return "done" if self._complete(db, job) else self._why_lost(db, job)
        try:
            with db.transaction():  # a savepoint: this job's completion and effect alone
                if not self._complete(db, job):
                    return self._why_lost(db, job)
                self._run_effect(db, job, report.effect)
            return "done"
        except EffectEndedTransaction:
            raise
        except Exception as exc:
            return self._fail(db, job, f"{type(exc).__name__}: {exc}", retry=True) or self._why_lost(db, job)

    def _why_lost(self, db: psycopg.Connection, job: Job) -> str:
        row = db.execute("SELECT state FROM jobs WHERE id = %(id)s", {"id": job.id}).fetchone()
        return "cancelled" if row is not None and row[0] == "cancelled" else "lost"

    def extend(self, jobs: Sequence[Job]) -> list[Job]:
        """JobQueue.extend: renew the leases still ours, in one transaction."""
        kept = []
        with self._tx() as db:
            for job in jobs:
                params = {"now": self._now(), "lease_seconds": self.lease_seconds}
                params |= {"id": job.id, "token": job.lease_token}
                row = db.execute(sql.EXTEND, params).fetchone()
                if row is not None:
                    kept.append(replace(job, lease_expires_at=row[0]))
        return kept

    def release(self, jobs: Sequence[Job]) -> int:
        """JobQueue.release: give back claimed jobs that were never started."""
        released = 0
        with self._tx() as db:
            for job in jobs:
                params = {"now": self._now(), "id": job.id, "token": job.lease_token}
                released += db.execute(sql.RELEASE, params).rowcount
        return released

    # -- operating --------------------------------------------------------------

    def cancel(self, job_id: int) -> str:
        """JobQueue.cancel: "queued" or "running" (the state it was cancelled in);
        CannotCancel for a finished job, JobNotFound for an unknown id."""
        checks.job_id(job_id)
        with self._tx() as db:
            row = None
            if 0 < job_id <= BIGINT_MAX:
                row = db.execute(sql.JOB_STATE, {"id": job_id}).fetchone()
            if row is None:
                raise JobNotFound(f"no job has id {job_id}: nothing was cancelled")
            if row[0] not in ("queued", "running"):
                raise CannotCancel(
                    f"job {job_id} is {row[0]} already: only a queued or running job can be cancelled"
                )
            db.execute(sql.CANCEL, {"now": self._now(), "id": job_id})
        return row[0]

    def every(
        self,
        kind: str,
        seconds: float,
        payload: Any = None,
        *,
        name: str | None = None,
        priority: int = 0,
        queue: str = validate.DEFAULT_QUEUE,
        max_attempts: int | None = None,
    ) -> int | None:
        """JobQueue.every: this period's job, once; periods read the server's clock."""
        now = self._now()
        key = every_key(kind, seconds, name, self.server_time() if now is None else now)
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
        """JobQueue.purge: finished jobs removed in id windows, one short transaction each."""
        older_than, chosen, batch = purge_settings(older_than, states, batch, archive)
        before = self.db.execute(sql.NOW_VALUE, {"now": self._now()}).fetchone()[0] - older_than
        first, last = self.db.execute(sql.ID_RANGE).fetchone()

        def next_job(after: int) -> tuple[int, float] | None:
            return self.db.execute(sql.CREATED_FROM, {"after": after}).fetchone()

        def window(after: int, size: int) -> tuple[int, int]:
            params = {"after": after, "batch": size, "states": chosen, "before": before, "now": self._now()}
            with self._tx() as db:
                copied = db.execute(sql.PURGE_ARCHIVE, params).rowcount if archive else 0
                return db.execute(sql.PURGE, params).rowcount, copied

        return walk_purge(first, last, batch, before, next_job, window)

    def space(self) -> dict[str, int]:
        """The jobs table's size on disk in bytes, its indexes included."""
        return {"table_bytes": self.db.execute(sql.TABLE_BYTES).fetchone()[0]}

    def reclaim_space(self, pages: int | None = None) -> int:
        """VACUUM the jobs table: dead rows' space becomes reusable (PostgreSQL's autovacuum
        does this on its own too). Returns the bytes the table shrank by, usually 0: plain
        VACUUM gives back only empty pages at the table's end."""
        before = self.space()["table_bytes"]
        self.db.execute(sql.VACUUM)
        return max(0, before - self.space()["table_bytes"])

    def vacuum(self) -> None:
        """VACUUM FULL would lock the table for a rewrite; labqueue leaves that to the DBA."""
        self.db.execute(sql.VACUUM)

    def requeue_dead(self, ids: Sequence[int] | None = None) -> list[int]:
        """Put dead jobs (all of them, or those in `ids`) back in the queue, attempts reset to 0.
        Returns the ids requeued, sorted. An empty `ids` requeues nothing."""
        if ids is None:
            statement, params = sql.REQUEUE_DEAD, {"now": self._now()}
        else:
            stored = [i for i in checks.job_ids(ids) if 0 < i <= BIGINT_MAX]  # no other id can exist
            statement, params = sql.REQUEUE_DEAD_IDS, {"now": self._now(), "ids": stored}
        with self._tx() as db:
            rows = db.execute(statement, params).fetchall()
            if rows:
                self._notify(db)
        return sorted(row[0] for row in rows)

    def stats(self) -> dict[str, float | int]:
        """What to watch, read through the partial indexes: the same keys as on SQLite."""
        now = {"now": self._now()}
        live = dict(self.db.execute(sql.STATS_LIVE).fetchall())
        ready, age = self.db.execute(sql.STATS_READY, now).fetchone()
        (dead,) = self.db.execute(sql.STATS_DEAD).fetchone()
        return {
            "queued": live.get("queued", 0),
            "running": live.get("running", 0),
            "ready_now": ready,
            "oldest_ready_age_s": round(age, 1) if age is not None else 0.0,
            "dead": dead,
        }

    def queue_stats(self) -> dict[str, dict[str, float | int]]:
        """JobQueue.queue_stats: stats() per named queue, live rows only."""
        return {
            name: {
                "queued": queued,
                "running": running,
                "ready_now": ready,
                "oldest_ready_age_s": round(age, 1) if age is not None else 0.0,
            }
            for name, queued, running, ready, age in self.db.execute(sql.STATS_BY_QUEUE, {"now": self._now()})
        }

    # -- reading jobs back --------------------------------------------------------

    def job(self, job_id: int) -> JobRecord | None:
        """The stored row of job `job_id`, or None if there is none."""
        checks.job_id(job_id)
        if not 0 < job_id <= BIGINT_MAX:
            return None
        row = self.db.execute(sql.JOB, {"id": job_id}).fetchone()
        return None if row is None else JobRecord(*row)

    def jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
    ) -> list[JobRecord]:
        """Stored rows in id order, filtered by state (one or several), kind and queue."""
        states = checks.states(state)
        if kind is not None:
            checks.kind(kind)
        if queue is not None:
            validate.queue_name(queue)
        if limit is not None:
            checks.read_limit(limit)
        params = {"states": states, "kind": kind, "queue": queue, "limit": limit}
        return [JobRecord(*row) for row in self.db.execute(sql.JOBS, params)]

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state (every state listed, zeros included)."""
        found = dict(self.db.execute(sql.COUNTS).fetchall())
        return {state: found.get(state, 0) for state in STATES}

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> PgJobQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PgJobQueue({redact(self.url)!r}, schema={self.schema!r}, lease_seconds={self.lease_seconds})"

    # -- operating a fleet (issue 23) ---------------------------------------------

    def put_back(self, jobs: Sequence[Job], delay: float, note: str) -> int:
        """JobQueue.put_back: give back jobs this worker cannot run, hidden for `delay` s."""
        delay = checks.positive("delay", delay, allow_zero=True)
        note = validate.text("note", note)[:MAX_ERROR_CHARS]
        put = 0
        with self._tx() as db:
            for job in jobs:
                params = {"now": self._now(), "delay": delay, "note": note}
                put += db.execute(sql.PUT_BACK, {**params, "id": job.id, "token": job.lease_token}).rowcount
        return put

    def note_crash(self, worker: str, message: str) -> list[int]:
        """JobQueue.note_crash: a crash note on the jobs still running under `worker`."""
        validate.text("worker", worker)
        message = validate.text("message", message)[:MAX_ERROR_CHARS]
        with self._tx() as db:
            rows = db.execute(sql.NOTE_CRASH, {"worker": worker, "message": message}).fetchall()
        return sorted(row[0] for row in rows)

    def finished_within(self, seconds: float) -> dict[str, dict[str, int]]:
        """JobQueue.finished_within: jobs finished in the last `seconds`, per queue and state."""
        seconds = checks.positive("seconds", seconds)
        found: dict[str, dict[str, int]] = {}
        for name, state, n in self.db.execute(sql.FINISHED_WITHIN, {"now": self._now(), "window": seconds}):
            found.setdefault(name, {})[state] = n
        return found

    def latest_jobs(
        self,
        *,
        state: str | Iterable[str] | None = None,
        kind: str | None = None,
        limit: int | None = None,
        queue: str | None = None,
    ) -> list[JobRecord]:
        """JobQueue.latest_jobs: jobs(), newest first."""
        states = checks.states(state)
        if kind is not None:
            checks.kind(kind)
        if queue is not None:
            validate.queue_name(queue)
        if limit is not None:
            checks.read_limit(limit)
        params = {"states": states, "kind": kind, "queue": queue, "limit": limit}
        return [JobRecord(*row) for row in self.db.execute(sql.LATEST_JOBS, params)]


def drop_schema(url: str, schema: str) -> None:
    """Delete a queue's schema and everything in it (its jobs, and any table its effects made)."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"not a queue schema name: {schema!r}")
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(pg_sql.SQL(sql.DROP_SCHEMA).format(schema=pg_sql.Identifier(schema)))


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
