"""The queue's rules, written once: the records a queue and its drivers pass each other,
the Driver protocol, the translation of database errors, and the rule functions (settings,
backoff, the concurrency rule, group commit's batch size, claim scopes, purge windows,
periodic keys). Every backend shares them. A backend is a driver (labqueue.drivers) that
owns only its connection, its SQL text, its clock and its wake-up channel; the queue's
methods are in labqueue.roles, one class per role, over one driver:

    Queue(driver)  <-  JobQueue (labqueue.queue: one SQLite file)
                   <-  PgJobQueue (labqueue.postgres: one schema of a PostgreSQL database)

The split follows River's driver interface: the queue decides, the driver runs one
statement (or a few) per decision and reports rows back.

Words, each for one idea:

    claim       lease ready jobs to a worker under a fresh lease token (the fence)
    lease       a running job's hold: its token and its deadline (visible_at)
    report      a worker telling the queue how a job ended: complete, fail, or
                settle (many reports, and the next claim, in one transaction)
    complete    a fenced report that a job is done, with its effect and result
    fail        a fenced report that a job raised: queued again after backoff, or dead
    give back   return claimed jobs with the claim's attempt returned: release (never
                started, ready at once) or put_back (no handler here: hidden a while,
                with a note)
    bury        dead-letter a claimed row that cannot be read as a job (never run)
    retire      what a claim does to a lease that ran out on its last attempt: dead
    effect      a handler's writes, committed in the completing transaction or not at all
    hint        a wake-up that a job may be ready (never the truth: look, then claim)
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from . import validate
from .errors import (
    CannotOpen,
    ConnectionLost,
    InvalidArgument,
    LabqueueError,
    QueueBusy,
    StorageFull,
)
from .redaction import redact

# In modules of their own, and named here too (the drivers import them from here): what a
# job row keeps (labqueue.stored) and what a job gives back (labqueue.results).
from .results import (  # noqa: F401
    MAX_RESULT_CHARS,
    MAX_TRACEBACK_CHARS,
    Attempt,
    Effect,
    JobResult,
    Result,
    attempts_of,
    check_effect,
    exception_details,
    job_result,
    result_json,
    returned_parts,
    split_return,
)
from .stored import (  # noqa: F401
    MAX_ERROR_CHARS,
    MAX_PAYLOAD_DEPTH,
    JobRecord,
    Unreadable,
    decode_payload,
    describe_unreadable,
    stored_error,
    stored_error_text,
    to_json,
)
from .validate import DEFAULT_QUEUE, MAX_CLAIM_LIMIT, STATES

LAST_ATTEMPT_EXPIRED = "lease expired on the last attempt"
# The most steps throughput() counts in (a chart's bars).
MAX_THROUGHPUT_STEPS = 10_000
# How an attempt ended, as a job's attempt log says it ("running": it has not ended).
OUTCOMES = ("done", "failed", "timed out", "lease lost", "cancelled", "given back", "running")
# A producer waiting for a job to finish reads it again at least this often: a hint only
# ends a wait early (labqueue.wakeup), and PostgreSQL has none for it (it polls).
RESULT_POLL = 0.5
# How long a queue object trusts its reading of the paused queues: a pause reaches every
# worker within this many seconds, at the cost of one tiny read each time.
PAUSES_READ_EVERY = 1.0

Clock = Callable[[], float]

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
# Driver.settle_in_one_call(done, now, claim[, results]), where a driver has it.
SettleInOneCall = Callable[..., "tuple[list[int], list[ClaimedRow]] | None"]
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
    # Plain completions ((id, token) pairs), completions with a value ((id, token, JSON
    # text)) and a batch claim in one statement of the driver's own, returning (ids
    # completed, claimed rows), or None when it cannot: PostgreSQL's sql.SETTLE, one round
    # trip. None for a driver without one (SQLite: its transaction is in-process already).
    @property
    def settle_in_one_call(self) -> SettleInOneCall | None: ...
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

