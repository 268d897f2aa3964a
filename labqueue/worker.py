"""The loop a worker process runs: claim, handle, complete or fail, repeat.

    python -m labqueue.worker DB WORKER_ID LEASE_SECONDS [IDLE_EXIT] [--handlers MODULE] [options]

It leaves by itself after IDLE_EXIT seconds with nothing to do (never, with
--no-idle-exit). `labqueue worker DB` is the same loop with named options, and runs
a supervised pool of them with --concurrency N (labqueue.pool). The first
SIGTERM or SIGINT lets the current job finish and then exits (a warm stop); a
second one exits at once, and the job's lease hands it to another worker.

A worker refuses to start with no handlers registered (a plain worker would only
claim jobs it cannot run). A job of a kind it has no handler for is given back, its
attempt returned, hidden for a while (labqueue.unknown_kinds): it waits for a worker
that knows the kind and is never dead-lettered for it. The current folder comes first
on sys.path, so ``--handlers myapp.jobs`` imports from where the worker was started.

A DB of ``-`` reads the queue's location from LABQUEUE_DB: that is how a supervisor
(labqueue.pool, labqueue.procs) passes it, so a password in a URL is never on a worker's
command line, which every local user can read.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

from . import handlers as registry
from . import heap, joblog, validate
from .attribution import running_publisher
from .backends import open_queue
from .core import DATABASE_FAILURES
from .durations import parse_duration
from .environment import DB_VARIABLE, db_from_env
from .errors import InvalidArgument, LabqueueError, NoHandlers, UnknownJobKind
from .fairness import QueueTurns, parse_queues
from .joblog import LOG_FORMATS, configure_logging, job_fields, queue_of
from .queue import MAX_CLAIM_LIMIT, SYNCHRONOUS_LEVELS, Finished, Job, JobQueue
from .reconnect import Reconnector
from .redaction import guard_logging, redact
from .renewal import Holding, Renewer, renewal_queue
from .schedule import Every, Scheduler, parse_every
from .unknown_kinds import give_back_unknown
from .wakeup import SAFETY_POLL

DEFAULT_IDLE_EXIT = 2.0
DEFAULT_POLL = 0.05
# Group commit: a worker claims up to BATCH ready jobs at once and reports them (and claims
# the next batch) in one write transaction. A crash re-runs at most one batch.
DEFAULT_BATCH = 10
# A finished job is done only once its transaction commits. Within a batch the worker
# commits what has finished whenever this much time has passed since its last commit,
# so slow jobs are reported about as soon as they finish and only fast ones are grouped.
DEFAULT_COMMIT_INTERVAL = 0.05
# With --purge-after, how often a worker purges (each worker of a pool does; a purge that
# finds nothing costs one read).
DEFAULT_PURGE_EVERY = 60.0

log = logging.getLogger("labqueue.worker")  # the same name when run as __main__
log.addHandler(logging.NullHandler())  # silent unless the program configures logging (main() does)


class ForcedShutdown(BaseException):
    """Raised by the second stop signal. A BaseException, so that a handler's
    `except Exception` cannot swallow it; the open transaction rolls back."""


class StopFlag:
    """Signal handlers only set flags; the loop looks at them between jobs."""

    def __init__(self) -> None:
        self.requested = False
        # Called on the first signal: the loop sets it to end an idle wait at once.
        self.on_request: Callable[[], None] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise ForcedShutdown(f"second stop signal ({signal.Signals(signum).name})")
        self.requested = True
        if self.on_request is not None:
            self.on_request()

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self)


def error_text(exc: BaseException) -> str:
    """What fail() records: the exception's class, so a person can sort the dead
    letters by cause, and its message. Never raises: if the exception's own str()
    raises (or returns a non-string), its repr() stands in, then a note of what failed."""
    try:
        message = str(exc)
    except Exception as broken:
        try:
            message = f"{exc!r} (its str() raised {type(broken).__name__})"
        except Exception:
            message = f"<its str() raised {type(broken).__name__}, and so did its repr()>"
    return f"{type(exc).__name__}: {message}"


def handle(q: JobQueue, job: Job, handlers: Mapping[str, registry.Handler] | None = None) -> str:
    """Run one job's handler and report the outcome. Returns "done", "queued",
    "dead" or "lost" (this worker no longer held the lease)."""
    outcome, _ = handle_then_claim(q, job, handlers)
    return outcome


def handle_then_claim(
    q: JobQueue,
    job: Job,
    handlers: Mapping[str, registry.Handler] | None = None,
    *,
    claim_for: Callable[[], str | None] = lambda: None,
) -> tuple[str, Job | None]:
    """Run one job's handler, report the outcome and, after a success, claim the next
    job in the completing transaction. `claim_for()` is asked only once the handler has
    returned, so a stop requested while it ran is seen; it names the worker to claim
    for, or None to only complete. Returns the outcome (as handle()) and the next job."""
    table = registry.HANDLERS if handlers is None else handlers
    fn = table.get(job.kind)
    if fn is None:
        error = UnknownJobKind(f"no handler is registered for kind {job.kind!r}")
        outcome = q.fail(job, error_text(error), retry=False) or "lost"
        log.error("job %d (%s): %s; %s", job.id, job.kind, error, _OUTCOME_WORDS[outcome])
        return outcome, None
    try:
        effect = fn(job, q)
    except Exception as exc:
        return _failed(q, job, exc), None
    try:
        worker = claim_for()
        if worker is None:
            accepted, next_job = q.complete(job, effect=effect), None
        else:
            accepted, next_job = q.complete_and_claim(job, worker, effect=effect)
    except DATABASE_FAILURES:
        raise  # the database's failure, not the job's: nothing was saved, the job is still ours
    except Exception as exc:  # the effect raised and rolled back (with any claim): the job is still ours
        return _failed(q, job, exc), None
    if not accepted:
        log.warning("job %d (%s): %s", job.id, job.kind, _OUTCOME_WORDS["lost"])
    return ("done" if accepted else "lost"), next_job


_OUTCOME_WORDS = {
    "queued": "it will be retried after a backoff",
    "dead": "no attempts left: it is dead",
    "lost": "the lease was lost (another worker holds the job now); the result was discarded",
    "cancelled": "it was cancelled while it ran; its result was discarded",
}


def _failed(q: JobQueue, job: Job, exc: Exception) -> str:
    """Record a handler's (or its effect's) exception with fail(), and log it with its traceback."""
    outcome = q.fail(job, error_text(exc)) or "lost"
    level = logging.WARNING if outcome == "queued" else logging.ERROR
    log.log(
        level,
        "job %d (%s) failed on attempt %d of %d: %s; %s",
        job.id,
        job.kind,
        job.attempts,
        job.max_attempts,
        error_text(exc),
        _OUTCOME_WORDS[outcome],
        exc_info=exc,
        extra=job_fields(job, worker=None, queue=queue_of(q, job.id)),
    )
    return outcome


def run_handler(q: JobQueue, job: Job, handlers: Mapping[str, registry.Handler]) -> Finished:
    """Run one job's handler and say what it came to, without reporting it yet: the
    effect it returned, or the failure. The worker loop gives back jobs of kinds it has
    no handler for before they get here (labqueue.unknown_kinds); called on its own with
    such a job, it reports a final failure."""
    fn = handlers.get(job.kind)
    if fn is None:
        error = UnknownJobKind(f"no handler is registered for kind {job.kind!r}")
        return Finished(job, error=error_text(error), retry=False)
    try:
        return Finished(job, effect=fn(job, q))
    except Exception as exc:
        return Finished(job, error=error_text(exc), exception=exc)


def _log_outcome(
    q: JobQueue,
    report: Finished,
    outcome: str,
    *,
    worker: str | None = None,
    timing: tuple[float, float] | None = None,
) -> None:
    """A failure with its outcome (and traceback), a result discarded for a lost lease,
    or a success (at joblog.success_level). `timing` is (when the handler ended, how
    long it ran): the line carries both, not the moment the batch was reported."""
    job = report.job
    if outcome == "done" and report.error is None:
        level = joblog.success_level
    elif outcome == "cancelled":
        level = logging.INFO
    elif outcome == "queued" or outcome == "lost":
        level = logging.WARNING
    else:
        level = logging.ERROR
    if not log.isEnabledFor(level):
        return
    at, took = timing if timing is not None else (None, None)
    extra = job_fields(job, worker=worker, queue=queue_of(q, job.id), duration_s=took, at=at)
    if outcome == "done" and report.error is None:
        log.log(level, "job %d (%s) done on attempt %d", job.id, job.kind, job.attempts, extra=extra)
    elif outcome in ("cancelled", "lost"):
        log.log(level, "job %d (%s): %s", job.id, job.kind, _OUTCOME_WORDS[outcome], extra=extra)
    else:
        log.log(
            level,
            "job %d (%s) failed on attempt %d of %d: %s; %s",
            job.id,
            job.kind,
            job.attempts,
            job.max_attempts,
            report.error or "its effect raised",
            _OUTCOME_WORDS[outcome],
            exc_info=report.exception,
            extra=extra,
        )


def _queue_now(q: JobQueue) -> float:
    """The queue's own reading of the time, the one its lease deadlines are written in
    (the injected clock, or a PostgreSQL server's clock when there is none)."""
    return q.clock() if q.clock is not None else q.server_time()


def _batch_clock(q: JobQueue, jobs: Sequence[Job], monotonic: Callable[[], float]) -> Callable[[], float]:
    """The queue's time during one batch: a clock passed in is read as it is. A database
    server's clock is not read at all: the claim (or renewal) that just handed out `jobs`
    wrote their deadline as the server's time then plus the lease, so that time is the
    deadline less the lease, carried forward on this machine's monotonic clock. The lease
    check before each job costs no round trip, and a batch costs none for its clock."""
    if q.clock is not None:
        return q.clock
    start = jobs[0].lease_expires_at - q.lease_seconds if jobs else q.server_time()
    began = monotonic()
    return lambda: start + (monotonic() - began)


def work_batch(
    q: JobQueue,
    batch: list[Job],
    handlers: Mapping[str, registry.Handler],
    *,
    claim_for: Callable[[int], tuple[str, int] | tuple[str, int, list[str] | None] | None],
    stop: StopFlag,
    commit_interval: float = DEFAULT_COMMIT_INTERVAL,
    monotonic: Callable[[], float] = time.monotonic,
    call: Callable[..., Any] = lambda action, *args, **kwargs: action(*args, **kwargs),
    worker: str | None = None,
    held: Holding | None = None,
    publish: Callable[[int | None], None] | None = None,
) -> tuple[int, list[Job]]:
    """Run a claimed batch and report it in one write transaction that also claims the
    next batch. Returns how many jobs ran and the next batch.

    What has finished is committed early whenever `commit_interval` has passed, so a slow
    batch is reported as it goes. Before each job, if the leases have less than half
    their time left, what has finished is reported and the rest renewed; jobs taken over
    meanwhile are dropped. A warm stop lets the job in hand run (the first of a batch, or
    the one running) and gives back those not started. `claim_for(ran)` names the worker
    and the size of the next batch (and the queues to claim it from), or None. Every
    database call goes through `call` (the worker's Reconnector.call: after a lost
    connection it reconnects and repeats the call, which the fences make safe). What the
    batch holds is published in `held`, for the worker's renewal thread (labqueue.renewal):
    a few attribute writes per job; and the running job's id to `publish`, for the
    supervisor's note should the process die (labqueue.attribution.RunningSlot)."""
    finished: list[Finished] = []
    pending = call(give_back_unknown, q, batch, handlers, worker=worker)  # kinds this worker cannot run
    held = Holding() if held is None else held
    held.pending, held.finished = pending, finished
    timings: dict[int, tuple[float, float]] = {}  # job id: (when it ended, how long it ran)
    last_commit = monotonic()
    ran = 0
    queue_now = call(_batch_clock, q, pending, monotonic)

    def report(claim: tuple | None = None) -> list[Job]:
        nonlocal finished, last_commit
        worker, size, *scope = claim if claim is not None else (None, 1)
        outcomes, nxt = call(
            q.settle, finished, claim_for=worker, limit=size, queues=scope[0] if scope else None
        )
        quiet = not log.isEnabledFor(joblog.success_level)  # then a plain success has no line
        for done, outcome in zip(finished, outcomes, strict=True):
            if not (quiet and outcome == "done" and done.error is None):
                _log_outcome(q, done, outcome, worker=worker, timing=timings.get(done.job.id))
        timings.clear()  # it held the jobs just reported, and no others
        finished, last_commit = [], monotonic()
        held.finished = finished
        return nxt

    half_lease = q.lease_seconds / 2
    while pending:
        if stop.requested and ran > 0:  # the job in hand runs; the rest are given back
            call(q.release, pending)
            break
        if pending[0].lease_expires_at - queue_now() < half_lease:
            if finished:
                report()
            pending = held.pending = call(q.extend, pending)
            queue_now = call(_batch_clock, q, pending, monotonic)
            continue
        job, began = pending.pop(0), monotonic()
        held.running = (job, began)
        if publish is not None:
            publish(job.id)
        finished.append(run_handler(q, job, handlers))
        held.running = None
        if publish is not None:
            publish(None)
        ended = monotonic()
        timings[job.id] = (time.time(), ended - began)
        ran += 1
        if pending and ended - last_commit >= commit_interval:
            report()
    return ran, report(None if stop.requested else claim_for(ran))


def run(
    path: str,
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = DEFAULT_IDLE_EXIT,
    *,
    poll: float = DEFAULT_POLL,
    stop: StopFlag | None = None,
    max_jobs: int | None = None,
    handlers: Mapping[str, registry.Handler] | None = None,
    sleep: Callable[[float], None] | None = None,
    max_attempts: int | None = None,
    backoff_base: float | None = None,
    backoff_cap: float | None = None,
    synchronous: str | None = None,
    batch: int = DEFAULT_BATCH,
    commit_interval: float = DEFAULT_COMMIT_INTERVAL,
    queues: list[str] | None = None,
    weights: Mapping[str, int] | None = None,
    fair: bool = True,
    schedules: Sequence[Every] = (),
    wake: bool = True,
    purge_after: float | None = None,
    purge_every: float = DEFAULT_PURGE_EVERY,
    reconnect_limit: int | None = None,
    job_timeout: float | None = None,
    publish: Callable[[int | None], None] | None = None,
) -> int:
    """Work until idle for `idle_exit` seconds (None: until stopped), `max_jobs` are
    handled, or a stop is requested. Returns the number of jobs this worker handled.
    It builds a WorkerLoop, whose run() is the loop as its steps.

    max_attempts, backoff_base, backoff_cap and synchronous go to the JobQueue the worker
    opens (None: JobQueue's default). Group commit: the worker claims up to `batch`
    ready jobs, runs them, and reports them in one write transaction that also claims
    the next batch (work_batch). On a shallow queue a batch is whatever is ready, often
    one job: nothing waits for a batch to fill. An idle worker looks with a read
    (JobQueue.any_ready) and takes the write lock only when there is something to claim.
    A stop never strands a lease: jobs claimed but not started are given back.

    `queues` (None: every queue) are the named queues it takes jobs from, highest priority
    first; with several, it takes turns between them (weighted by `weights`, see
    labqueue.fairness) unless fair=False, which orders them by priority alone. It ticks
    `schedules` (labqueue.schedule) once per period. Idle, it waits for a producer's hint
    (labqueue.wakeup; wake=False, a platform without it, or a `sleep` passed in: it
    polls every `poll` s, calling `sleep` when given), at most SAFETY_POLL seconds and
    never past the next job due by the clock or the next schedule's period. With
    `purge_after`, it removes done jobs that finished that many seconds ago every
    `purge_every` seconds (JobQueue.purge: short transactions). A lost connection to a
    database server (a restart, a terminated session) is logged, and the worker reconnects
    with capped exponential backoff and jitter (labqueue.reconnect), at most
    `reconnect_limit` times per loss (None: until it is back), and carries on.

    While a handler runs longer than a sixth of the lease, a thread of the worker renews
    the leases of every job it holds (labqueue.renewal), so a long handler runs once
    without KeepAlive. A handler that runs past its time limit (its kind's, from
    @handler(kind, timeout=...), else `job_timeout`; None: no limit) has its job failed,
    "timed out after N s", and the process exits with renewal.EXIT_TIMED_OUT. `publish(id)`
    is told the job whose handler starts, and `publish(None)` when it ends: a pool's
    supervisor reads it after a crash (labqueue.attribution.running_publisher)."""
    loop = WorkerLoop(
        path,
        worker_id,
        lease_seconds,
        idle_exit,
        poll=poll,
        stop=stop,
        max_jobs=max_jobs,
        handlers=handlers,
        sleep=sleep,
        max_attempts=max_attempts,
        backoff_base=backoff_base,
        backoff_cap=backoff_cap,
        synchronous=synchronous,
        batch=batch,
        commit_interval=commit_interval,
        queues=queues,
        weights=weights,
        fair=fair,
        schedules=schedules,
        wake=wake,
        purge_after=purge_after,
        purge_every=purge_every,
        reconnect_limit=reconnect_limit,
        job_timeout=job_timeout,
        publish=publish,
    )
    return loop.run()


class WorkerLoop:
    """One worker's loop, as its steps (rq's Worker.work is the model): tick the schedules,
    purge when due; with no batch in hand, stop if asked, else claim one, or wait while
    idle until the idle exit; work the batch, whose report claims the next. Each step is
    a short method, and what the steps share is an attribute. worker.run() builds one with
    its arguments, checked here, so a bad one is refused before anything is opened."""

    # Set by start(), once the queue is open.
    q: Any
    call: Callable[..., Any]  # every database call goes through it (the Reconnector's call)
    listening: bool  # idle, wait for a producer's hint (else poll)
    pause: Callable[[float], None]

    def __init__(
        self,
        path: str,
        worker_id: str,
        lease_seconds: float,
        idle_exit: float | None = DEFAULT_IDLE_EXIT,
        *,
        poll: float = DEFAULT_POLL,
        stop: StopFlag | None = None,
        max_jobs: int | None = None,
        handlers: Mapping[str, registry.Handler] | None = None,
        sleep: Callable[[float], None] | None = None,
        max_attempts: int | None = None,
        backoff_base: float | None = None,
        backoff_cap: float | None = None,
        synchronous: str | None = None,
        batch: int = DEFAULT_BATCH,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        queues: list[str] | None = None,
        weights: Mapping[str, int] | None = None,
        fair: bool = True,
        schedules: Sequence[Every] = (),
        wake: bool = True,
        purge_after: float | None = None,
        purge_every: float = DEFAULT_PURGE_EVERY,
        reconnect_limit: int | None = None,
        job_timeout: float | None = None,
        publish: Callable[[int | None], None] | None = None,
    ) -> None:
        self.path, self.worker_id, self.lease_seconds = path, worker_id, lease_seconds
        self.idle_exit = idle_exit
        self.stop = stop or StopFlag()
        self.max_jobs, self.sleep, self.wake, self.publish = max_jobs, sleep, wake, publish
        self.reconnect_limit = reconnect_limit
        self.handlers = registry.HANDLERS if handlers is None else handlers
        self.batch = validate.whole("batch", batch, low=1, high=MAX_CLAIM_LIMIT, why="MAX_CLAIM_LIMIT")
        self.commit_interval = validate.positive("commit_interval", commit_interval, allow_zero=True)
        self.poll = validate.seconds("poll", poll)  # an idle worker sleeps this long: the clock must allow it
        self.names = validate.queue_names(queues)
        names = self.names
        self.turns = QueueTurns(names, weights) if fair and names is not None and len(names) > 1 else None
        if weights and self.turns is None:
            raise InvalidArgument(
                f"weights {dict(weights)!r} need fair=True and more than one queue to take turns between"
            )
        self.scheduler = Scheduler(schedules)
        if purge_after is not None:
            purge_after = validate.positive("purge_after", purge_after, allow_zero=True)
        self.purge_after = purge_after
        self.purge_every = validate.positive("purge_every", purge_every)
        self.next_purge = time.monotonic()
        settings = {
            "max_attempts": max_attempts,
            "backoff_base": backoff_base,
            "backoff_cap": backoff_cap,
            "synchronous": synchronous,
        }
        self.options: dict[str, Any] = {k: v for k, v in settings.items() if v is not None}
        self.renewer = Renewer(
            renewal_queue(path, lease_seconds, self.options),
            lease_seconds=lease_seconds,
            worker=worker_id,
            job_timeout=job_timeout,
            limits=registry.TIMEOUTS,
        )
        self.handled = 0  # jobs run to an outcome
        self.jobs: list[Job] = []  # the batch in hand: claimed, not run yet
        self.give_up_at: float | None = None  # set by the first empty look, cleared by any job
        self.why = ""  # why the loop ended, for the last log line

    def run(self) -> int:
        """Work until should_stop() or idle_exit_due(); returns the number of jobs handled."""
        try:
            with open_queue(self.path, lease_seconds=self.lease_seconds, **self.options) as q:
                self.start(q)
                while True:
                    self.tick_schedules()
                    self.purge_if_due()
                    if not self.jobs:  # the last batch's report claimed none
                        if self.should_stop():
                            break
                        if not self.claim_batch():
                            if self.idle_exit_due():
                                break
                            self.wait_when_idle()
                            continue
                    self.run_batch()
        except ForcedShutdown:
            log.warning(
                "worker %s: hard stop after %d job(s); "
                "a job it held goes to another worker when its lease ends",
                self.worker_id,
                self.handled,
            )
            raise
        finally:
            self.renewer.stop()
        log.info("worker %s stopped (%s) after %d job(s)", self.worker_id, self.why, self.handled)
        return self.handled

    def start(self, q: Any) -> None:
        """Say the worker is up, then get ready on the open queue (a file, or a postgresql://
        URL): calls that reconnect, the renewal thread, the wake-up hint, a stop that ends
        an idle wait at once."""
        self.q = q
        log.info(
            "worker %s started on %s: lease %g s, %s",
            self.worker_id,
            redact(self.path),
            self.lease_seconds,
            "runs until stopped" if self.idle_exit is None else f"leaves after {self.idle_exit:g} s idle",
        )
        stop = self.stop
        self.call = Reconnector(
            q, name=self.worker_id, limit=self.reconnect_limit, log=log, stopping=lambda: stop.requested
        ).call
        self.renewer.start()  # by real time: it renews nothing until a handler runs a sixth of a lease
        # Waiting for hints replaces the poll; a sleep passed in (tests) keeps polling.
        self.listening = self.wake and self.sleep is None and self.call(q.listen)
        self.pause = time.sleep if self.sleep is None else self.sleep
        stop.on_request = q.interrupt_wait

    def tick_schedules(self) -> None:
        """Enqueue each schedule's job once its period has come: every worker ticks, and
        the queue makes one job per period however many do (JobQueue.every)."""
        if not self.scheduler.schedules:
            return
        q = self.q
        for job_id in self.call(lambda: self.scheduler.tick(q, _queue_now(q))):
            log.info("worker %s: scheduled job %d enqueued for this period", self.worker_id, job_id)

    def purge_if_due(self) -> None:
        """With purge_after, remove old done jobs every purge_every seconds: each worker of
        a pool does, and a purge that finds nothing costs one read."""
        if self.purge_after is None or time.monotonic() < self.next_purge:
            return
        purged = self.call(self.q.purge, self.purge_after)
        self.next_purge = time.monotonic() + self.purge_every
        if purged.removed:
            log.info(
                "worker %s: purged %d done job(s) older than %g s in %d transaction(s)",
                self.worker_id,
                purged.removed,
                self.purge_after,
                purged.batches,
            )

    def should_stop(self) -> bool:
        """Between batches only, so a stop never strands a claimed job: after a warm stop,
        or once max_jobs are handled."""
        if self.stop.requested:
            self.why = "warm stop"
            return True
        if self.max_jobs is not None and self.handled >= self.max_jobs:
            self.why = f"max_jobs {self.max_jobs} reached"
            return True
        return False

    def claim_batch(self) -> bool:
        """Claim up to a batch from the first queue in turn that has jobs ready (the next
        batch is usually claimed by the last one's report instead). Any job claimed ends
        the idle time."""
        for scope in self.scopes():
            self.jobs = self.call(self.q.claim_batch, self.worker_id, self.room(0), queues=scope)
            if self.jobs:
                self.give_up_at = None
                return True
        return False

    def idle_exit_due(self) -> bool:
        """Whether the worker has had nothing to do for idle_exit seconds (never, with
        idle_exit None): the time counts from the first empty look."""
        now = time.monotonic()
        if self.give_up_at is None and self.idle_exit is not None:
            self.give_up_at = now + self.idle_exit
        if self.give_up_at is not None and now >= self.give_up_at:
            self.why = f"idle for {self.idle_exit:g} s"
            return True
        return False

    def wait_when_idle(self) -> None:
        """Wait for a producer's hint (or a stop), else sleep a poll, before looking again."""
        wait = self.idle_wait()
        if self.listening:
            self.call(self.q.wait_for_jobs, wait)
        else:
            self.pause(wait)

    def idle_wait(self) -> float:
        """How long an idle worker waits: a poll, or SAFETY_POLL when hints wake it, but
        never past the next job due by the clock, the next schedule's period, the idle
        exit or the next purge."""
        wait = SAFETY_POLL if self.listening else self.poll
        now = self.call(_queue_now, self.q)
        if self.listening:
            due = self.call(self.q.next_due, self.names)
            if due is not None:
                wait = min(wait, max(due - now, self.poll))
        wait = min(wait, self.scheduler.next_tick(now))
        if self.give_up_at is not None:
            wait = min(wait, max(self.give_up_at - time.monotonic(), 0.0))
        if self.purge_after is not None:
            wait = min(wait, max(self.next_purge - time.monotonic(), 0.0))
        return wait

    def run_batch(self) -> None:
        """Run the batch in hand and report it in one transaction that claims the next
        (the module's work_batch: group commit)."""
        ran, self.jobs = work_batch(
            self.q,
            self.jobs,
            self.handlers,
            claim_for=self.next_claim,
            stop=self.stop,
            commit_interval=self.commit_interval,
            worker=self.worker_id,
            call=self.call,
            held=self.renewer.held,
            publish=self.publish,
        )
        self.handled += ran

    def room(self, ran: int) -> int:
        """A batch's size: never past max_jobs, counting the `ran` of the batch being reported."""
        return self.batch if self.max_jobs is None else min(self.batch, self.max_jobs - self.handled - ran)

    def scopes(self) -> list[list[str] | None]:
        """The queues to claim from, in the order to try them: one turn of the rotation."""
        return [[name] for name in self.turns.order()] if self.turns is not None else [self.names]

    def next_claim(self, ran: int) -> tuple[str, int, list[str] | None] | None:
        """What a batch's report claims next (work_batch's claim_for): for this worker, up
        to room for it, from the queue whose turn it is; None once max_jobs is reached."""
        size = self.room(ran)
        return (self.worker_id, size, self.scopes()[0]) if size > 0 else None


# -- the command line ------------------------------------------------------------------
# Argument types that refuse NaN, infinities and negative numbers with a one-line usage
# error; `labqueue worker` (labqueue.cli) shares them and the settings below.


def seconds(text: str, *, allow_zero: bool = True) -> float:
    """A finite duration, zero or more (or, without allow_zero, more than zero): plain
    seconds or with a unit, 90s, 15m, 2h, 1d, 1w (labqueue.durations, one parser for all)."""
    try:
        return parse_duration(text, allow_zero=allow_zero)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_seconds(text: str) -> float:
    """A finite number of seconds, more than zero."""
    return seconds(text, allow_zero=False)


def whole_number(text: str, *, low: int = 1, noun: str = "a whole number") -> int:
    """A whole number of at least `low` (1 unless told); `noun` names it in the error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
    if value < low:
        bound = "zero or more" if low == 0 else f"at least {low}"
        raise argparse.ArgumentTypeError(f"expected {noun} of {bound}, got {text!r}")
    return value


def batch_size(text: str) -> int:
    """--batch: 1 to MAX_CLAIM_LIMIT jobs, refused here rather than by every worker started."""
    value = whole_number(text)
    if value > MAX_CLAIM_LIMIT:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_CLAIM_LIMIT} jobs (MAX_CLAIM_LIMIT), got {text!r}"
        )
    return value


def queues_option(text: str) -> str:
    """--queues mail:3,reports: checked here, passed on as written (to pool workers too)."""
    try:
        parse_queues(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def every_option(text: str) -> str:
    """--every report=60: checked here, passed on as written."""
    try:
        parse_every(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def sync_level(text: str) -> str:
    level = text.upper()
    if level not in SYNCHRONOUS_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(SYNCHRONOUS_LEVELS)}, got {text!r}")
    return level


def add_settings(parser: argparse.ArgumentParser) -> None:
    """The worker's named options, shared by `python -m labqueue.worker` and `labqueue worker`."""
    parser.add_argument(
        "--handlers",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module of your own handlers (repeatable)",
    )
    parser.add_argument(
        "--poll",
        type=positive_seconds,
        default=DEFAULT_POLL,
        metavar="DURATION",
        help=f"seconds between looks for work when idle (default {DEFAULT_POLL})",
    )
    parser.add_argument(
        "--max-attempts",
        type=whole_number,
        metavar="N",
        help="attempts for jobs that the handlers enqueue (default: the queue's, 5)",
    )
    parser.add_argument(
        "--backoff-base",
        type=positive_seconds,
        metavar="DURATION",
        help="retry backoff ceiling after the first failure; it doubles per attempt (default 1)",
    )
    parser.add_argument(
        "--backoff-cap",
        type=positive_seconds,
        metavar="DURATION",
        help="the largest retry backoff ceiling (default 60)",
    )
    parser.add_argument(
        "--synchronous",
        type=sync_level,
        metavar="LEVEL",
        help=f"SQLite's synchronous level: {', '.join(SYNCHRONOUS_LEVELS)} (default NORMAL)",
    )
    parser.add_argument(
        "--batch",
        type=batch_size,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"most jobs claimed and reported in one write transaction (default {DEFAULT_BATCH}); "
        "a crash re-runs at most one batch",
    )
    parser.add_argument(
        "--commit-interval",
        type=seconds,
        default=DEFAULT_COMMIT_INTERVAL,
        metavar="DURATION",
        help="within a batch, commit what has finished once this much time has passed "
        f"(default {DEFAULT_COMMIT_INTERVAL})",
    )
    parser.add_argument(
        "--queues",
        type=queues_option,
        metavar="NAME[:WEIGHT],...",
        help="take jobs from these named queues only (default: every queue); with several, "
        "take turns between them, weighted (default weight 1)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with several --queues, take the highest priority across them instead of turns "
        "(a flood in one queue can then starve the others)",
    )
    parser.add_argument(
        "--every",
        action="append",
        default=[],
        type=every_option,
        metavar="KIND=DURATION",
        help="enqueue one KIND job per period of SECONDS, exactly once however many workers "
        "tick (repeatable; missed periods are skipped)",
    )
    parser.add_argument(
        "--purge-after",
        type=seconds,
        metavar="DURATION",
        help="remove done jobs that finished this long ago, every --purge-every seconds (default: keep them)",
    )
    parser.add_argument(
        "--purge-every",
        type=positive_seconds,
        default=DEFAULT_PURGE_EVERY,
        metavar="DURATION",
        help=f"how often --purge-after runs (default {DEFAULT_PURGE_EVERY:g})",
    )
    parser.add_argument(
        "--reconnect-limit",
        type=reconnect_limit,
        metavar="N",
        help="after a lost connection to a database server, try to reconnect at most N times "
        "(with capped, jittered backoff) before the worker exits with an error; 0 never reconnects "
        "(default: keep trying until the server is back)",
    )
    parser.add_argument(
        "--job-timeout",
        type=positive_seconds,
        metavar="DURATION",
        help="fail a job whose handler runs longer than this (a kind's own @handler(kind, timeout=...) "
        "wins): 'timed out after N s', retried elsewhere after a backoff, and the worker process is "
        "replaced (default: no limit)",
    )
    parser.add_argument(
        "--no-wake",
        action="store_true",
        help="poll every --poll seconds when idle instead of waiting for producers' hints",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="the least important log records shown (default INFO)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text lines, or one JSON object per line (default text)",
    )
    parser.add_argument(
        "--log-success",
        action="store_true",
        help="log each job done at INFO (default: at DEBUG); every job line has job_id, kind, "
        "queue, attempt, worker and duration_ms",
    )


def reconnect_limit(text: str) -> int:
    """--reconnect-limit: a whole number of attempts, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of attempts, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def settings_options(args: argparse.Namespace) -> list[str]:
    """add_settings()'s options as given, as command-line words for a worker process."""
    words: list[str] = []
    for module in args.handlers:
        words += ["--handlers", module]
    for schedule in args.every:
        words += ["--every", schedule]
    words += ["--strict"] * args.strict + ["--no-wake"] * args.no_wake + ["--log-success"] * args.log_success
    names = (
        "poll",
        "max_attempts",
        "backoff_base",
        "backoff_cap",
        "synchronous",
        "batch",
        "commit_interval",
        "queues",
        "purge_after",
        "purge_every",
        "reconnect_limit",
        "job_timeout",
        "log_level",
        "log_format",
    )
    for name in names:
        value = getattr(args, name)
        if value is not None:
            words += ["--" + name.replace("_", "-"), str(value)]
    return words


def queue_settings(args: argparse.Namespace) -> dict[str, Any]:
    """add_settings()'s options that run() passes to the JobQueue."""
    names = ("max_attempts", "backoff_base", "backoff_cap", "synchronous")
    return {name: getattr(args, name) for name in names}


def loop_settings(args: argparse.Namespace) -> dict[str, Any]:
    """add_settings()'s options for the loop itself: the group commit's batch and interval,
    the queues and how to share between them, the schedules, waking."""
    names, weights = parse_queues(args.queues) if args.queues else (None, {})
    return {
        "batch": args.batch,
        "commit_interval": args.commit_interval,
        "queues": names,
        "weights": weights or None,
        "fair": not args.strict,
        "schedules": [parse_every(text) for text in args.every],
        "wake": not args.no_wake,
        "purge_after": args.purge_after,
        "purge_every": args.purge_every,
        "reconnect_limit": args.reconnect_limit,
        "job_timeout": args.job_timeout,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labqueue.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "db",
        help=f"the queue's SQLite file or postgresql:// URL; '-' reads it from ${DB_VARIABLE} "
        "(how a supervisor passes it: a command line is readable by every local user)",
    )
    parser.add_argument("worker_id", help="a name for this worker, stored on the jobs it claims")
    parser.add_argument("lease_seconds", type=seconds, help="how long each claim holds a job")
    parser.add_argument(
        "idle_exit",
        type=seconds,
        nargs="?",
        default=DEFAULT_IDLE_EXIT,
        help=f"leave after this many seconds with nothing to do (default {DEFAULT_IDLE_EXIT})",
    )
    parser.add_argument(
        "--no-idle-exit",
        action="store_true",
        help="never leave for lack of work: run until stopped (IDLE_EXIT is then ignored)",
    )
    add_settings(parser)
    args = parser.parse_args(argv)
    if args.db == "-":
        args.db = db_from_env()
        if args.db is None:
            parser.error(f"DB is '-', which reads the queue's location from {DB_VARIABLE}, but it is not set")
    if args.lease_seconds <= 0:
        parser.error(f"LEASE_SECONDS must be more than zero, got {args.lease_seconds}")
    configure_logging(args.log_level, args.log_format, log_success=args.log_success)
    guard_logging(args.db)  # whatever is logged, the location's password is not
    publish = running_publisher()  # a pool's supervisor reads which job ran, should this process die
    # This process is a worker's own: its heap keeps its top between statements (labqueue.heap).
    if not heap.keep_top():
        log.debug("worker %s: not glibc, the allocator keeps its own settings", args.worker_id)
    try:
        registry.load_for_worker(args.handlers)
    except ImportError as exc:  # HandlersNotLoaded: the module and the cause, on one line
        parser.error(f"--handlers: {redact(exc, args.db)}")
    except NoHandlers as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    stop = StopFlag()
    stop.install()
    try:
        run(
            args.db,
            args.worker_id,
            args.lease_seconds,
            None if args.no_idle_exit else args.idle_exit,
            poll=args.poll,
            stop=stop,
            **queue_settings(args),
            **loop_settings(args),
            publish=publish,
        )
    except ForcedShutdown:
        return 1
    except LabqueueError as exc:  # a bad file, a lock held too long: one line, not a traceback
        log.error("worker %s stopped: %s", args.worker_id, redact(exc, args.db))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
