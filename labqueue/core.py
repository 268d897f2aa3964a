"""The queue's rules, written once: every argument check, the payload rules, fencing,
backoff, group commit's batch and settle logic, purge windows, periodic keys, the Job
types and the translation of database errors. A backend is a driver (labqueue.drivers)
that owns only its connection, its SQL text, its clock and its wake-up channel.

    Queue(driver)  <-  JobQueue (labqueue.queue: one SQLite file)
                   <-  PgJobQueue (labqueue.postgres: one schema of a PostgreSQL database)

The split follows River's driver interface: the queue decides, the driver runs one
statement (or a few) per decision and reports rows back.
"""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NoReturn, Protocol, TypeVar

from . import validate
from .errors import (
    CannotCancel,
    CannotOpen,
    ConnectionLost,
    EffectEndedTransaction,
    InvalidArgument,
    JobNotFound,
    LabqueueError,
    NoResult,
    PayloadNotSerializable,
    QueueBusy,
    ResultNotSerializable,
    StorageFull,
    WaitTimedOut,
)
from .redaction import redact
from .validate import DEFAULT_QUEUE, MAX_CLAIM_LIMIT, STATES

# The most characters of an error message a job keeps.
MAX_ERROR_CHARS = 500
# The deepest nesting of lists and dicts a payload may have. Python's json decodes far
# deeper, but not without limit: a payload enqueue accepts must always be readable.
MAX_PAYLOAD_DEPTH = 100
LAST_ATTEMPT_EXPIRED = "lease expired on the last attempt"
# The most steps throughput() counts in (a chart's bars).
MAX_THROUGHPUT_STEPS = 10_000
# The longest return value a job keeps, as JSON text (characters): a result is a job's
# answer (a file name, a count, a small record), not its data.
MAX_RESULT_CHARS = 65_536
# The most characters of a failed attempt's traceback a job keeps: its last ones, where
# the exception was raised.
MAX_TRACEBACK_CHARS = 4_000
# How an attempt ended, as a job's attempt log says it ("running": it has not ended).
OUTCOMES = ("done", "failed", "timed out", "lease lost", "cancelled", "given back", "running")
# A producer waiting for a job to finish reads it again at least this often: a hint only
# ends a wait early (labqueue.wakeup), and PostgreSQL has none for it (it polls).
RESULT_POLL = 0.5
# How long a queue object trusts its reading of the paused queues: a pause reaches every
# worker within this many seconds, at the cost of one tiny read each time.
PAUSES_READ_EVERY = 1.0

Clock = Callable[[], float]
Effect = Callable[[Any], Any]
T = TypeVar("T")

__all__ = [
    "MAX_CLAIM_LIMIT",
    "MAX_ERROR_CHARS",
    "MAX_PAYLOAD_DEPTH",
    "MAX_RESULT_CHARS",
    "STATES",
    "Attempt",
    "Finished",
    "Job",
    "JobRecord",
    "JobResult",
    "Purged",
    "Queue",
    "Result",
    "new_token",
]


@dataclass(slots=True)
class Job:
    """One claimed job, as the worker that holds its lease sees it. Read it, do not
    change it. (It is not a frozen dataclass: a frozen one's __init__ sets each field
    through object.__setattr__, which costs more than a no-op job's handler, once per
    job on the worker's path. Nothing depends on the object staying as it was: the
    fence is in the database, so a changed lease_token only gets its reports refused.)"""

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
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    started_at: float | None = None  # when the current (or last) attempt's claim leased it
    result: str | None = None  # the return value as JSON text; NULL: None, or none yet
    attempt_log: str | None = None  # the ended attempts but a done one, a JSON array


@dataclass(frozen=True)
class Purged:
    """What one purge() did: rows removed (and archived, if asked), in how many write
    transactions, and the longest of them, from BEGIN to COMMIT, in seconds."""

    removed: int
    archived: int
    batches: int
    longest_hold_s: float


@dataclass(slots=True)
class Finished:
    """What running one claimed job came to, for settle(): a success (with the effect
    to commit alongside the completion, if any) or a failure (`error` set). Made once
    per job, so, like Job, not frozen."""

    job: Job
    effect: Effect | None = None
    error: str | None = None
    retry: bool = True
    exception: BaseException | None = field(default=None, compare=False, repr=False)  # for the log
    result: str | None = None  # the return value as JSON text (result_json); None: it returned None


class Result:
    """What a handler returns to give its job both a return value and an effect:
    ``return labqueue.Result({"file": name}, effect=lambda db: db.execute(...))``. The
    value is stored as the job's result and the effect runs in the completing
    transaction, both under the job's fence. (A handler returning a callable alone
    returns an effect; any other value is its result.)"""

    __slots__ = ("effect", "value")

    def __init__(self, value: Any = None, *, effect: Effect | None = None) -> None:
        check_effect(effect)
        self.value = value
        self.effect = effect

    def __repr__(self) -> str:
        return f"Result({self.value!r:.80}, effect={self.effect!r:.60})"


def result_json(value: Any) -> str | None:
    """A return value as the JSON text a job keeps (None for None: a job done without a
    stored value returned None), or ResultNotSerializable saying why not: the payload's
    rules (JSON, no NaN, string keys, bounded nesting) and at most MAX_RESULT_CHARS."""
    if value is None:
        return None
    try:
        text = to_json(value)
    except PayloadNotSerializable as exc:
        raise ResultNotSerializable(str(exc).replace("payload", "return value")) from None
    if len(text) > MAX_RESULT_CHARS:
        raise ResultNotSerializable(
            f"the return value is {len(text)} characters as JSON, more than MAX_RESULT_CHARS = "
            f"{MAX_RESULT_CHARS}: store large output elsewhere and return where it is"
        )
    return text


def returned_parts(value: Any) -> tuple[Effect | None, Any]:
    """A handler's return value as (effect, result): a callable is the effect, a Result
    carries both, anything else is the result."""
    if value is None:
        return None, None
    if type(value) is Result:
        return value.effect, value.value
    if callable(value):
        return value, None
    return None, value


def split_return(value: Any) -> tuple[Effect | None, str | None]:
    """returned_parts(), the result as the JSON text a job keeps (result_json)."""
    effect, result = returned_parts(value)
    return effect, result_json(result)


@dataclass(frozen=True)
class Attempt:
    """One attempt at a job, as its attempt log keeps it: its number, the worker that held
    it, when its claim leased it and when it ended, and how (OUTCOMES). A failed or
    timed-out attempt keeps its exception's class path, message and traceback (bounded,
    passwords redacted); the names are Django's TaskError's."""

    attempt: int
    worker: str | None
    started_at: float | None
    finished_at: float | None
    outcome: str
    exception_class_path: str | None = None
    message: str | None = None
    traceback: str | None = None


def attempts_of(record: JobRecord) -> list[Attempt]:
    """Every attempt of a job, oldest first: the ended ones its log holds, then the one
    its row describes (the attempt that succeeded, or the one running now), which is never
    logged: the done attempt costs the worker no write. Entries the log cannot hold as
    attempts (another program's writing) are left out."""
    found: list[Attempt] = []
    try:
        logged = json.loads(record.attempt_log) if record.attempt_log else []
    except (TypeError, ValueError):
        logged = []
    names = {f.name for f in Attempt.__dataclass_fields__.values()}
    for entry in logged if isinstance(logged, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("attempt"), int) and entry.get("outcome"):
            found.append(Attempt(**{k: v for k, v in entry.items() if k in names}))
    last = found[-1] if found else None
    this_one_logged = last is not None and last.attempt == record.attempts and last.outcome == "lease lost"
    if record.state == "done" and record.attempts > 0:
        found.append(Attempt(record.attempts, record.worker, record.started_at, record.finished_at, "done"))
    elif record.state == "running" and not this_one_logged:
        found.append(Attempt(record.attempts, record.worker, record.started_at, None, "running"))
    return found


