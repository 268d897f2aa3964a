"""The PostgreSQL driver: one schema of a database, its connection, its SQL (sql.py,
beside this module), the server's clock and LISTEN/NOTIFY. The rules it serves live in
labqueue/core.py; the schema's creation, checks and migrations in schema.py.

Each queue lives in its own schema (default "labqueue"): a table `jobs` with the same
columns, states, CHECK and partial indexes as on SQLite. The session's search_path puts
that schema first (then the session's own path), so the queue's SQL and an effect's SQL
name the queue's tables unqualified and still reach the application's.

Connections are made to survive the network: a connect timeout and TCP keepalives are
set unless the URL sets them, and reconnect() opens a fresh session (search_path, lock
timeout and LISTEN again) after ConnectionLost.

Behind PgBouncer use session pooling: the session holds the search_path, the lock
timeout and LISTEN, which transaction pooling would hand to other clients.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict

from ... import validate
from ...core import (
    RESULT_POLL,
    Claim,
    Clock,
    Effect,
    Failure,
    Held,
    Job,
    JobFilter,
    JobRecord,
    NewJob,
    NewJobs,
    PurgeWindow,
    Scope,
    batch_size,
    keys_of,
    translated,
    within_limits,
)
from ...errors import CannotOpen, ConnectionLost, EffectEndedTransaction, InvalidArgument, ServerUnreachable
from ...redaction import redact
from . import sql
from .schema import SCHEMA_NAME, one_row, open_schema

LOOK_KEY = 3  # where a BATCH_LOOK row holds its concurrency key (and its limit, next)
log = logging.getLogger("labqueue.postgres")
_WITHOUT_SETTLE: set[str] = set()  # the queues this process has said so for, once each

# Set on every connection unless its URL says otherwise: give up connecting after 10 s,
# and let the kernel notice a dead peer within about a minute (a partition must not hang
# a worker for ever).
CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
}
# SQLSTATEs that mean the session is gone: admin shutdown, crash shutdown, cannot connect now.
SESSION_ENDED = ("57P01", "57P02", "57P03")


class PgDriver:
    """One queue's schema on a PostgreSQL server. Open one per process or thread."""

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        clock: Clock | None,
        timeout: float,
        create: bool,
        wake: bool,
        migrating: bool = False,
    ) -> None:
        """`migrating`: connect only, the schema neither checked nor created
        (labqueue.migrate takes the schema through its steps on this connection)."""
        if not isinstance(url, str):
            raise InvalidArgument(
                f"url must be a postgresql:// URL string, got {type(url).__name__} {url!r:.80}"
            )
        if "\x00" in url:
            raise InvalidArgument(f"url must not contain a NUL character, got {redact(url)!r}")
        if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
            raise InvalidArgument(
                f"schema must be a lower-case name of letters, digits and _ (at most 63), got {schema!r}"
            )
        validate.flag("create", create)
        validate.flag("wake", wake)
        if clock is not None and not callable(clock):
            raise InvalidArgument(f"clock must be a callable returning seconds, or None, got {clock!r}")
        try:
            # Any: each value goes to psycopg.connect() as a keyword, whose typed ones it is not
            self._conninfo: dict[str, Any] = {**CONNECTION_DEFAULTS, **conninfo_to_dict(url)}
        except psycopg.Error as exc:
            # libpq's message may quote the URL, or a piece of its password: both masked
            detail = redact(" ".join(str(exc).split()), url)
            raise InvalidArgument(f"not a usable PostgreSQL URL: {redact(url)!r} ({detail})") from None
        self.url, self.schema, self.clock = url, schema, clock
        self.timeout = timeout
        self.wake_enabled = wake
        self.where = f"{redact(url)} (schema {schema})"
        self._listening = False
        self.db = self._connect(CannotOpen)
        if migrating:
            self.one_call = False
            return
        try:
            self.one_call = open_schema(self.db, self.schema, self.url, create=create)
            if create and not self.one_call and self.where not in _WITHOUT_SETTLE:
                _WITHOUT_SETTLE.add(self.where)
                log.warning(
                    "%s has no %s function (this role may not create in the schema; `labqueue migrate` "
                    "or its owner's next open installs it): each batch takes five round trips instead of one",
                    self.where,
                    sql.SETTLE_FUNCTION,
                )
            self._session()
        except psycopg.Error as exc:
            self.db.close()
            raise translated(self, exc, timeout=timeout) from exc
        except BaseException:
            self.db.close()
            raise

    def _connect(self, error: type[Exception]) -> psycopg.Connection:
        """A new connection, or `error` (at the first open: CannotOpen, or ServerUnreachable
        when the server could not be reached or is starting, which a worker waits out)."""
        try:
            return psycopg.connect(autocommit=True, **self._conninfo)
        except psycopg.Error as exc:
            # libpq's text, redacted, is the message; its original is not chained to a traceback
            detail = redact(" ".join(str(exc).split()), self.url)
            state = getattr(exc, "sqlstate", None)
            if error is CannotOpen and (state is None or state.startswith("08") or state == "57P03"):
                error = ServerUnreachable  # no answer, a broken connection, "starting up"
            raise error(f"cannot connect to {self.where} ({detail})") from None

    def _session(self) -> None:
        """The session's settings: the search_path, the lock timeout (PostgreSQL reads 0 as
        "wait forever"; the queue's 0 means "do not wait", so at least 1 ms), and one
        generic plan per prepared statement. psycopg prepares a statement once it has run
        five times on the connection (the worker's per-batch ones, soon after it starts);
        PostgreSQL would otherwise plan each run for its parameters, which cost about as
        much as running them, and their generic plans walk the same indexes
        (tests/test_postgres.py reads them). The idle worker's look (ready()) and the
        listings (jobs()), whose generic plans would scan the table, are never prepared.
        An effect's own statements share the session: one that needs a plan for each
        run's values can say so in its transaction (SET LOCAL plan_cache_mode = auto)."""
        path = pg_sql.Identifier(self.schema).as_string(self.db)
        self.db.execute(sql.SET_SEARCH_PATH, {"path": path})
        self.db.execute(sql.SET_LOCK_TIMEOUT, {"ms": str(max(1, round(self.timeout * 1000)))})
        self.db.execute(sql.SET_GENERIC_PLANS)

    def reconnect(self) -> None:
        """A fresh session after ConnectionLost: the settings, and LISTEN if we listened."""
        with contextlib.suppress(psycopg.Error):
            self.db.close()
        self.db = self._connect(ConnectionLost)
        self._session()
        if self._listening:
            self._listening = False
            self.listen()

    # -- transactions and errors -------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        with self.db.transaction():
            yield self.db

    @contextmanager
    def savepoint(self) -> Iterator[Callable[[], None]]:
        """A savepoint for one job's completion and effect; `undo` rolls it back."""
        with self.db.transaction() as tx:

            def undo() -> None:
                raise psycopg.Rollback(tx)  # the savepoint's block ends here, rolled back

            yield undo

    def classify(self, exc: BaseException) -> str | None:
        """What a database error stands for (labqueue.core.translated names it)."""
        if isinstance(
            exc, (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
        ):
            return "busy"
        if isinstance(exc, pg_errors.QueryCanceled):
            return "timeout"
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            return "readonly"
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return "privilege"
        if isinstance(exc, (pg_errors.DiskFull, pg_errors.InsufficientResources)):
            return "full"
        if isinstance(exc, pg_errors.ProgramLimitExceeded):
            return "too_long"
        if isinstance(exc, psycopg.OperationalError):
            state = getattr(exc, "sqlstate", None)
            if state is None or state.startswith("08") or state in SESSION_ENDED or self.db.closed:
                return "connection"
        if isinstance(exc, psycopg.InterfaceError) and self.db.closed:
            return "connection"
        return None

    def server_time(self) -> float:
        if self.clock is not None:
            return self.clock()
        return one_row(self.db.execute(sql.SERVER_NOW))[0]

    # -- producing and waking ----------------------------------------------------
    # A hint, never the only way work is found: producers NOTIFY the queue's channel (its
    # schema's name) in the transaction that adds ready jobs, once per transaction, so the
    # signal arrives when they are committed; an idle worker waits for it and still looks
    # after its timeout, so a lost notification delays a job, never loses it.

    def insert(self, row: NewJob) -> int | None:
        found = self.db.execute(sql.ENQUEUE, row.params()).fetchone()
        return None if found is None else found[0]

    def insert_many(self, rows: NewJobs) -> None:
        self.db.execute(sql.ENQUEUE_MANY, rows.params())

    def hint_in_transaction(self) -> None:
        if self.wake_enabled:
            self.db.execute(sql.NOTIFY, {"channel": self.schema})

    def hint_after_commit(self) -> int:
        """Hints went out with the COMMIT here (hint_in_transaction)."""
        return 0

    def wake(self) -> int:
        if not self.wake_enabled:
            return 0
        self.db.execute(sql.NOTIFY, {"channel": self.schema})
        return 1

    def listen(self) -> bool:
        """Only connections that wait listen, so a producer's connection never piles up
        notifications. False with wake=False: waits only sleep."""
        if not self.wake_enabled:
            return False
        if not self._listening:
            self.db.execute(pg_sql.SQL(sql.LISTEN).format(channel=pg_sql.Identifier(self.schema)))
            self._listening = True
        return True

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until a producer signals ready jobs or `timeout` seconds pass. A signal
        that came while this connection ran other statements counts too (psycopg keeps it)."""
        if not self.listen():
            time.sleep(timeout)
            return False
        heard = self.db.notifies(timeout=timeout, stop_after=1)
        try:
            return next(heard, None) is not None
        finally:
            heard.close()

    def interrupt_wait(self) -> None:
        """A wait here ends within its timeout: a signal handler must not use the
        connection the wait is reading."""

    def hint_finished(self) -> None:
        """No hint: a NOTIFY would cost every settle a statement (inside the one-call
        function, a new version of it); producers waiting for a job poll instead."""

    def wait_for_finished(self, timeout: float, look: Callable[[], bool]) -> bool:
        """look(), and if it says no, sleep (at most `timeout`, and at most RESULT_POLL)
        and look again."""
        if look():
            return True
        time.sleep(min(timeout, RESULT_POLL))
        return look()

    # -- claiming and reporting ----------------------------------------------------

    def ready(self, scope: Scope, now: float | None) -> bool:
        # prepare=False: its generic plan would scan the table, fine while many rows are
        # ready and slow when few are among many finished ones (see _session()).
        params = {**scope.params(), "now": now}
        return bool(one_row(self.db.execute(sql.READY_PROBE_IN[scope.name], params, prepare=False))[0])

    def next_due(self, scope: Scope) -> float | None:
        return one_row(self.db.execute(sql.NEXT_DUE_IN[scope.name], scope.params()))[0]

    def claim(self, claim: Claim, *, batch: bool) -> list[tuple]:
        """claim(): one statement with FOR UPDATE SKIP LOCKED. A batch (group commit): lock
        and look at the next ready jobs, retire exhausted leases if there are any, and lease
        the batch the rule picks (core.batch_size) by id (sql.BATCH_LOOK_IN)."""
        params, scope = claim.params(), claim.scope.name
        if not batch:
            return self.db.execute(sql.CLAIM_IN[scope], params).fetchall()
        looked = self.db.execute(sql.BATCH_LOOK_IN[scope], params).fetchall()
        if not looked or looked[0][2]:
            self.db.execute(sql.RETIRE_EXHAUSTED, params)
        keys = keys_of(looked, LOOK_KEY)
        if keys:  # claims counting these keys take turns from here; then count what they hold
            self.lock_keys(keys)
            looked = within_limits(looked, LOOK_KEY, self.held(keys, claim.now))[0]
        take = batch_size([row[1] for row in looked])
        if not take:
            return []
        ids = [row[0] for row in looked[:take]]
        return self.db.execute(sql.CLAIM_IDS, {**params, "ids": ids}).fetchall()

    def settle_in_one_call(
        self,
        done: Sequence[tuple[int, str]],
        now: float | None,
        claim: Claim | None,
        results: Sequence[tuple[int, str, str]] = (),
    ) -> tuple[list[int], list[tuple]] | None:
        """Plain completions (job id, lease token), completions with a return value (job
        id, lease token, value as JSON text) and the next batch's claim in one call of
        sql.SETTLE: one statement outside a transaction block, so one round trip. Returns
        the ids completed and the claimed rows, or None where the schema lacks the function
        (the queue then takes the transaction path)."""
        if not self.one_call:
            return None
        params = {"done_ids": [job_id for job_id, _ in done], "done_tokens": [token for _, token in done]}
        params |= {
            "result_ids": [job_id for job_id, _, _ in results],
            "result_tokens": [token for _, token, _ in results],
            "results": [value for _, _, value in results],
        }
        if claim is None:
            params |= {"now": now, "scope": None, "queue": None, "queues": None, "paused": None, "limit": 0}
            params |= {"lease_seconds": 0.0, "token": None, "worker": None, "reason": None}
        else:
            params |= {**claim.params(), "scope": claim.scope.name}
        rows = self.db.execute(sql.SETTLE_CALL, params).fetchall()
        return [row[0] for row in rows if row[1] is None], [row for row in rows if row[1] is not None]

    def waiting_on_keys(self, now: float | None) -> list[tuple[str, int]]:
        return self.db.execute(sql.WAITING_ON_KEYS, {"now": now}).fetchall()

    def claimed_by(self, token: str) -> list[tuple]:
        return self.db.execute(sql.CLAIMED_BY_TOKEN, {"token": token}).fetchall()

    def lock_keys(self, keys: list[str]) -> None:
        self.db.execute(sql.LOCK_KEYS, {"keys": keys}).fetchall()

    def held(self, keys: list[str], now: float | None, token: str | None = None) -> dict[str, Held]:
        found = self.db.execute(sql.HELD, {"keys": keys, "now": now, "token": token}).fetchall()
        return {key: (0, None) for key in keys} | {key: (n, strictest) for key, n, strictest in found}

    def bury(self, job_id: int, token: str, reason: str, now: float | None) -> None:
        self.db.execute(
            sql.BURY, {"now": now, "reason": reason.replace("\x00", "\\x00"), "id": job_id, "token": token}
        )

    def complete(self, job: Job, now: float | None, result: str | None = None) -> bool:
        params = {"now": now, "id": job.id, "token": job.lease_token, "result": result}
        return self.db.execute(sql.COMPLETE, params).rowcount == 1

    def complete_many(self, ids: list[int], token: str, now: float | None) -> list[int]:
        params = {"now": now, "ids": ids, "token": token}
        return [row[0] for row in self.db.execute(sql.COMPLETE_MANY, params).fetchall()]

    def run_effect(self, job: Job, effect: Effect) -> None:
        """Run the effect, then make sure the transaction is still the open, healthy one it
        was given: PostgreSQL answers COMMIT on an aborted transaction by rolling it back,
        so an effect that swallowed a database error would otherwise lose the completion
        while complete() reported it accepted."""
        effect(self.db)
        status = self.db.info.transaction_status
        if status == psycopg.pq.TransactionStatus.INERROR:
            raise EffectEndedTransaction(
                f"the effect of job {job.id} ({job.kind!r}) caught a database error and carried on: "
                "the transaction was aborted, so the completion and the effect's writes were rolled back",
                job.id,
            )
        if status != psycopg.pq.TransactionStatus.INTRANS:
            raise EffectEndedTransaction(
                f"the effect of job {job.id} ({job.kind!r}) ended the transaction itself (COMMIT or "
                "ROLLBACK): an effect must leave committing to the queue; what it had written before "
                "ending it may have been committed with the completion",
                job.id,
            )

    def fail(self, failure: Failure) -> Literal["queued", "dead"] | None:
        row = self.db.execute(sql.FAIL, failure.params()).fetchone()
        return None if row is None else row[0]

    def extend(self, job: Job, now: float | None, lease_seconds: float) -> float | None:
        params = {"now": now, "lease_seconds": lease_seconds, "id": job.id, "token": job.lease_token}
        row = self.db.execute(sql.EXTEND, params).fetchone()
        return None if row is None else row[0]

    def release(self, job: Job, now: float | None) -> bool:
        return (
            self.db.execute(sql.RELEASE, {"now": now, "id": job.id, "token": job.lease_token}).rowcount == 1
        )

    def put_back(self, job: Job, now: float | None, delay: float, note: str) -> bool:
        params = {"now": now, "delay": delay, "note": note, "id": job.id, "token": job.lease_token}
        return self.db.execute(sql.PUT_BACK, params).rowcount == 1

    def note_crash(
        self, worker: str, message: str, running: int | None, running_message: str, now: float | None = None
    ) -> list[int]:
        params = {"worker": worker, "message": message, "running": running, "now": now}
        params["running_message"] = running_message
        return [row[0] for row in self.db.execute(sql.NOTE_CRASH, params).fetchall()]

    def finished_within(self, now: float | None, window: float) -> list[tuple[str, str, int]]:
        return self.db.execute(sql.FINISHED_WITHIN, {"now": now, "window": window}).fetchall()

    def longest_waiting(self, now: float | None) -> tuple[int, float] | None:
        row = self.db.execute(sql.LONGEST_WAITING, {"now": now}).fetchone()
        return None if row is None else (row[0], row[1])

    def state_of(self, job_id: int, *, lock: bool = False) -> str | None:
        row = self.db.execute(sql.JOB_STATE_LOCKED if lock else sql.JOB_STATE, {"id": job_id}).fetchone()
        return None if row is None else row[0]

    # -- operating -----------------------------------------------------------------

    def cancel(self, job_id: int, now: float | None) -> None:
        self.db.execute(sql.CANCEL, {"now": now, "id": job_id})

    def requeue_dead(self, ids: list[int] | None, now: float | None) -> list[int]:
        if ids is None:
            rows = self.db.execute(sql.REQUEUE_DEAD, {"now": now}).fetchall()
        else:
            rows = self.db.execute(sql.REQUEUE_DEAD_IDS, {"now": now, "ids": ids}).fetchall()
        return [row[0] for row in rows]

    def purge_bounds(self) -> tuple[int | None, int | None]:
        first, last = one_row(self.db.execute(sql.ID_RANGE))
        return first, last

    def created_after(self, after: int) -> tuple[int, float] | None:
        return self.db.execute(sql.CREATED_FROM, {"after": after}).fetchone()

    def purge_window(self, window: PurgeWindow, archive: bool) -> tuple[int, int]:
        params = window.params()
        if archive:
            removed, archived = one_row(self.db.execute(sql.PURGE_MOVE, params))
            return removed, archived
        return self.db.execute(sql.PURGE, params).rowcount, 0

    def space(self) -> dict[str, int]:
        """The jobs table's size on disk in bytes, its indexes included."""
        return {"table_bytes": one_row(self.db.execute(sql.TABLE_BYTES))[0]}

    def reclaim_space(self, pages: int | None) -> int:
        """VACUUM the jobs table: dead rows' space becomes reusable (autovacuum does this on
        its own too). Returns the bytes the table shrank by, usually 0: plain VACUUM gives
        back only empty pages at the table's end."""
        before = self.space()["table_bytes"]
        self.db.execute(sql.VACUUM)
        return max(0, before - self.space()["table_bytes"])

    def vacuum(self) -> None:
        """VACUUM FULL would lock the table for a rewrite; labqueue leaves that to the DBA."""
        self.db.execute(sql.VACUUM)

    def stats(self, now: float | None) -> tuple[int, int, int, float | None, int]:
        live: dict[str, int] = dict(self.db.execute(sql.STATS_LIVE).fetchall())
        ready, age = one_row(self.db.execute(sql.STATS_READY, {"now": now}))
        (dead,) = one_row(self.db.execute(sql.STATS_DEAD))
        return live.get("queued", 0), live.get("running", 0), ready, age, dead

    def queue_stats(self, now: float | None) -> list[tuple]:
        return self.db.execute(sql.STATS_BY_QUEUE, {"now": now}).fetchall()

    # -- pausing named queues ---------------------------------------------------------

    def pause(self, queue: str, reason: str | None, now: float | None) -> bool:
        params = {"queue": queue, "reason": reason, "now": now}
        return self.db.execute(sql.PAUSE, params).fetchone() is not None

    def resume(self, queue: str) -> bool:
        return self.db.execute(sql.RESUME, {"queue": queue}).fetchone() is not None

    def paused(self) -> list[tuple[str, float, str | None]]:
        return [tuple(row) for row in self.db.execute(sql.PAUSED).fetchall()]

    def paused_names(self) -> list[str]:
        return [row[0] for row in self.db.execute(sql.PAUSED).fetchall()]

    # -- reading jobs back ------------------------------------------------------------

    def job(self, job_id: int) -> JobRecord | None:
        row = self.db.execute(sql.JOB, {"id": job_id}).fetchone()
        return None if row is None else JobRecord(*row)

    def jobs(self, chosen: JobFilter) -> list[JobRecord]:
        statement = sql.LATEST_JOBS if chosen.newest else sql.JOBS
        params = chosen.params()
        if params["before"] is None:
            params["before"] = validate.MAX_SQLITE_INT  # the largest id either backend stores
        # prepare=False: planned for its own filters every time (see _session()).
        return [JobRecord(*row) for row in self.db.execute(statement, params, prepare=False)]

    def counts(self) -> dict[str, int]:
        return dict(self.db.execute(sql.COUNTS).fetchall())

    @contextmanager
    def snapshot(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        """One REPEATABLE READ, READ ONLY transaction: one snapshot, any write refused; with a
        `timeout`, each statement in it stopped after that many seconds (SET LOCAL)."""
        with self.db.transaction():
            self.db.execute(sql.READ_ONLY)
            if timeout is not None:
                self.db.execute(sql.SET_LOCAL_STATEMENT_TIMEOUT, {"ms": str(max(1, round(timeout * 1000)))})
            yield self.db

    def queue_totals(self, now: float | None) -> tuple[dict[str, int], dict[str, int]]:
        scheduled: dict[str, int] = dict(self.db.execute(sql.SCHEDULED_BY_QUEUE, {"now": now}).fetchall())
        return scheduled, dict(self.db.execute(sql.DEAD_BY_QUEUE).fetchall())

    def throughput(
        self, now: float | None, window: float, step: float, after: int = 0
    ) -> list[tuple[str, str, int, int]]:
        params = {"now": now, "window": window, "step": step, "after": after}
        return [tuple(row) for row in self.db.execute(sql.THROUGHPUT, params).fetchall()]

    def close(self) -> None:
        self.db.close()
