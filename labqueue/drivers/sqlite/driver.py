"""The SQLite driver: one file, its connection, its SQL (sql.py), its clock and
its wake-up channel (labqueue/wakeup.py). The rules it serves live in labqueue/core.py;
the file's checks and its schema's migrations in schema.py, beside this module.

What is SQLite's own is here: BEGIN IMMEDIATE with a busy wait Python can interrupt, the
authorizer that keeps an effect from ending the transaction (effects.py), and reading rows
whose text another program stored as invalid UTF-8 (rows.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from ... import validate, wakeup
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
    SettleInOneCall,
    batch_size,
    keys_of,
    translated,
    within_limits,
)
from ...errors import CannotOpen, EffectEndedTransaction, InvalidArgument, QueueNotFound
from ...versions import require_returning
from . import sql
from .effects import EffectGuard, effect_message
from .rows import lenient_text, naming, raw_text, record, sqlite_params
from .schema import (
    check_existing,
    check_is_sqlite_file,
    check_writable,
    migrate,
    not_a_database,
    refuse_if_old,
)

READY_KEY = 6  # where a READY_ROWS row holds its concurrency key (and its limit, next)

SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
# How long SQLite itself waits for the write lock before Python tries again: between
# tries Python runs its signal handlers, so a second stop signal is not held up by a
# wait in C. The queue's `timeout` is the total over all tries.
BUSY_SLICE = 0.1
# How many virtual-machine steps a timed read runs between looks at the clock (snapshot()).
PROGRESS_STEPS = 4000

T = TypeVar("T")


class SqliteDriver:
    """One SQLite file, opened (and created or upgraded) for one queue, as JobQueue's
    docstring describes. Open one per process or thread; a connection is not shared."""

    # No settle in one call of its own: a SQLite transaction is in-process already, and the
    # queue's settle runs its statements in one (Driver.settle_in_one_call).
    settle_in_one_call: SettleInOneCall | None = None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock,
        synchronous: str,
        schema: str | None,
        timeout: float,
        create: bool,
        wake: bool,
        read_only: bool = False,
    ) -> None:
        require_returning()
        level = str(synchronous).upper()
        if level not in SYNCHRONOUS_LEVELS:
            raise InvalidArgument(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got {synchronous!r}"
            )
        validate.flag("create", create)
        validate.flag("wake", wake)
        validate.flag("read_only", read_only)
        if read_only and create:
            raise InvalidArgument("read_only=True opens an existing queue only: pass create=False too")
        self.read_only = read_only
        if not callable(clock):
            raise InvalidArgument(f"clock must be a callable returning seconds, got {clock!r}")
        self.clock = clock
        self.timeout = timeout
        self.wake_enabled = wake  # notify idle workers after an enqueue, and wait for hints when idle
        self._waiter: wakeup.Waiter | None = None
        self._finish_waiter: wakeup.Waiter | None = None
        self._finished = wakeup.FolderHints(None)  # producers waiting for jobs (set once the path is known)
        self.path = Path(validate.db_path(path))
        self.where = str(self.path)
        check_is_sqlite_file(self.path)
        if not create and not self.path.is_file():
            raise QueueNotFound(
                f"{self.path} does not exist: create=False opens an existing queue only, "
                "so nothing was created (is the path mistyped?)"
            )
        if not read_only:
            check_writable(self.path)
        if wake:
            self._finished = wakeup.FolderHints(wakeup.wake_folder(self.path, wakeup.FINISHED_SUFFIX))
        # isolation_level=None: sqlite3 issues no implicit BEGIN. Writes get their
        # transaction from transaction(); a lone read runs in autocommit. The busy timeout
        # is one slice of the timeout: _retry_busy() makes up the rest in Python.
        try:
            if create:
                self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=self._slice())
            else:  # mode=rw: SQLite itself never creates the file, even if it vanished meanwhile
                uri = self.path.absolute().as_uri() + ("?mode=ro" if read_only else "?mode=rw")
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
        self._own_cursor = self.db.cursor()  # BEGIN, COMMIT and ROLLBACK: no new cursor each time
        # Consulted by SQLite only when it prepares a statement, so it costs the cached
        # statements of the hot path nothing.
        self._guard = EffectGuard()
        self.db.set_authorizer(self._guard)
        try:
            self._retry_busy(lambda: self._open(schema, level, create))
        except sqlite3.OperationalError as exc:  # locked, full or read-only while preparing the file
            self.db.close()
            raise translated(self, exc, timeout=self.timeout) from exc
        except sqlite3.DatabaseError as exc:  # a foreign file, or a damaged one with SQLite's header
            self.db.close()
            raise not_a_database(self.path, exc) from exc
        except BaseException:
            self.db.close()
            raise

    def _open(self, schema: str | None, level: str, create: bool) -> None:
        """Check the file, then set it up. Everything that can refuse the file reads
        only, so a refused file is left as it was."""
        found, version = check_existing(self.db, self.path, create)
        if schema == sql.SCHEMA and version < sql.SCHEMA_VERSION:
            # Opening never migrates an existing queue (`labqueue migrate` does): an older one
            # is refused before anything, journal mode included, is written.
            refuse_if_old(self.db, self.path, version, found)
        if self.read_only:  # nothing may be written: no journal mode, no schema step
            return
        if found is None and not self.db.execute(sql.PAGE_COUNT).fetchone()[0]:
            # A brand-new file: freed pages can be handed back later (reclaim_space). The
            # setting only takes before the first table exists; a full VACUUM applies it later.
            self.db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self.db.execute("PRAGMA journal_mode = WAL")
        # A PRAGMA takes no parameters; the level was checked against a fixed list.
        self.db.execute(f"PRAGMA synchronous = {level}")
        # A new queue is made here; an existing one is only completed when its table is
        # current and unversioned (made by hand from sql.SCHEMA). create=False (a reader, an
        # operator's command) writes nothing.
        if schema == sql.SCHEMA and create and (found is None or version < sql.SCHEMA_VERSION):
            with self.transaction() as db:
                migrate(db, self.path)
        elif schema and schema != sql.SCHEMA:  # the caller's own (the course's index experiments)
            self.db.executescript(schema)

    # -- transactions and errors -------------------------------------------------

    def _slice(self) -> float:
        return min(self.timeout, BUSY_SLICE)

    def _retry_busy(self, action: Callable[[], T], *, waited: float = 0.0) -> T:
        """Run `action`, trying again while the database is locked, for up to the timeout
        in all (less `waited`, already spent). SQLite waits one short slice per try, so
        Python's signal handlers run between tries: a second stop signal ends the wait."""
        give_up = time.monotonic() + self.timeout - waited - self._slice()
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() > give_up:
                    raise

    def _begin(self) -> None:
        self._own(sql.BEGIN)

    def _own(self, statement: str) -> None:
        """Run one of labqueue's own transaction statements (the authorizer lets them by)."""
        self._guard.ours = True
        try:
            self._own_cursor.execute(statement)
        finally:
            self._guard.ours = False

    def transaction(self) -> _Transaction:
        """BEGIN IMMEDIATE acquires the write lock up front, before anything is read, so
        no other writer can change a row between our reading it and our writing it. Any
        exception, including KeyboardInterrupt, rolls the whole of it back."""
        return _Transaction(self)

    def _start(self) -> None:
        try:
            try:
                self._begin()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                self._retry_busy(self._begin, waited=self._slice())  # the first try waited one slice
        except BaseException:  # a signal's exception the instant BEGIN succeeded: undo it
            self._undo()
            raise

    def _end(self, failed: bool) -> None:
        if failed:
            self._undo()
            return
        try:
            self._own(sql.COMMIT)
        except BaseException:
            self._undo()
            raise

    def _undo(self) -> None:
        if self.db.in_transaction:
            self._own(sql.ROLLBACK)

    @contextmanager
    def savepoint(self) -> Iterator[Callable[[], None]]:
        """A savepoint for one job's completion and effect; the caller gets `undo`."""
        self._hot.execute("SAVEPOINT job")

        def undo() -> None:
            self._hot.execute("ROLLBACK TO job")

        try:
            yield undo
        finally:
            if self.db.in_transaction:
                self._hot.execute("RELEASE job")

    def classify(self, exc: BaseException) -> str | None:
        """What a database error stands for (labqueue.core.translated names it)."""
        if not isinstance(exc, sqlite3.OperationalError):
            return None
        message = str(exc)
        if "readonly" in message or "unable to open" in message:
            return "readonly"
        if is_busy(exc):
            return "busy"
        if message == "interrupted":  # snapshot()'s timeout, or interrupt() from another thread
            return "timeout"
        if "full" in message:
            return "full"
        return None

    def server_time(self) -> float:
        return self.clock()

    def reconnect(self) -> None:
        """A file has no connection to lose."""

    # -- producing and waking ----------------------------------------------------

    def insert(self, row: NewJob) -> int | None:
        now = row.now
        found = self._hot.execute(
            sql.ENQUEUE,
            (
                row.kind,
                row.payload,
                row.max_attempts,
                now + row.delay,  # type: ignore[operator]  # SQLite's clock is never None
                row.dedupe_key,
                now,
                row.priority,
                row.queue,
                row.concurrency_key,
                row.concurrency_limit,
            ),
        ).fetchone()
        return None if found is None else found[0]

    def insert_many(self, rows: NewJobs) -> None:
        now, kind, attempts = rows.now, rows.kind, rows.max_attempts
        priority, queue, key, limit = rows.priority, rows.queue, rows.concurrency_key, rows.concurrency_limit
        self.db.executemany(
            sql.ENQUEUE_MANY,
            [(kind, body, attempts, now, now, priority, queue, key, limit) for body in rows.payloads],
        )

    def hint_in_transaction(self) -> None:
        """Hints go out after COMMIT here (hint_after_commit)."""

    def hint_after_commit(self) -> int:
        """Hint this file's idle workers that a job may be ready (a datagram each, see
        labqueue.wakeup). Returns how many took it; never raises."""
        return wakeup.notify(self.path) if self.wake_enabled else 0

    wake = hint_after_commit

    def listen(self) -> bool:
        """True if hints can reach this file's workers; False (wake=False, no Unix datagram
        sockets, or no private folder for them) means wait_for_jobs() only sleeps."""
        if self._waiter is None:
            self._waiter = wakeup.Waiter(self.path if self.wake_enabled else "").open()
        return self._waiter.active

    def wait_for_jobs(self, timeout: float) -> bool:
        self.listen()
        assert self._waiter is not None
        return self._waiter.wait(timeout)

    def interrupt_wait(self) -> None:
        if self._waiter is not None:
            self._waiter.poke()

    def hint_finished(self) -> None:
        """Hint this file's producers waiting for a job (wait_for_finished) that jobs have
        finished: a datagram each, in a folder of their own (labqueue.wakeup.FolderHints).
        Nobody waiting, one access() call."""
        self._finished.notify()

    def wait_for_finished(self, timeout: float, look: Callable[[], bool]) -> bool:
        """look(), and if it says no, wait for a worker's hint (at most `timeout`, and at
        most RESULT_POLL) and look again. The waiter's socket is bound before the first
        look, so a hint sent after it is never missed."""
        if self._finish_waiter is None:
            where = self.path if self.wake_enabled else ""
            self._finish_waiter = wakeup.Waiter(where, suffix=wakeup.FINISHED_SUFFIX).open()
        if look():
            return True
        self._finish_waiter.wait(min(timeout, RESULT_POLL))
        return look()

    # -- claiming and reporting ----------------------------------------------------

    def ready(self, scope: Scope, now: float | None) -> bool:
        params = sqlite_params({"now": now, **scope.params()})
        return bool(self._hot.execute(sql.READY_PROBE_IN[scope.name], params).fetchall())

    def next_due(self, scope: Scope) -> float | None:
        return self._hot.execute(sql.NEXT_DUE_IN[scope.name], sqlite_params(scope.params())).fetchone()[0]

    def claim(self, claim: Claim, *, batch: bool) -> list[tuple]:
        """Retire exhausted leases and lease up to `limit` rows: claim() retires, then runs
        the tutorial's UPDATE ... RETURNING; a batch (group commit) reads the next ready
        rows, retires only if they say a lease on a last attempt ran out (or none is
        ready), and leases the leading run never handed out, or one job handed out before
        (READY_ROWS, then CLAIM_IDS or CLAIM_ID_RUN: see sql.py)."""
        params, scope = sqlite_params(claim.params()), claim.scope.name
        if not batch:
            self._retire(params)
            return self._claimed(sql.CLAIM_IN[scope], params)
        ready = self._ready_rows(scope, params)
        if not ready or ready[0][5]:  # a lease on a last attempt ran out (or nothing else is ready)
            self._retire(params)
        keys = keys_of(ready, READY_KEY)
        if keys:  # two jobs of a key may both have passed KEY_FREE: the rule keeps the first ones
            ready = within_limits(ready, READY_KEY, self.held(keys, params["now"]))[0]
        if not ready:
            return []
        ready = ready[: batch_size([row[3] - 1 for row in ready])]
        token, lease_end = params["token"], params["lease_end"]
        leased = self._lease([row[0] for row in ready], lease_end, token, params["worker"], params["now"])
        return [
            (job_id, kind, payload, attempts, max_attempts, token, lease_end, key, limit)
            for job_id, kind, payload, attempts, max_attempts, _, key, limit in ready
            if leased is None or job_id in leased
        ]

    def waiting_on_keys(self, now: float | None) -> list[tuple[str, int]]:
        return self._hot.execute(sql.WAITING_ON_KEYS, {"now": now}).fetchall()

    def claimed_by(self, token: str) -> list[tuple]:
        params = {"token": token}
        return self._rows_as_text(sql.CLAIMED_BY_TOKEN, params, sql.CLAIMED_BY_TOKEN_RAW, params)

    def lock_keys(self, keys: list[str]) -> None:
        """Nothing to do: the claim's write transaction holds SQLite's one write lock."""

    def held(self, keys: list[str], now: float | None, token: str | None = None) -> dict[str, Held]:
        found = self._hot.execute(sql.HELD, {"keys": json.dumps(keys), "now": now, "token": token})
        return {key: (0, None) for key in keys} | {key: (n, strictest) for key, n, strictest in found}

    def _retire(self, params: dict[str, Any]) -> None:
        self._hot.execute(sql.RETIRE_EXHAUSTED, {"now": params["now"], "reason": params["reason"]})

    def _ready_rows(self, scope: str, params: dict[str, Any]) -> list[tuple]:
        """READY_ROWS (READY_ROWS_RAW for a row whose text is not UTF-8)."""
        return self._rows_as_text(sql.READY_ROWS_IN[scope], params, sql.READY_ROWS_RAW_IN[scope], params)

    def _lease(
        self, ids: list[int], lease_end: float, token: str, worker: str, now: float
    ) -> set[int] | None:
        """CLAIM_IDS on the rows READY_ROWS read in this write transaction. Returns None
        when every one was leased, as nothing but labqueue's own statements touch them;
        otherwise (something beside labqueue, a trigger on jobs, kept a row from
        changing) the ids that now hold this claim's token, which is new."""
        leased, cursor = 0, self._hot
        for statement, named in naming(ids, sql.claim_ids, sql.CLAIM_ID_RUN):
            leased += cursor.execute(statement, (lease_end, token, worker, now, *named)).rowcount
        if leased == len(ids):
            return None
        return {row[0] for row in cursor.execute(sql.CLAIMED_RAW, {"token": token, "lease_end": lease_end})}

    def _claimed(self, statement: str, params: dict[str, Any]) -> list[tuple]:
        """Run a claim statement and return its rows (the claimed rows read back by their
        token, CLAIMED_RAW, for a row whose text is not UTF-8). fetchall() matters: an
        undrained RETURNING cursor keeps the statement, and with it the write lock, alive."""
        return self._rows_as_text(
            statement, params, sql.CLAIMED_RAW, {"token": params["token"], "lease_end": params["lease_end"]}
        )

    def _rows_as_text(self, statement: str, params: Any, raw_statement: str, raw_params: Any) -> list[tuple]:
        """The rows of `statement`, whose columns 1 and 2 are kind and payload. A row whose
        text SQLite holds as invalid UTF-8 cannot even be fetched; then the same rows are
        read again by `raw_statement` (id, each text as bytes with its stored type, then the
        rest), so that row alone can be set aside (labqueue.core.Unreadable)."""
        try:
            return self._hot.execute(statement, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):
                raise
        return [
            (job_id, raw_text(kind, kind_type), raw_text(payload, payload_type), *rest)
            for job_id, kind, kind_type, payload, payload_type, *rest in self._hot.execute(
                raw_statement, raw_params
            )
        ]

    def bury(self, job_id: int, token: str, reason: str, now: float | None) -> None:
        self._hot.execute(sql.BURY, {"now": now, "reason": reason, "id": job_id, "token": token})

    def complete(self, job: Job, now: float | None, result: str | None = None) -> bool:
        if result is None:
            return self._hot.execute(sql.COMPLETE, (now, job.id, job.lease_token)).rowcount == 1
        return self._hot.execute(sql.COMPLETE_RESULT, (now, job.id, job.lease_token, result)).rowcount == 1

    def complete_many(self, ids: list[int], token: str, now: float | None) -> list[int]:
        done: list[int] = []
        for statement, named in naming(ids, sql.complete_many, sql.COMPLETE_ID_RUN):
            done += [row[0] for row in self._hot.execute(statement, (now, *named, token))]
        return done

    def run_effect(self, job: Job, effect: Effect) -> None:
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
                raise EffectEndedTransaction(effect_message(job), job.id) from exc
            raise
        finally:
            guard.active = False
        if guard.refused or not self.db.in_transaction:
            raise EffectEndedTransaction(effect_message(job), job.id)

    def fail(self, failure: Failure) -> Literal["queued", "dead"] | None:
        row = self._hot.execute(sql.FAIL, failure.params()).fetchone()
        return None if row is None else row[0]

    def extend(self, job: Job, now: float | None, lease_seconds: float) -> float | None:
        deadline = now + lease_seconds  # type: ignore[operator]
        accepted = self._hot.execute(sql.HEARTBEAT, (deadline, job.id, job.lease_token, now)).rowcount == 1
        return deadline if accepted else None

    def release(self, job: Job, now: float | None) -> bool:
        params = {"now": now, "id": job.id, "token": job.lease_token}
        return self._hot.execute(sql.RELEASE, params).rowcount == 1

    def put_back(self, job: Job, now: float | None, delay: float, note: str) -> bool:
        params = {"now": now, "delay": delay, "note": note, "id": job.id, "token": job.lease_token}
        return self._hot.execute(sql.PUT_BACK, params).rowcount == 1

    def note_crash(
        self, worker: str, message: str, running: int | None, running_message: str, now: float | None = None
    ) -> list[int]:
        params = {"worker": worker, "message": message, "running": running, "now": now}
        params["running_message"] = running_message
        return [row[0] for row in self._hot.execute(sql.NOTE_CRASH, params).fetchall()]

    def finished_within(self, now: float | None, window: float) -> list[tuple[str, str, int]]:
        with self._lenient_text():  # a queue name another program stored as invalid UTF-8
            rows = self._hot.execute(sql.FINISHED_WITHIN, {"now": now, "window": window})
            return [tuple(row) for row in rows]

    def longest_waiting(self, now: float | None) -> tuple[int, float] | None:
        row = self._hot.execute(sql.LONGEST_WAITING, {"now": now}).fetchone()
        return None if row is None else (row[0], row[1])

    def state_of(self, job_id: int, *, lock: bool = False) -> str | None:
        """(The write lock is held already: `lock` changes nothing here.)"""
        row = self._hot.execute(sql.JOB_STATE, (job_id,)).fetchone()
        return None if row is None else row[0]

    # -- operating -----------------------------------------------------------------

    def cancel(self, job_id: int, now: float | None) -> None:
        self._hot.execute(sql.CANCEL, {"now": now, "id": job_id})

    def requeue_dead(self, ids: list[int] | None, now: float | None) -> list[int]:
        if ids is None:
            rows = self._hot.execute(sql.REQUEUE_DEAD, (now,)).fetchall()
        else:
            rows = self._hot.execute(sql.REQUEUE_DEAD_IDS, (now, json.dumps(ids))).fetchall()
        return [row[0] for row in rows]

    def purge_bounds(self) -> tuple[int | None, int | None]:
        return self._hot.execute(sql.ID_RANGE).fetchone()

    def created_after(self, after: int) -> tuple[int, float] | None:
        return self._hot.execute(sql.CREATED_FROM, (after,)).fetchone()

    def purge_window(self, window: PurgeWindow, archive: bool) -> tuple[int, int]:
        """Archive, then delete, one window's rows. The two statements cannot split: this
        transaction holds SQLite's one write lock from BEGIN IMMEDIATE on, so no other
        connection commits between them and both see the same rows."""
        params = {**window.params(), "states": json.dumps(window.states)}
        copied = self._hot.execute(sql.PURGE_ARCHIVE, params).rowcount if archive else 0
        return self._hot.execute(sql.PURGE, params).rowcount, copied

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

    def reclaim_space(self, pages: int | None) -> int:
        """Hand free pages back to the file system (all of them, or `pages`), so the file
        shrinks; returns how many were freed. Works on files labqueue created (auto_vacuum
        INCREMENTAL); on an older file it frees nothing until vacuum() has run once."""
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
        self._retry_busy(lambda: self.db.execute("VACUUM"))

    def stats(self, now: float | None) -> tuple[int, int, int, float | None, int]:
        live = {row[0]: row[1] for row in self._hot.execute(sql.STATS_LIVE)}
        ready, oldest = self._hot.execute(sql.STATS_READY, (now,)).fetchone()
        (dead,) = self._hot.execute(sql.STATS_DEAD).fetchone()
        age = None if oldest is None else now - oldest
        return live.get("queued", 0), live.get("running", 0), ready, age, dead

    def queue_stats(self, now: float | None) -> list[tuple]:
        with self._lenient_text():  # a queue name another program stored as invalid UTF-8
            return [
                (name, queued, running, ready, None if oldest is None else now - oldest)
                for name, queued, running, ready, oldest in self._hot.execute(sql.STATS_BY_QUEUE, (now, now))
            ]

    # -- pausing named queues ---------------------------------------------------------

    def pause(self, queue: str, reason: str | None, now: float | None) -> bool:
        params = {"queue": queue, "reason": reason, "now": now}
        return self._hot.execute(sql.PAUSE, params).fetchone() is not None

    def resume(self, queue: str) -> bool:
        return self._hot.execute(sql.RESUME, {"queue": queue}).fetchone() is not None

    def paused(self) -> list[tuple[str, float, str | None]]:
        with self._lenient_text():
            return [tuple(row) for row in self._hot.execute(sql.PAUSED).fetchall()]

    def paused_names(self) -> list[str]:
        try:
            return [row[0] for row in self._hot.execute(sql.PAUSED).fetchall()]
        except sqlite3.OperationalError as exc:  # a file opened as it is (schema=None), from before v3
            if "no such table" in str(exc):
                return []
            raise

    # -- reading jobs back ------------------------------------------------------------

    def job(self, job_id: int) -> JobRecord | None:
        with self._lenient_text():
            row = self.db.execute(sql.JOB, (job_id,)).fetchone()
        return None if row is None else record(row)

    def jobs(self, chosen: JobFilter) -> list[JobRecord]:
        states, limit = chosen.states, chosen.limit
        term = None
        if states is not None and set(states) <= {"queued", "running"}:
            term = sql.LIVE_STATES
        elif states == ["dead"]:
            term = sql.DEAD_STATE
        statement = sql.LISTINGS[chosen.newest, term]
        params = {
            **chosen.params(),
            "states": None if states is None else json.dumps(states),
            "limit": -1 if limit is None else limit,
            "before": validate.MAX_SQLITE_INT if chosen.before is None else chosen.before,
        }
        with self._lenient_text():
            return [record(row) for row in self.db.execute(statement, params)]

    @contextmanager
    def _lenient_text(self) -> Iterator[None]:
        """Read any row, even one whose text another program stored as invalid UTF-8
        (its bad bytes shown as escapes): rows read back are for people to look at."""
        self.db.text_factory = lenient_text
        try:
            yield
        finally:
            self.db.text_factory = str

    def counts(self) -> dict[str, int]:
        return {row[0]: row[1] for row in self._hot.execute(sql.COUNTS)}

    @contextmanager
    def snapshot(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """One read transaction (BEGIN DEFERRED: no lock until the first read, then a
        snapshot), writes refused by query_only until it ends. With a `timeout`, a statement
        still running that many seconds after the block began is interrupted (SQLite has no
        statement timeout: a progress handler asks the clock every few thousand steps)."""
        self.db.execute("PRAGMA query_only = ON")
        if timeout is not None:
            deadline = time.monotonic() + timeout
            self.db.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            self._own(sql.BEGIN_READ)
            try:
                yield self.db
            finally:
                self._undo()  # nothing was written: ending it is all a rollback does
        finally:
            if timeout is not None:
                self.db.set_progress_handler(None, 0)
            self.db.execute("PRAGMA query_only = OFF")

    def queue_totals(self, now: float | None) -> tuple[dict[str, int], dict[str, int]]:
        with self._lenient_text():
            scheduled = dict(self._hot.execute(sql.SCHEDULED_BY_QUEUE, {"now": now}).fetchall())
            return scheduled, dict(self._hot.execute(sql.DEAD_BY_QUEUE).fetchall())

    def throughput(
        self, now: float | None, window: float, step: float, after: int = 0
    ) -> list[tuple[str, str, int, int]]:
        with self._lenient_text():
            params = {"now": now, "window": window, "step": step, "after": after}
            return [tuple(row) for row in self._hot.execute(sql.THROUGHPUT, params)]

    def close(self) -> None:
        for waiter in (self._waiter, self._finish_waiter):
            if waiter is not None:
                waiter.close()
        self.db.close()


class _Transaction:
    """SqliteDriver.transaction(). A class rather than a generator: the worker opens one
    per batch, and a generator's context manager costs it about 2 µs more."""

    __slots__ = ("_driver",)

    def __init__(self, driver: SqliteDriver) -> None:
        self._driver = driver

    def __enter__(self) -> sqlite3.Connection:
        self._driver._start()
        return self._driver.db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        self._driver._end(failed=kind is not None)


def is_busy(exc: BaseException) -> bool:
    """A lock another connection held past the busy timeout (SQLite's "database is locked"
    or "busy"): the driver waits again; a migration backs off and tries again."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    message = str(exc)
    return "locked" in message or "busy" in message