@dataclass(frozen=True)
class JobResult:
    """What became of a job (Queue.result): its state, its return value and its attempts.
    The field names are those of Django's TaskResult, so an adapter maps them one to one:
    `status` is the job's state, `errors` the attempts that raised, `attempts` how many
    attempts were made (`attempt_log` has them all), `worker_ids` who ran them."""

    id: int
    kind: str
    status: str
    enqueued_at: float
    started_at: float | None
    finished_at: float | None
    last_attempted_at: float | None
    attempts: int
    worker_ids: list[str]
    errors: list[Attempt]
    attempt_log: list[Attempt]
    result_text: str | None = field(repr=False, default=None)

    @property
    def finished(self) -> bool:
        """Whether the job has reached an end it stays at: done, dead or cancelled."""
        return self.status in ("done", "dead", "cancelled")

    @property
    def return_value(self) -> Any:
        """What the handler returned (None when it returned None). NoResult until the job
        is done, and for a job that ended dead or cancelled: no value is not None."""
        if self.status != "done":
            raise NoResult(f"job {self.id} is {self.status}: it has no return value")
        return None if self.result_text is None else decode_payload(self.result_text)


def job_result(record: JobRecord) -> JobResult:
    """A stored row as its JobResult."""
    log = attempts_of(record)
    return JobResult(
        id=record.id,
        kind=record.kind,
        status=record.state,
        enqueued_at=record.created_at,
        started_at=log[0].started_at if log else None,
        finished_at=record.finished_at,
        last_attempted_at=log[-1].started_at if log else None,
        attempts=len([a for a in log if a.outcome != "given back"]),
        worker_ids=[a.worker for a in log if a.worker is not None],
        errors=[a for a in log if a.exception_class_path is not None],
        attempt_log=log,
        result_text=record.result,
    )


def exception_details(
    exc: BaseException | None, error: str, *locations: object
) -> tuple[str | None, str, str | None]:
    """A failed attempt's (exception class path, message, traceback) for its log entry:
    the message bounded as last_error is, the traceback's last MAX_TRACEBACK_CHARS
    characters, both with the passwords of `locations` (the queue's database) redacted.
    Without an exception (a failure given as text), the text is the message."""
    if exc is None:
        return None, stored_error(redact(error, *locations)), None
    kind = type(exc)
    path = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    try:
        message = str(exc)
    except Exception:
        message = error
    text = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "...\n" + text[-MAX_TRACEBACK_CHARS:]
    return path, stored_error(redact(message, *locations)), stored_error_text(redact(text, *locations))


# JSONDecoder.__init__ sets scan_once (the C scanner); typeshed does not declare it
_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decode_payload(text: str) -> Any:
    """json.loads(text), with json.loads's own results and errors, at a fraction of its
    cost for text that is one JSON value and nothing around it (what labqueue stores):
    the decoder's C scanner is called directly, and only text it does not read to the
    end (whitespace around the value, or no value at all) goes through json.loads."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def new_token() -> str:
    """A fresh lease token: 128 random bits. Every claim, single or batch, takes its
    token from here."""
    return os.urandom(16).hex()  # secrets.token_hex(16), without its two calls in between


# -- the driver: what a backend must do ---------------------------------------------

# Per kind, the concurrency rule a handler was registered with (labqueue.handlers.handler):
# (limit, key of a payload or None: the kind's own key). enqueue() applies it to jobs of
# that kind given no key or limit of their own, in a process that registered the handler.
KIND_LIMITS: dict[str, tuple[int, Callable[[Any], str] | None]] = {}


def kind_key(kind: str) -> str:
    """The concurrency key of a kind limited as a whole (a handler given no key)."""
    return f"kind:{kind}"


# A claimed row as every driver returns it.
ClaimedRow = tuple  # (id, kind, payload, attempts, max_attempts, lease_token, visible_at, key, limit)
# What a key holds now: its running jobs with a live lease, and the strictest limit among
# them (None when it runs none). Driver.held answers it per key; within_limits reads it.
Held = tuple[int, "int | None"]
CLAIMED_KEY = 7  # where a claimed row holds its concurrency key (and its limit, next)

# What the queue hands a driver, checked and decided: each a small frozen record whose
# fields are the names the drivers' SQL reads (params(): them as a dict, a fresh one).


class _Params:
    __slots__ = ()

    def params(self) -> dict[str, Any]:
        """The fields by name, for the driver's named SQL parameters (a new dict)."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Scope(_Params):
    """Which queues a claim, a look or a wait serves (scope_of): `name` picks the driver's
    statement (sql.SCOPES: "all", "default", "one", "some", "some_default", "all_but"; or
    "none", when every queue asked for is paused and nothing may be claimed)."""

    name: str
    queue: str | None = None  # "one"
    queues: list[str] | None = None  # "some", "some_default"
    paused: list[str] | None = None  # "all_but"

    def params(self) -> dict[str, Any]:
        return {"queue": self.queue, "queues": self.queues, "paused": self.paused}


@dataclass(frozen=True)
class NewJob(_Params):
    """One job for Driver.insert: enqueue()'s checked values, the payload as JSON text."""

    kind: str
    payload: str
    delay: float
    max_attempts: int
    dedupe_key: str | None
    priority: int
    queue: str
    now: float | None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None


@dataclass(frozen=True)
class NewJobs(_Params):
    """Jobs of one kind for Driver.insert_many, ready now (enqueue_many)."""

    kind: str
    payloads: list[str]
    max_attempts: int
    priority: int
    queue: str
    now: float | None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None


@dataclass(slots=True)  # not frozen, and params() spelt out: one is built per claim, on the hot path
class Claim(_Params):
    """One claim for Driver.claim: lease up to `limit` ready jobs in `scope` to `worker`
    under a fresh `token` until `lease_end` (None on a server's clock: its now +
    lease_seconds), and retire a lease that ran out on its last attempt with `reason`."""

    scope: Scope
    now: float | None
    lease_seconds: float
    lease_end: float | None
    token: str
    worker: str
    limit: int
    reason: str

    def params(self) -> dict[str, Any]:
        scope = self.scope
        return {
            "now": self.now,
            "lease_seconds": self.lease_seconds,
            "lease_end": self.lease_end,
            "token": self.token,
            "worker": self.worker,
            "limit": self.limit,
            "reason": self.reason,
            "queue": scope.queue,
            "queues": scope.queues,
            "paused": scope.paused,
        }


@dataclass(frozen=True)
class Failure(_Params):
    """A fenced failure for Driver.fail: job `id` under `token`, retried at `retry_at`
    (None on a server's clock: its now + delay) unless `final`, with `error` as stored."""

    id: int
    token: str
    error: str
    final: bool
    delay: float
    retry_at: float | None
    now: float | None
    outcome: str = "failed"  # the attempt log's word for it: "failed" or "timed out"
    error_class: str | None = None
    message: str | None = None
    traceback: str | None = None


@dataclass(frozen=True)
class PurgeWindow(_Params):
    """One window of purge() for Driver.purge_window: jobs in `states` with ids after
    `after`, at most `batch` of them, finished before `before`."""

    states: list[str]
    before: float
    after: int
    batch: int
    now: float | None


@dataclass(frozen=True)
class JobFilter(_Params):
    """Which stored rows Driver.jobs reads: None matches any state, kind or queue, and
    `limit` None reads all; `newest` first, or in id order. `before`: only ids below it
    (a page of a listing read by key, never by OFFSET: the next page starts below the
    last id shown); None: no bound."""

    states: list[str] | None
    kind: str | None
    queue: str | None
    limit: int | None
    newest: bool
    before: int | None = None
    concurrency_key: str | None = None


class Driver(Protocol):
    """One backend's connection, SQL, clock and wake-up channel. Every method runs its
    statements on the driver's connection; methods marked (tx) run inside the queue's
    transaction. `now` is the clock's reading, or None for the database server's own."""

    where: str  # the database, as messages name it (a path, or a URL without its password)

    @property
    def clock(self) -> Clock | None: ...
    @property
    def db(self) -> Any: ...
    def transaction(self) -> AbstractContextManager[Any]: ...  # one write transaction
    # a nested one, for one job's effect: the block gets `undo`, which rolls it back
    def savepoint(self) -> AbstractContextManager[Callable[[], None]]: ...
    def classify(self, exc: BaseException) -> str | None: ...
    def server_time(self) -> float: ...
    def insert(self, row: NewJob) -> int | None: ...  # (tx)
    def insert_many(self, rows: NewJobs) -> None: ...  # (tx)
    def hint_in_transaction(self) -> None: ...  # (tx)
    def hint_after_commit(self) -> int: ...
    def wake(self) -> int: ...
    def ready(self, scope: Scope, now: float | None) -> bool: ...
    def next_due(self, scope: Scope) -> float | None: ...
    def claim(self, claim: Claim, *, batch: bool) -> list[ClaimedRow]: ...  # (tx)
    # A driver may also offer settle_in_one_call(done, now, claim[, results]): plain
    # completions ((id, token) pairs), completions with a value ((id, token, JSON text))
    # and a batch claim in one statement of its own, returning (ids completed, claimed
    # rows), or None when it cannot (PostgreSQL's sql.SETTLE).
    # concurrency keys: wait until no other claim counts these keys (PostgreSQL; SQLite's
    # write lock already does), then their running jobs with a live lease and the strictest
    # limit among them, {key: (n, limit)}, leaving out the rows leased under `token`
    def lock_keys(self, keys: list[str]) -> None: ...  # (tx)
    def held(self, keys: list[str], now: float | None, token: str | None = None) -> dict[str, Held]: ...
    def waiting_on_keys(self, now: float | None) -> list[tuple[str, int]]: ...
    def claimed_by(self, token: str) -> list[ClaimedRow]: ...  # the running rows leased under `token`
    def bury(self, job_id: int, token: str, reason: str, now: float | None) -> None: ...  # (tx)
    def complete(self, job: Job, now: float | None, result: str | None = None) -> bool: ...  # (tx)
    def complete_many(self, ids: list[int], token: str, now: float | None) -> list[int]: ...  # (tx)
    def run_effect(self, job: Job, effect: Effect) -> None: ...  # (tx)
    def fail(self, failure: Failure) -> Literal["queued", "dead"] | None: ...  # (tx)
    def extend(self, job: Job, now: float | None, lease_seconds: float) -> float | None: ...  # (tx)
    def release(self, job: Job, now: float | None) -> bool: ...  # (tx)
    def put_back(self, job: Job, now: float | None, delay: float, note: str) -> bool: ...  # (tx)
    def note_crash(  # (tx)
        self, worker: str, message: str, running: int | None, running_message: str, now: float | None = None
    ) -> list[int]: ...
    def finished_within(self, now: float | None, window: float) -> list[tuple[str, str, int]]: ...
    def longest_waiting(self, now: float | None) -> tuple[int, float] | None: ...
    def state_of(self, job_id: int, *, lock: bool = False) -> str | None: ...  # (tx)
    def cancel(self, job_id: int, now: float | None) -> None: ...  # (tx)
    def requeue_dead(self, ids: list[int] | None, now: float | None) -> list[int]: ...  # (tx)
    def purge_bounds(self) -> tuple[int | None, int | None]: ...
    def created_after(self, after: int) -> tuple[int, float] | None: ...
    def purge_window(self, window: PurgeWindow, archive: bool) -> tuple[int, int]: ...  # (tx)
    def space(self) -> dict[str, int]: ...
    def reclaim_space(self, pages: int | None) -> int: ...
    def vacuum(self) -> None: ...
    def stats(self, now: float | None) -> tuple[int, int, int, float | None, int]: ...
    def queue_stats(self, now: float | None) -> list[tuple]: ...
    def job(self, job_id: int) -> JobRecord | None: ...
    def jobs(self, chosen: JobFilter) -> list[JobRecord]: ...
    def counts(self) -> dict[str, int]: ...
    # one read-only transaction: every read in the block sees one snapshot, no lock is taken;
    # with a timeout, a statement still running after it is stopped (classify(): "timeout")
    def snapshot(self, timeout: float | None = None) -> AbstractContextManager[Any]: ...
    # per named queue: queued jobs not yet due, and dead jobs ({queue: n} each)
    def queue_totals(self, now: float | None) -> tuple[dict[str, int], dict[str, int]]: ...
    # jobs finished in the last `window` s: (queue, state, steps ago, n), `step` s a step,
    # among the jobs whose id is above `after` (0: every job)
    def throughput(
        self, now: float | None, window: float, step: float, after: int = 0
    ) -> list[tuple[str, str, int, int]]: ...
    def pause(self, queue: str, reason: str | None, now: float | None) -> bool: ...  # (tx)
    def resume(self, queue: str) -> bool: ...  # (tx)
    def paused(self) -> list[tuple[str, float, str | None]]: ...
    def paused_names(self) -> list[str]: ...
    def listen(self) -> bool: ...
    def wait_for_jobs(self, timeout: float) -> bool: ...
    # producers waiting for a job to finish: a hint after a settle that finished jobs (never
    # raises), and a wait for one, which only sleeps where the driver has no such hint
    def hint_finished(self) -> None: ...
    def wait_for_finished(self, timeout: float, look: Callable[[], bool]) -> bool: ...
    def interrupt_wait(self) -> None: ...
    def reconnect(self) -> None: ...
    def close(self) -> None: ...


# -- errors: one translation for every backend ----------------------------------------

# What a driver's classify() may call a database error, and the labqueue error it becomes.
INFRASTRUCTURE = ("busy", "timeout", "readonly", "privilege", "full", "connection")
# The labqueue errors that are the database's failure, never a job's: a worker that meets
# one records no failure for the job it holds (the job stays leased, nothing was saved).
DATABASE_FAILURES = (QueueBusy, ConnectionLost, StorageFull, CannotOpen)


def translated(driver: Driver, exc: BaseException, *, timeout: float) -> BaseException:
    """The labqueue error a database error stands for (naming the database), or `exc`
    itself when it is none of INFRASTRUCTURE nor "too_long"."""
    if isinstance(exc, LabqueueError):
        return exc
    category = driver.classify(exc)
    # a server's message never names a password, but a client library's may quote its URL
    detail = redact(" ".join(str(exc).split()), getattr(driver, "url", None)) or type(exc).__name__
    where = driver.where
    if category == "busy":
        return QueueBusy(
            f"{where}: another connection held a lock for longer than the busy timeout of {timeout} s "
            f"(lock timeout; {detail}); nothing was changed"
        )
    if category == "timeout":
        return QueueBusy(
            f"{where}: a statement ran past the database's statement timeout ({detail}); nothing was changed"
        )
    if category == "readonly":
        return CannotOpen(
            f"{where}: cannot write ({detail}): the database is read-only for this connection (a "
            "read-only file, -wal or -shm file or folder, or a read-only server); nothing was changed"
        )
    if category == "privilege":
        return CannotOpen(
            f"{where}: this user lacks a privilege the queue needs ({detail}); nothing was changed"
        )
    if category == "full":
        return StorageFull(f"{where}: {detail}; the transaction was rolled back (disk or database full)")
    if category == "connection":
        return ConnectionLost(
            f"{where}: the connection to the database was lost ({detail}); the transaction in "
            "progress was rolled back unless its COMMIT had reached the server, and every lease "
            "stays fenced, so retrying after reconnect() applies nothing twice"
        )
    if category == "too_long":
        return InvalidArgument(
            f"{where}: a value is too large for the database ({detail}); nothing was written"
        )
    return exc


# -- the queue --------------------------------------------------------------------------


class _Transaction:
    """Queue._tx(): the driver's transaction, with a database error that stands for a
    labqueue error raised as that error. A class rather than a generator: the worker
    opens one per batch, and a generator's context manager costs it about 2 µs more."""

    __slots__ = ("_inner", "_queue")

    def __init__(self, queue: Queue, inner: AbstractContextManager[Any] | None = None) -> None:
        self._queue = queue
        self._inner = queue._d.transaction() if inner is None else inner  # or the driver's snapshot()

    def __enter__(self) -> Any:
        try:
            return self._inner.__enter__()
        except Exception as exc:  # BEGIN failed (a lock held past the timeout, a lost connection)
            self._queue._raise_translated(exc)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        # Never swallows: the block's exception goes on, rolled back (psycopg's transaction
        # would swallow a psycopg.Rollback, which nothing of the queue's raises at this level)
        try:
            handled = self._inner.__exit__(kind, exc, tb)
        except Exception as failure:  # COMMIT or ROLLBACK failed, or a new error replaced exc
            self._queue._raise_translated(failure)
        if isinstance(exc, Exception) and not handled:
            self._queue._raise_translated(exc)


class Queue:
    """A durable job queue over one driver: leases, fencing tokens, retries with
    full-jitter backoff, dead letters, heartbeats, group commit, cancel, purge.

    Every deadline (a job's run time, the end of its lease, its retry time) is an
    absolute reading of the queue's clock taken when it was set, compared with the clock
    at each claim. A step in the clock therefore moves all deadlines at once. Forward by
    d: every lease and delay is d shorter, so a live job may be claimed by a second
    worker, whose new token fences the first one out. Back by d: they all last d longer.
    Either way nothing is lost or finished twice: complete, fail and heartbeat check the
    token, and a heartbeat renews the lease from the clock's reading. A job with a
    concurrency key is the exception: its lease also holds a place of its key, which the
    claim gives away when the lease ends, so past its deadline its holder's reports are
    refused too (a keyed job's deadline is part of its fence)."""

    def __init__(self, driver: Driver, settings: dict[str, Any]) -> None:
        self._d = driver
        self.lease_seconds: float = settings["lease_seconds"]
        self.max_attempts: int = settings["max_attempts"]
        self.backoff_base: float = settings["backoff_base"]
        self.backoff_cap: float = settings["backoff_cap"]
        self.timeout: float = settings["timeout"]
        self.rng: Callable[[], float] = settings["rng"]
        self._checked_worker: str | None = None
        self._paused: tuple[str, ...] = ()
        self._paused_read_at = -math.inf
        self._secret_locations: tuple[object, ...] = ()

    # -- plumbing -------------------------------------------------------------

    def keep_secret(self, *locations: object) -> None:
        """Mask the passwords of `locations` (database URLs a worker knows) in every error,
        note and reason this queue stores, besides any URL's password, which is always masked."""
        self._secret_locations += locations

    @property
    def db(self) -> Any:
        """The driver's connection (sqlite3 or psycopg): effects and the course use it."""
        return self._d.db

    @property
    def clock(self) -> Clock | None:
        """The clock deadlines are written in: a callable, or None for a database server's own."""
        return self._d.clock

    def _now(self) -> float | None:
        clock = self._d.clock
        return None if clock is None else clock()

    def _stored(self, error: str) -> str:
        return stored_error(error, *self._secret_locations)

    def _tx(self) -> _Transaction:
        """Run the block as one write transaction on the driver's connection: committed at
        its end, rolled back on any exception (KeyboardInterrupt included), and a database
        error that stands for a labqueue error raised as that error."""
        return _Transaction(self)

    def _raise_translated(self, exc: Exception) -> NoReturn:
        """Raise `exc` as the labqueue error it stands for, or as it is (called by the
        handler that caught it)."""
        mapped = translated(self._d, exc, timeout=self.timeout)
        if mapped is exc:
            raise exc
        raise mapped from exc

    def _read(self, action: Callable[[], T]) -> T:
        """A read outside a transaction, its database errors translated as _tx()'s are."""
        try:
            return action()
        except Exception as exc:
            self._raise_translated(exc)

    def server_time(self) -> float:
        """The clock deadlines are compared with, now (one round trip on a database server)."""
        return self._read(self._d.server_time)

    def reconnect(self) -> None:
        """Open the driver's connection again after ConnectionLost (a server restart, a
        terminated session). Listening for hints resumes; leases are untouched."""
        self._read(self._d.reconnect)

    def _check_worker(self, worker: object) -> None:
        if worker is not self._checked_worker:  # the same name again costs one comparison
            validate.text("worker", worker)  # not indexed: no length limit
            self._checked_worker = worker  # type: ignore[assignment]

    def _scope(self, queues: Sequence[str] | None) -> Scope:
        """scope_of(queues), leaving out the paused queues (read at most once a second)."""
        now = time.monotonic()
        if now - self._paused_read_at >= PAUSES_READ_EVERY:
            self._paused = tuple(self._read(self._d.paused_names))
            self._paused_read_at = now
        return scope_of(queues, self._paused)

    # -- pausing named queues ---------------------------------------------------------

    def pause(self, queue: str, *, reason: str | None = None) -> bool:
        """Stop workers from taking jobs from `queue` (any queue name, "default" too) until
        resume(). Jobs already running finish; queued ones wait, untouched; producers still
        enqueue. Every queue object sees it within PAUSES_READ_EVERY seconds. Returns False
        if the queue was paused already (its first pause and reason are kept)."""
        queue = validate.queue_name(queue)
        reason = None if reason is None else self._stored(validate.text("reason", reason))
        with self._tx():
            paused = self._d.pause(queue, reason, self._now())
        self._paused_read_at = -math.inf
        return paused

    def resume(self, queue: str) -> bool:
        """Let workers take jobs from `queue` again. Returns False if it was not paused."""
        queue = validate.queue_name(queue)
        with self._tx():
            resumed = self._d.resume(queue)
            if resumed:
                self._d.hint_in_transaction()
        if resumed:
            self._d.hint_after_commit()
        self._paused_read_at = -math.inf
        return resumed

    def paused(self) -> dict[str, dict[str, Any]]:
        """The paused queues: when each was paused (the queue's clock) and why."""
        return {name: {"paused_at": at, "reason": reason} for name, at, reason in self._read(self._d.paused)}

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
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
    ) -> int | None:
        """Add one job, ready after `delay` seconds, and return the new row's id. If a
        job with this dedupe_key is already stored, nothing changes and the result is None.
        A higher `priority` is claimed first; `queue` names the queue it waits in (a
        worker may take from some queues only). Idle workers are woken.

        With a `concurrency_key`, no claim hands the job out while `concurrency_limit`
        jobs of that key are running (a lease that ran out frees its place); jobs behind
        it are taken meanwhile. Without them, a kind whose handler was registered with a
        concurrency_limit in this process gets the handler's (concurrency_rule()).

        The payload must read back as it went in: JSON without NaN or infinity, nested
        at most MAX_PAYLOAD_DEPTH deep, dict keys strings (JSON would turn 1 into "1",
        and {1: 'a', '1': 'b'} would lose a value); tuples come back as lists.
        Anything else raises PayloadNotSerializable."""
        row = NewJob(
            kind=validate.kind(kind),
            delay=validate.seconds("delay", delay, allow_zero=True),
            max_attempts=self.max_attempts
            if max_attempts is None
            else validate.attempts("max_attempts", max_attempts),
            dedupe_key=validate.dedupe_key(dedupe_key),
            priority=validate.priority(priority),
            queue=validate.queue_name(queue),
            payload=to_json(payload),
            now=self._now(),
        )
        key, limit = concurrency_rule(kind, payload, concurrency_key, concurrency_limit)
        if key is not None:
            row = replace(row, concurrency_key=key, concurrency_limit=limit)
        with self._tx():
            job_id = self._d.insert(row)
            if job_id is not None and row.delay == 0:
                self._d.hint_in_transaction()
        if job_id is not None and row.delay == 0:
            self._d.hint_after_commit()
        return job_id

    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
    ) -> int:
        """Add many jobs in one transaction: all of them, or (on any error) none.
        Each payload follows enqueue()'s rules. A `concurrency_key` (and limit) applies to
        every one of them; a handler's rule that takes its key from the payload does not
        apply here (enqueue them one by one)."""
        validate.kind(kind)
        priority = validate.priority(priority)
        queue = validate.queue_name(queue)
        key, limit = concurrency_rule(kind, None, concurrency_key, concurrency_limit, per_payload=False)
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Iterable):
            raise InvalidArgument(f"payloads must be an iterable of payloads, got {payloads!r:.80}")
        bodies = []
        for index, payload in enumerate(payloads):
            try:
                bodies.append(to_json(payload))
            except PayloadNotSerializable as exc:
                raise PayloadNotSerializable(f"payload #{index}: {exc}") from None
        if not bodies:
            return 0
        rows = NewJobs(kind, bodies, self.max_attempts, priority, queue, self._now(), key, limit)
        with self._tx():
            self._d.insert_many(rows)
            self._d.hint_in_transaction()
        self._d.hint_after_commit()
        return len(bodies)

    def wake_workers(self) -> int:
        """Hint idle workers that a job may be ready (never inside a transaction).
        Returns how many hints went out; never raises. A hint only ends a wait early."""
        try:
            return self._d.wake()
        except Exception:  # a hint that cannot be sent costs a poll, never a job
            return 0

    # -- consuming --------------------------------------------------------------

    def _claim_params(self, worker: str, limit: int, scope: Scope, token: str | None = None) -> Claim:
        now = self._now()
        lease_end = None if now is None else now + self.lease_seconds
        token = new_token() if token is None else validate.text("claim_token", token)
        return Claim(scope, now, self.lease_seconds, lease_end, token, worker, limit, LAST_ATTEMPT_EXPIRED)

    def _claimed(self, claim: Claim, *, batch: bool) -> list[Job]:
        """The claim inside the caller's transaction: the driver leases rows, and each
        becomes a Job, or is dead-lettered with the reason when it cannot be read (no
        retry can change a stored payload, so that job is never run)."""
        rows = self._d.claim(claim, batch=batch)
        if not batch:
            rows = self._fit_limits(rows, claim)
        return self._jobs_of(rows, claim.now)

    def _fit_limits(self, rows: list[ClaimedRow], claim: Claim) -> list[ClaimedRow]:
        """claim()'s one statement leases before anything can count: two jobs of one key
        in a claim, or (on PostgreSQL) two workers' claims at the same moment, can take a
        key past its limit. Counted again with the keys locked (this claim's own rows left
        out), the later ones go back, queued and ready at once, their attempt returned (as
        release() does)."""
        keys = keys_of(rows, CLAIMED_KEY)
        if not keys:
            return rows
        self._d.lock_keys(keys)
        fit, over = within_limits(rows, CLAIMED_KEY, self._d.held(keys, claim.now, claim.token))
        for row in over:
            self._d.release(Job(row[0], row[1], None, row[3], row[4], row[5], row[6]), claim.now)
        return fit

    def _jobs_of(self, rows: list[ClaimedRow], now: float | None) -> list[Job]:
        """The claimed rows as jobs, inside the claim's transaction; one that cannot be
        read is dead-lettered there and left out."""
        jobs, unreadable = self._read_rows(rows)
        self._bury(unreadable, now)
        return jobs

    @staticmethod
    def _read_rows(rows: list[ClaimedRow]) -> tuple[list[Job], list[ClaimedRow]]:
        """Claimed rows as jobs, sorted by id, and the rows that cannot be read."""
        jobs, unreadable = [], []
        rows.sort()  # by id: ids are unique, so no other column is compared
        for row in rows:
            kind, payload = row[1], row[2]
            if type(kind) is str and type(payload) is str:
                try:
                    jobs.append(Job(row[0], kind, decode_payload(payload), row[3], row[4], row[5], row[6]))
                    continue
                except (ValueError, RecursionError):
                    pass
            unreadable.append(row)
        return jobs, unreadable

    def _bury(self, unreadable: list[ClaimedRow], now: float | None) -> None:
        """Dead-letter claimed rows that cannot be read, with the reason (in a transaction)."""
        for row in unreadable:
            reason = f"unreadable job, not run: {describe_unreadable(row[1], row[2])}"
            self._d.bury(row[0], row[5], reason[:MAX_ERROR_CHARS], now)

    def claim(self, worker: str, *, limit: int = 1, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, highest priority first and then
        oldest first, from `queues` (None: every queue), returned sorted by id.

        Readiness is a single test, visible_at <= now. The column holds a queued job's
        start time and a running job's lease deadline, so an expired lease is picked up
        here and no reaper is needed. Jobs whose lease ran out on their last attempt
        become dead. A claimed row that cannot be read (its payload is not JSON text)
        is dead-lettered in the same transaction, with the reason, and left out; the
        rest of the batch is returned. `limit` is at most MAX_CLAIM_LIMIT. It looks
        before it locks: on an empty queue it returns [] after one read."""
        return self._look_then_claim(worker, limit, queues, batch=False)

    def claim_batch(self, worker: str, limit: int, *, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, oldest first, after a read has shown
        that something is ready (an empty queue costs no lock). A job handed out before
        (attempts > 0: its worker may have crashed on it) comes alone, so a job that
        kills its worker cannot take a batch of others down with it twice (batch_size())."""
        return self._look_then_claim(worker, limit, queues, batch=True)

    def _look_then_claim(
        self, worker: str, limit: int, queues: Sequence[str] | None, *, batch: bool
    ) -> list[Job]:
        limit = validate.claim_limit(limit)
        self._check_worker(worker)
        scope = self._scope(queues)
        if scope.name == "none" or not self._ready(scope):
            return []
        one_call = getattr(self._d, "settle_in_one_call", None) if batch else None
        if one_call is not None:
            claim = self._claim_params(worker, limit, scope)
            settled = self._read(lambda: one_call([], claim.now, claim))
            if settled is not None:
                return self._claimed_jobs(settled[1], claim)
        with self._tx():
            return self._claimed(self._claim_params(worker, limit, scope), batch=batch)

    def claim_next(self, worker: str, *, queues: Sequence[str] | None = None) -> Job | None:
        """Lease the next ready job to `worker`, or return None. The same rules as
        claim(worker): oldest first, attempts counted, and jobs whose lease ran out on
        their last attempt retired as dead. An unreadable row is dead-lettered and the
        next ready job is claimed instead."""
        self._check_worker(worker)
        scope = self._scope(queues)
        with self._tx():
            return self._claim_one(worker, scope)

    def _claim_one(self, worker: str, scope: Scope) -> Job | None:
        while scope.name != "none":  # an unreadable row is buried, and the next one claimed instead
            claim = self._claim_params(worker, 1, scope)
            rows = self._d.claim(claim, batch=True)
            if not rows:
                return None
            jobs = self._jobs_of(rows, claim.now)
            if jobs:
                return jobs[0]
        return None

    def complete(self, job: Job, effect: Effect | None = None, *, result: Any = None) -> bool:
        """Mark `job` done if this worker still holds its lease, with `result` (JSON, at
        most MAX_RESULT_CHARS as text) as its return value. `effect(db)` runs only
        once the fence has passed, inside the completing transaction, so its writes are
        saved together with the done state or not saved at all. Returns False, without
        running the effect or storing the result, for a stale lease.

        The effect must leave the transaction to labqueue: one that commits, rolls back
        or begins a transaction is stopped and raises EffectEndedTransaction, with
        everything rolled back."""
        check_job(job)
        check_effect(effect)
        value = result_json(result)
        with self._tx():
            if not self._d.complete(job, self._now(), value):
                return False
            if effect is not None:
                self._d.run_effect(job, effect)
        return True

    def complete_and_claim(
        self,
        job: Job,
        worker: str,
        effect: Effect | None = None,
        *,
        queues: Sequence[str] | None = None,
        result: Any = None,
    ) -> tuple[bool, Job | None]:
        """complete(job, effect), then claim_next(worker), in one write transaction.

        Returns (accepted, next job or None). The fence, the effect and its rollback
        are complete()'s: a stale lease returns False without running the effect and
        still claims; an effect that raises rolls back the completion and the claim
        together, and the exception propagates with the job still leased to us."""
        check_job(job)
        check_effect(effect)
        value = result_json(result)
        self._check_worker(worker)
        scope = self._scope(queues)
        with self._tx():
            accepted = self._d.complete(job, self._now(), value)
            if accepted and effect is not None:
                self._d.run_effect(job, effect)
            return accepted, self._claim_one(worker, scope)

    def fail(
        self,
        job: Job,
        error: str,
        *,
        retry: bool = True,
        exception: BaseException | None = None,
        timed_out: bool = False,
    ) -> Literal["queued", "dead"] | None:
        """Record a failure. Returns "queued" (a retry after full-jitter backoff),
        "dead" (out of attempts, or retry=False), or None for a stale lease. The
        error keeps its first MAX_ERROR_CHARS characters; text UTF-8 cannot encode
        (a lone surrogate) and NUL are kept as backslash escapes. The attempt is logged
        with the job, "failed" ("timed out" with `timed_out`), with the `exception`'s
        class, message and traceback when given (attempts_of)."""
        check_job(job)
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a string, got {type(error).__name__} {error!r:.80}")
        validate.flag("retry", retry)
        validate.flag("timed_out", timed_out)
        with self._tx():
            return self._fail(job, error, retry, self._now(), exception, timed_out)

    def _fail(
        self,
        job: Job,
        error: str,
        retry: bool,
        now: float | None,
        exception: BaseException | None = None,
        timed_out: bool = False,
    ) -> Literal["queued", "dead"] | None:
        """The fenced failure inside the caller's transaction: retried after backoff, or
        dead; its attempt logged with it (the same fenced statement)."""
        delay = self.backoff_delay(job.attempts)
        retry_at = None if now is None else now + delay
        kind, message, trace = exception_details(exception, error, *self._secret_locations)
        outcome = "timed out" if timed_out else "failed"
        failure = Failure(
            job.id,
            job.lease_token,
            self._stored(error),
            not retry,
            delay,
            retry_at,
            now,
            outcome,
            kind,
            message,
            trace,
        )
        return self._d.fail(failure)

    def fail_for_worker(self, job_id: int, worker: str, error: str) -> Literal["queued", "dead"] | None:
        """Record a failure on behalf of `worker`, a process that can no longer report: its
        supervisor (or watchdog) killed it past a handler's time limit. Fenced by the
        worker's name and the running state, the token read and checked in the same
        transaction: a job another worker took over since, or one finished, is left as it
        is (None). Otherwise as fail(job, error): "queued" for a retry after backoff, or
        "dead" on its last attempt."""
        validate.job_id(job_id)
        validate.text("worker", worker)
        error = validate.text("error", error)
        with self._tx():
            row = self._d.job(job_id)
            if row is None or row.state != "running" or row.worker != worker or not row.lease_token:
                return None
            job = Job(row.id, row.kind, None, row.attempts, row.max_attempts, row.lease_token, row.visible_at)
            return self._fail(job, error, True, self._now(), timed_out=True)

    def backoff_delay(self, attempts: int) -> float:
        """Full jitter: a uniform pick between 0 and a ceiling that doubles per attempt,
        up to backoff_cap. The doubling stops at the cap: 2 ** attempts is never
        computed past it, so any attempt number works."""
        return self.rng() * backoff_ceiling(attempts, self.backoff_base, self.backoff_cap)

    def heartbeat(self, job: Job) -> bool:
        """Move the lease deadline to now + lease_seconds. Returns False, changing
        nothing, once our token no longer matches a running job."""
        check_job(job)
        with self._tx():
            return self._d.extend(job, self._now(), self.lease_seconds) is not None

    # -- waiting for work -------------------------------------------------------------

    def any_ready(self, queues: Sequence[str] | None = None) -> bool:
        """Whether a claim would find something now: a job to run (in `queues`, None for
        every queue), or an expired lease on a last attempt to retire. One read and no
        write lock, so producers and busy workers carry on while an idle worker looks."""
        return self._ready(self._scope(queues))

    def _ready(self, scope: Scope) -> bool:
        if scope.name == "none":
            return False
        return self._read(lambda: self._d.ready(scope, self._now()))

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """When the next live job (in `queues`, None for every queue) is due by the clock:
        a delayed job's start, a retry's backoff, a lease's end (None when nothing is
        queued or running). An idle worker waits no longer than this."""
        scope = self._scope(queues)
        return None if scope.name == "none" else self._read(lambda: self._d.next_due(scope))

    def listen(self) -> bool:
        """Start listening for producers' hints (a worker calls it once, before its first
        idle wait). True if hints can reach this queue; False means wait_for_jobs() only
        sleeps (see the driver)."""
        return self._read(self._d.listen)

    def wait_for_jobs(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a producer's hint that a job was enqueued.
        True if one came. A hint is never the truth: look (any_ready) and claim after it."""
        timeout = validate.seconds("timeout", timeout, allow_zero=True)
        return self._read(lambda: self._d.wait_for_jobs(timeout))

    def interrupt_wait(self) -> None:
        """End a wait_for_jobs() in progress early where the driver can (a stop signal's
        handler calls it)."""
        self._d.interrupt_wait()

    # -- group commit: a batch per write transaction -------------------------------
    # The worker's path: claim a batch, run it, then report every job of it and claim
    # the next batch in one write transaction. Each job keeps its own rules: its
    # completion is fenced by its token, its effect commits with its completion or not
    # at all (a savepoint per job), its failure is retried or dead-lettered. What the
    # batch shares is the transaction, so one commit serves many jobs.

    def settle(
        self,
        finished: Sequence[Finished],
        *,
        claim_for: str | None = None,
        limit: int = 1,
        queues: Sequence[str] | None = None,
        claim_token: str | None = None,
        again: str | None = None,
    ) -> tuple[list[str], list[Job]]:
        """Report every job in `finished` in one write transaction and, when `claim_for`
        names a worker, claim its next batch of up to `limit` jobs in the same one.

        Returns each job's outcome ("done", "queued", "dead", "cancelled" for a job
        cancelled while it ran, or "lost" for a job whose lease was no longer ours) and
        the jobs claimed (from `queues`, None for every queue). A stale token rejects
        that job only; an effect that raises rolls back that job's completion only (a
        savepoint) and fails it with the error, while the rest of the batch still
        commits. A database failure (a lock or statement timeout, a lost connection, a
        full disk) is never counted as a job's failure: it raises, nothing of the batch
        is saved, and the same reports can be settled again (each is fenced). An effect
        that tries to end the transaction raises EffectEndedTransaction and nothing of
        the batch is saved, as complete() does.

        A settle repeated after a lost connection (its COMMIT may have reached the server
        with the reply lost) passes `again`, the reporting worker's name, and the same
        `claim_token` (the claim's lease token, chosen by the caller): the jobs an earlier
        try claimed under it are returned rather than stranded, and a completion the
        earlier try committed (the job done, last held by `again`) is reported "done",
        not "lost"."""
        for report in finished:
            check_job(report.job)
        scope = None
        if claim_for is not None:
            limit = validate.claim_limit(limit)
            self._check_worker(claim_for)
            scope = self._scope(queues)
            if scope.name == "none":
                scope = None
        if again is not None:
            earlier = self._earlier_try(finished, claim_token, again)
            if earlier is not None:
                return earlier
        one_call = getattr(self._d, "settle_in_one_call", None)
        if one_call is not None and all(r.error is None and r.effect is None for r in finished):
            now = self._now()
            claim = None if scope is None else self._claim_params(claim_for or "", limit, scope, claim_token)
            pairs = [(r.job.id, r.job.lease_token) for r in finished if r.result is None]
            valued = [(r.job.id, r.job.lease_token, r.result) for r in finished if r.result is not None]

            def call() -> tuple[list[int], list[ClaimedRow]] | None:
                if valued:  # completions with a value: the driver's call takes them too
                    return one_call(pairs, now, claim, valued)
                return one_call(pairs, now, claim) if pairs or claim else ([], [])

            settled = self._read(call)
            if settled is not None:
                done = set(settled[0])
                outcomes = self._read(lambda: [self._plain_outcome(r.job, done, again) for r in finished])
                if finished:
                    self._d.hint_finished()
                return outcomes, self._claimed_jobs(settled[1], claim)
        rows, claim = [], None
        with self._tx():
            now = self._now()
            done = self._complete_plain(finished, now)
            outcomes = [
                self._plain_outcome(r.job, done, again)
                if r.error is None and r.effect is None and r.result is None
                else self._settle_one(r, now, again)
                for r in finished
            ]
            if scope is not None:
                claim = self._claim_params(claim_for or "", limit, scope, claim_token)
                rows = self._d.claim(claim, batch=True)
        if finished:  # producers waiting for one of these jobs look again
            self._d.hint_finished()
        return outcomes, self._claimed_jobs(rows, claim)

    def _earlier_try(
        self, finished: Sequence[Finished], token: str | None, worker: str
    ) -> tuple[list[str], list[Job]] | None:
        """What an earlier try of this settle committed, if it did: it claimed the jobs
        now running under `token` (found: it committed, reports and all), so each report
        reads its outcome back. None when nothing shows it committed: settle again."""
        rows = [] if token is None else self._read(lambda: self._d.claimed_by(token))
        if not rows:
            return None
        outcomes = self._read(lambda: [self._outcome_of(report.job, worker) for report in finished])
        return outcomes, self._claimed_jobs(rows, None)

    def _outcome_of(self, job: Job, worker: str) -> str:
        """A report an earlier try committed: the job's state as it stands ("done",
        "queued", "dead", "cancelled"), or "lost" if another worker holds it now."""
        record = self._d.job(job.id)
        if record is None or record.state == "running" or record.worker != worker:
            return "lost"
        return record.state

    def _plain_outcome(self, job: Job, done: set[int], again: str | None = None) -> str:
        """A plain completion's outcome, given the ids its statement completed."""
        if job.id in done:
            done.remove(job.id)  # a job reported twice is done once
            return "done"
        return self._why_lost(job, again)

    def _claimed_jobs(self, rows: list[ClaimedRow], claim: Claim | None) -> list[Job]:
        """A batch claim's rows as jobs, read after COMMIT so the write lock is not held
        for it; a row that cannot be read is dead-lettered in a transaction of its own."""
        jobs, unreadable = self._read_rows(rows)
        if unreadable and claim is not None:
            with self._tx():
                self._bury(unreadable, claim.now)
        return jobs

    def _complete_plain(self, finished: Sequence[Finished], now: float | None) -> set[int]:
        """The completions without an effect, one fenced statement per lease token (a batch
        claim gives all its jobs one token): the ids still ours, now done. A job reported
        twice is done once; its second report finds it no longer ours."""
        by_token: dict[str, list[int]] = {}
        for report in finished:  # a plain completion: no error, no effect, no value
            if report.error is None and report.effect is None and report.result is None:
                by_token.setdefault(report.job.lease_token, []).append(report.job.id)
        done: set[int] = set()
        for token, ids in by_token.items():
            done.update(self._d.complete_many(ids, token, now))
        return done

    def _settle_one(self, report: Finished, now: float | None, again: str | None = None) -> str:
        job, d = report.job, self._d
        if report.error is not None:
            failed = self._fail(job, report.error, report.retry, now, report.exception)
            return failed or self._why_lost(job, again)
        if report.effect is None:
            return "done" if d.complete(job, now, report.result) else self._why_lost(job, again)
        with d.savepoint() as undo:
            if not d.complete(job, now, report.result):
                return self._why_lost(job, again)
            try:
                d.run_effect(job, report.effect)
                return "done"
            except EffectEndedTransaction:
                raise  # the transaction itself is in question: the whole batch rolls back
            except Exception as exc:
                if d.classify(exc) in INFRASTRUCTURE:
                    raise  # the database's failure, not the job's: the batch rolls back
                error, raised = f"{type(exc).__name__}: {exc}", exc
            undo()  # this job's completion and effect are undone, no other job's
        return self._fail(job, error, True, now, raised) or self._why_lost(job, again)

    def _why_lost(self, job: Job, again: str | None = None) -> str:
        """A report refused by the fence: "cancelled" if the job was cancelled, else "lost"
        (another worker holds it now, or it was retired). Read on the rare path only. A
        settle tried `again` by that worker reads back what its earlier try committed."""
        if again is not None:
            return self._outcome_of(job, again)
        return "cancelled" if self._d.state_of(job.id) == "cancelled" else "lost"

    def extend(self, jobs: Sequence[Job]) -> list[Job]:
        """Heartbeat several jobs in one write transaction: each lease still ours runs to
        now + lease_seconds. Returns those jobs with their new deadline; a job missing
        from the result has been taken over and must not be run or reported."""
        for job in jobs:
            check_job(job)
        kept = []
        with self._tx():
            now = self._now()
            for job in jobs:
                deadline = self._d.extend(job, now, self.lease_seconds)
                if deadline is not None:
                    kept.append(replace(job, lease_expires_at=deadline))
        return kept

    def release(self, jobs: Sequence[Job]) -> int:
        """Give back claimed jobs that were never started (a warm stop mid-batch): queued
        and ready at once, the attempt the claim counted returned. Returns how many were
        still ours."""
        for job in jobs:
            check_job(job)
        if not jobs:
            return 0
        with self._tx():
            now = self._now()
            return sum(self._d.release(job, now) for job in jobs)

    def put_back(self, jobs: Sequence[Job], delay: float, note: str) -> int:
        """Give back claimed jobs this worker cannot run (no handler for their kind):
        queued again with the claim's attempt returned, hidden for `delay` seconds so no
        worker claims them in a tight loop, and `note` in last_error saying why. Fenced
        like release(). Returns how many were still ours."""
        for job in jobs:
            check_job(job)
        delay = validate.seconds("delay", delay, allow_zero=True)
        note = self._stored(validate.text("note", note))
        if not jobs:
            return 0
        with self._tx():
            now = self._now()
            return sum(self._d.put_back(job, now, delay, note) for job in jobs)

    def note_crash(
        self, worker: str, message: str, *, running: int | None = None, running_message: str | None = None
    ) -> list[int]:
        """Write `message` into last_error of every job still running under `worker`'s
        name (a supervisor's note that the process died holding them), and return their
        ids; the job `running` (the one whose handler was running, when the supervisor
        knows it) gets `running_message` instead. Leases are untouched: each job goes to
        another worker when its lease ends."""
        validate.text("worker", worker)
        message = self._stored(validate.text("message", message))
        if running is not None:
            validate.job_id(running)
        if running_message is not None:
            running_message = self._stored(validate.text("running_message", running_message))
        with self._tx():
            return sorted(
                self._d.note_crash(worker, message, running, running_message or message, self._now())
            )

    # -- operating --------------------------------------------------------------

    def cancel(self, job_id: int) -> str:
        """Cancel job `job_id` and return the state it was cancelled in. "queued": it will
        never run. "running": its lease is void, so its worker's next heartbeat, completion
        or failure is refused (a late completion's effect never commits) and the worker can
        see the job's state is "cancelled". A finished job (done, dead, or cancelled
        already) raises CannotCancel and nothing changes; an unknown id JobNotFound."""
        validate.job_id(job_id)
        with self._tx():
            state = self._d.state_of(job_id, lock=True)
            if state is None:
                raise JobNotFound(f"no job has id {job_id}: nothing was cancelled")
            if state not in ("queued", "running"):
                raise CannotCancel(
                    f"job {job_id} is {state} already: only a queued or running job can be cancelled"
                )
            self._d.cancel(job_id, self._now())
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
        on the minute; on a database server, its clock's). The job carries the dedupe key
        "every:<name>:<period start>", so however many schedulers tick at once, each
        period gets exactly one job; call it as often as you like. Returns the new job's
        id, or None if this period's job was enqueued already. Missed periods are
        skipped: after downtime the current period runs once. `name` (default: kind)
        tells two schedules of one kind apart."""
        validate.kind(kind)
        validate.seconds("seconds", seconds)
        key = every_key(kind, seconds, name, self.server_time())
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
        (`longest_hold_s` is measured around BEGIN ... COMMIT, so it also counts the
        commit's own work.) Queued and running jobs are never removed, nor is the newest
        row (ids are never handed out twice). With `archive`, each window moves its rows
        into jobs_archive in a way that cannot split: a row is deleted only as it is
        archived. Freed space stays for new jobs; reclaim_space() hands it back."""
        older_than, chosen, batch = purge_settings(older_than, states, batch, archive)
        before = self.server_time() - older_than
        first, last = self._read(self._d.purge_bounds)

        def window(after: int, size: int) -> tuple[int, int]:
            with self._tx():
                return self._d.purge_window(PurgeWindow(chosen, before, after, size, self._now()), archive)

        def next_job(after: int) -> tuple[int, float] | None:
            return self._read(lambda: self._d.created_after(after))

        return walk_purge(first, last, batch, before, next_job, window)

    def space(self) -> dict[str, int]:
        """What the jobs take on disk (the driver's own measure: pages, or bytes)."""
        return self._read(self._d.space)

    def reclaim_space(self, pages: int | None = None) -> int:
        """Hand free space back (see the driver); returns how much was freed."""
        if pages is not None:
            pages = validate.whole("pages", pages, low=1)
        return self._read(lambda: self._d.reclaim_space(pages))

    def vacuum(self) -> None:
        """Rebuild or vacuum the table (see the driver): run it when the queue is quiet."""
        self._read(self._d.vacuum)

    def requeue_dead(self, ids: Sequence[int] | None = None) -> list[int]:
        """Put dead jobs (all of them, or those in `ids`) back in the queue, attempts reset to 0.
        Returns the ids requeued, sorted. An empty `ids` requeues nothing."""
        chosen = None if ids is None else validate.job_ids(ids)
        if chosen == []:
            return []
        with self._tx():
            requeued = sorted(self._d.requeue_dead(chosen, self._now()))
            if requeued:
                self._d.hint_in_transaction()
        if requeued:
            self._d.hint_after_commit()
        return requeued

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

    # -- reading jobs back --------------------------------------------------------

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
        return _Transaction(self, self._d.snapshot(timeout))

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

    def close(self) -> None:
        """Close the connection (leaving a ``with`` block does it)."""
        self._d.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- the rules, as functions both the queue and its drivers use ---------------------------


def settings(
    lease_seconds: object,
    max_attempts: object,
    backoff_base: object,
    backoff_cap: object,
    timeout: object,
    rng: object,
) -> dict[str, Any]:
    """The queue's own settings checked, before any driver connects."""
    if not callable(rng):
        raise InvalidArgument(f"rng must be a callable returning a float in [0, 1), got {rng!r}")
    return {
        "lease_seconds": validate.seconds("lease_seconds", lease_seconds),
        "max_attempts": validate.attempts("max_attempts", max_attempts),
        "backoff_base": validate.positive("backoff_base", backoff_base),
        "backoff_cap": validate.positive("backoff_cap", backoff_cap),
        "timeout": validate.seconds("timeout", timeout, allow_zero=True),
        "rng": rng,
    }


def check_job(job: object) -> None:
    """A Job from claim() (or a copy of one): anything else cannot name a lease."""
    if not isinstance(job, Job):
        raise InvalidArgument(f"job must be a Job returned by a claim, got {type(job).__name__} {job!r:.80}")


def check_effect(effect: object) -> None:
    if effect is not None and not callable(effect):
        raise InvalidArgument(f"effect must be a callable taking the connection, or None, got {effect!r:.80}")


def stored_error(error: str, *locations: object) -> str:
    """An error message as every backend can store it: no password in it (any URL's, any
    password parameter's, and those of `locations`: labqueue.redaction.redact), its first
    MAX_ERROR_CHARS characters, text UTF-8 cannot encode (a lone surrogate) and NUL as
    escapes. Masked before it is cut, so a cut never leaves half a password behind."""
    return stored_error_text(redact(error[: 4 * MAX_ERROR_CHARS], *locations)[:MAX_ERROR_CHARS])


def stored_error_text(text: str) -> str:
    """Text as every backend can store it: a lone surrogate and NUL as escapes."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def backoff_ceiling(attempts: int, base: float, cap: float) -> float:
    """The full-jitter ceiling after `attempts`: base doubled per attempt, at most cap. The
    doubling stops at the cap, so 2 ** attempts is never computed past it."""
    doublings = attempts - 1
    if doublings >= math.log2(cap) - math.log2(base):
        return cap
    return min(cap, math.ldexp(base, max(doublings, -1100)))  # below the cap: ldexp cannot overflow


def concurrency_rule(
    kind: str, payload: Any, key: object, limit: object, *, per_payload: bool = True
) -> tuple[str | None, int | None]:
    """A new job's (concurrency key, limit), checked: the ones given, else its kind's
    handler's (KIND_LIMITS), else (None, None). A key needs a limit; a limit needs a key."""
    key = validate.concurrency_key(key)
    limit = None if limit is None else validate.concurrency_limit(limit)
    registered = KIND_LIMITS.get(kind)
    if key is None and limit is None and registered is not None:
        limit, key_of = registered
        if key_of is None:
            key = kind_key(kind)
        elif per_payload:
            try:
                key = validate.concurrency_key(key_of(payload))
            except InvalidArgument as exc:
                raise InvalidArgument(f"the concurrency key of {kind!r}'s handler: {exc}") from None
        else:
            raise InvalidArgument(
                f"{kind!r}'s handler takes its concurrency key from each payload: "
                "enqueue these jobs one by one, or give enqueue_many a concurrency_key"
            )
    if key is not None and limit is None:
        if registered is None:
            raise InvalidArgument(
                f"concurrency_key {key[:60]!r} needs a concurrency_limit (its jobs that may run at once)"
            )
        limit = registered[0]
    if limit is not None and key is None:
        raise InvalidArgument(
            f"concurrency_limit {limit} needs a concurrency_key (the jobs it counts together)"
        )
    return key, limit


def keys_of(rows: Sequence[tuple], at: int) -> list[str]:
    """The concurrency keys of `rows` (each row's key at index `at`), sorted: the order
    every claim locks them in, so two claims never wait on each other in a circle."""
    return sorted({row[at] for row in rows if row[at] is not None})


def within_limits(rows: Sequence[tuple], at: int, held: dict[str, Held]) -> tuple[list, list]:
    """The concurrency rule: split `rows` (in claim order; a row's key at index `at`, its
    limit at `at + 1`) into those that may run and those that must wait, given `held`: per
    key, the running jobs with a live lease besides these rows and the strictest limit among
    them. A job may start while its key runs fewer jobs than its own limit and than the
    limit of every job of the key running now, so each job's limit holds for as long as it
    runs: a key never runs more jobs than the strictest limit among its running jobs. A job
    without a key always may. Both drivers' batch claims apply it before they lease;
    claim() after (_fit_limits)."""
    running = {key: n for key, (n, _) in held.items()}
    strictest = {key: most for key, (_, most) in held.items()}
    fit, over = [], []
    for row in rows:
        key = row[at]
        if key is None:
            fit.append(row)
            continue
        most = strictest.get(key)
        bound = row[at + 1] if most is None else min(most, row[at + 1])
        if running.get(key, 0) < bound:
            running[key] = running.get(key, 0) + 1
            strictest[key] = bound
            fit.append(row)
        else:
            over.append(row)
    return fit, over


def batch_size(attempts: Sequence[int]) -> int:
    """How many of the next ready jobs (their attempts, in claim order) one batch takes:
    one job handed out before alone, else the leading run of jobs never handed out.
    Both drivers apply it to the attempts their claim reads (SQLite READY_ROWS,
    PostgreSQL BATCH_LOOK)."""
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


_EVERY_QUEUE, _DEFAULT_ONLY, _NO_QUEUE = Scope("all"), Scope("default"), Scope("none")


def scope_of(queues: Sequence[str] | None, paused: Sequence[str] = ()) -> Scope:
    """Which claim statement serves `queues`, with its parameters: every queue, one named
    queue or several (through jobs_queue_ready), the default queue alone or among others
    (through jobs_ready), every queue but the `paused` ones; see sql.SCOPES. Several names
    travel as a list. When every queue asked for is paused the scope is "none": nothing
    may be claimed."""
    names = validate.queue_names(queues)
    if paused:
        if names is None:
            return Scope("all_but", paused=list(paused))
        names = [name for name in names if name not in paused]
        if not names:
            return _NO_QUEUE
    if names is None:
        return _EVERY_QUEUE
    if names == [DEFAULT_QUEUE]:
        return _DEFAULT_ONLY
    if len(names) == 1:
        return Scope("one", queue=names[0])
    return Scope("some_default" if DEFAULT_QUEUE in names else "some", queues=names)


def purge_settings(
    older_than: object, states: object, batch: object, archive: object
) -> tuple[float, list[str], int]:
    """purge()'s arguments checked: the age, the states, the window."""
    older_than = validate.positive("older_than", older_than, allow_zero=True)
    chosen = validate.finished_states(states)
    batch = validate.whole("batch", batch, low=1, high=MAX_CLAIM_LIMIT * 10, why="rows per transaction")
    validate.flag("archive", archive)
    return older_than, chosen, batch


def walk_purge(
    first: int | None,
    last: int | None,
    batch: int,
    before: float,
    next_job: Callable[[int], tuple[int, float] | None],
    window: Callable[[int, int], tuple[int, int]],
) -> Purged:
    """purge()'s walk: ids from `first` up to (not including) `last`, the newest, in
    windows of `batch` ids, each one `window(after, size)` -> (removed, archived) in its
    own transaction. Gaps are jumped (`next_job(after)`: the next id and its created_at),
    and the walk stops at a job created after `before`: it cannot have finished before
    it (ids follow creation, near enough; a job missed is purged next time)."""
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
    """every()'s arguments checked, and the dedupe key of the period `now` falls in."""
    validate.kind(kind)
    seconds = validate.seconds("seconds", seconds)
    label = validate.text("name", kind if name is None else name)
    return period_key(label, period_start(now, seconds))


def period_key(name: str, start: float) -> str:
    """The dedupe key of a schedule's period: "every:<name>:<start>", the start in whole
    seconds when it is whole (as it is for whole-second periods)."""
    start = float(start)
    return f"every:{name}:{int(start) if start.is_integer() else repr(start)}"


# -- payloads -----------------------------------------------------------------------------


class Unreadable:
    """A stored value a driver could not decode as text, standing in for it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def describe_unreadable(kind: object, payload: object) -> str:
    """Why a claimed row cannot become a Job."""
    if isinstance(kind, Unreadable):
        return f"its kind is {kind.reason}"
    if type(kind) is not str:
        return f"its kind is stored as {type(kind).__name__} {kind!r:.80}, not text"
    if isinstance(payload, Unreadable):
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


def to_json(payload: Any) -> str:
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


_CONTAINERS = (dict, list, tuple)


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
