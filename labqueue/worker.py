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

A worker started by a supervisor (labqueue.pool, labqueue.procs) has no arguments: its
queue's location is in LABQUEUE_DB, and its name, lease, idle exit and settings are in
LABQUEUE_WORKER_SETTINGS, one JSON value, taken out of the environment at start so that no
process a handler starts inherits it. Run by hand, a DB of ``-`` reads the location from
LABQUEUE_DB. Either way a password in a URL is never on a command line, which every local
user can read.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, NoReturn

from . import handlers as registry
from . import heap, joblog
from .attribution import running_publisher
from .backends import open_queue
from .core import new_token, split_return
from .durations import duration
from .environment import DB_VARIABLE, WORKER_SETTINGS_VARIABLE, db_from_env, take_worker_start
from .errors import EffectEndedTransaction, InvalidArgument, LabqueueError, NoHandlers, UnknownJobKind
from .fairness import QueueTurns
from .joblog import configure_logging, job_fields, outcome_words, queue_of
from .queue import Finished, Job, JobQueue
from .reconnect import Reconnector
from .redaction import guard_logging, redact
from .renewal import Closed, Holding, Renewer, renewal_queue, watch
from .schedule import Scheduler
from .settings import (
    DEFAULT_COMMIT_INTERVAL,
    DEFAULT_IDLE_EXIT,
    WorkerSettings,
    WorkerStart,
    worker_settings,
)
from .unknown_kinds import give_back_unknown
from .wakeup import SAFETY_POLL
from .watchdog import Watchdog

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
    """Run one claimed job as the worker loop does (work_batch, with a batch of one) and
    report it: the loop's rules, the loop's log lines. Returns its outcome: "done",
    "queued" (retried after a backoff), "dead", "cancelled", "lost" (the lease was no
    longer this worker's: reported too late, or found lost before the handler ran, which
    then does not run) or "given back" (a kind `handlers` lacks: labqueue.unknown_kinds)."""
    table = registry.HANDLERS if handlers is None else handlers
    outcomes: list[str] = []
    work_batch(q, [job], table, claim_for=lambda ran: None, stop=StopFlag(), outcomes=outcomes)
    if outcomes:
        return outcomes[0]
    return "lost" if job.kind in table else "given back"


def run_handler(q: JobQueue, job: Job, handlers: Mapping[str, registry.Handler]) -> Finished:
    """Run one job's handler and say what it came to, without reporting it yet: the
    effect and the value it returned (core.split_return), or the failure. A job of a kind
    `handlers` lacks never gets here: work_batch gives it back first (labqueue.unknown_kinds),
    and one passed in anyway raises UnknownJobKind, reporting nothing."""
    fn = handlers.get(job.kind)
    if fn is None:
        raise UnknownJobKind(
            f"no handler is registered for kind {job.kind!r}; work_batch gives such a job back"
        )
    try:
        returned = fn(job, q)
        if returned is None:
            return Finished(job)
        effect, result = split_return(returned)  # a value JSON cannot keep fails the attempt
        return Finished(job, effect, result=result)
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
        log.log(level, "job %d (%s): %s", job.id, job.kind, outcome_words(outcome), extra=extra)
    else:
        log.log(
            level,
            "job %d (%s) failed on attempt %d of %d: %s; %s",
            job.id,
            job.kind,
            job.attempts,
            job.max_attempts,
            report.error or "its effect raised",
            outcome_words(outcome),
            exc_info=report.exception,
            extra=extra,
        )


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
    publish: Callable[..., None] | None = None,
    limit_for: Callable[[str], float | None] = lambda kind: None,
    outcomes: list[str] | None = None,
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
    a few attribute writes per job; and the running job's id and time limit (`limit_for`
    its kind) to `publish`, for the supervisor, which kills a handler stuck past its limit
    and notes which job ran should the process die (labqueue.attribution.RunningSlot).
    An effect that ends the reporting transaction (EffectEndedTransaction: nothing of the
    report was saved) fails its own job, and the report is made again. `outcomes`, when
    given, receives each reported job's outcome in the order reported (handle reads it)."""
    finished: list[Finished] = []
    held = Holding() if held is None else held
    pending = held.pending  # one list, emptied in place by the renewal thread's give-back
    pending[:] = call(give_back_unknown, q, batch, handlers, worker=worker)  # kinds it cannot run
    held.finished = finished
    lock = held.lock
    timings: dict[int, tuple[float, float]] = {}  # job id: (when it ended, how long it ran)
    last_commit = monotonic()
    ran = 0
    queue_now = call(_batch_clock, q, pending, monotonic)

    def report(claim: tuple | None = None) -> list[Job]:
        nonlocal finished, last_commit
        claimer, size, *scope = claim if claim is not None else (None, 1)
        token, tries = new_token(), 0  # the claim's token is ours: a retry finds what it took

        def settle() -> tuple[list[str], list[Job]]:
            nonlocal tries
            tries += 1
            again = (worker or claimer) if tries > 1 else None  # a retry, after a lost connection
            queues = scope[0] if scope else None
            return q.settle(
                finished, claim_for=claimer, limit=size, queues=queues, claim_token=token, again=again
            )

        while True:
            try:
                settled, nxt = call(settle)
                break
            except EffectEndedTransaction as exc:  # again, as a retry: `again` finds what committed
                if not _fail_effect(finished, exc):
                    raise
        quiet = not log.isEnabledFor(joblog.success_level)  # then a plain success has no line
        for done, outcome in zip(finished, settled, strict=True):
            if not (quiet and outcome == "done" and done.error is None):
                _log_outcome(q, done, outcome, worker=claimer, timing=timings.get(done.job.id))
        if outcomes is not None:
            outcomes.extend(settled)
        timings.clear()  # it held the jobs just reported, and no others
        finished, last_commit = [], monotonic()
        held.finished = finished
        return nxt

    half_lease = q.lease_seconds / 2
    while pending:
        if stop.requested and ran > 0:  # the job in hand runs; the rest are given back
            call(q.release, held.take_pending())
            break
        if pending[0].lease_expires_at - queue_now() < half_lease:
            if finished:
                report()
            kept = call(q.extend, held.take_pending())
            pending += kept
            queue_now = call(_batch_clock, q, kept, monotonic)
            continue
        with lock:  # the renewal thread may have given the rest back, or closed the worker
            if held.closed:
                _parked(held)
            if not pending:
                break
            job, began = pending.pop(0), monotonic()
            held.running = (job, began)
        if publish is not None:
            publish(job.id, limit_for(job.kind))
        result = run_handler(q, job, handlers)
        with lock:
            held.running = None
            if held.closed:  # timed out or stopped as it ran: the thread reports it, not us
                _parked(held)
            finished.append(result)
        if publish is not None:
            publish(None)
        ended = monotonic()
        timings[job.id] = (time.time(), ended - began)
        ran += 1
        if pending and ended - last_commit >= commit_interval:
            report()
    return ran, report(None if stop.requested else claim_for(ran))


def _fail_effect(finished: list[Finished], exc: EffectEndedTransaction) -> bool:
    """The report of the job whose effect ended the transaction becomes that failure (in
    place: the renewal thread reads the same list). False if no success in `finished` is
    that job's."""
    for i, done in enumerate(finished):
        if done.job.id == exc.job_id and done.error is None:
            finished[i] = Finished(done.job, error=error_text(exc), exception=exc)
            return True
    return False


def _parked(held: Holding) -> NoReturn:
    """The renewal thread has taken over (a time-out): it reports and ends the process.
    Wait for that; where the process is not ended (a test's exit), stop the loop."""
    held.lock.release()
    try:
        held.resume.wait()
    finally:
        held.lock.acquire()
    raise Closed("the renewal thread stopped this worker")


def run(
    path: str,
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = DEFAULT_IDLE_EXIT,
    settings: WorkerSettings | None = None,
    *,
    stop: StopFlag | None = None,
    max_jobs: int | None = None,
    handlers: Mapping[str, registry.Handler] | None = None,
    sleep: Callable[[float], None] | None = None,
    publish: Callable[..., None] | None = None,
    spare: Callable[[], Sequence[int]] = tuple,
    **options: Any,
) -> int:
    """Work until idle for `idle_exit` seconds (None: until stopped), `max_jobs` are
    handled, or a stop is requested. Returns the number of jobs this worker handled.
    It builds a WorkerLoop, whose run() is the loop as its steps.

    `settings` (labqueue.settings.WorkerSettings; its defaults when None), changed by any
    of its fields given as keywords (`options`: run(..., batch=1, queues="mail:3,reports")),
    say how it works. max_attempts, backoff_base, backoff_cap and synchronous go to the
    JobQueue the worker opens (None: JobQueue's default). Group commit: the worker claims up to `batch`
    ready jobs, runs them, and reports them in one write transaction that also claims
    the next batch (work_batch). On a shallow queue a batch is whatever is ready, often
    one job: nothing waits for a batch to fill. An idle worker looks with a read
    (JobQueue.any_ready) and takes the write lock only when there is something to claim.
    A stop never strands a lease: jobs claimed but not started are given back.

    `queues` (None: every queue) are the named queues it takes jobs from, highest priority
    first; with several, it takes turns between them (weighted as written, see
    labqueue.fairness) unless strict=True, which orders them by priority alone. It ticks
    the `every` schedules (labqueue.schedule) once per period. Idle, it waits for a producer's hint
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
        worker_settings(settings, **options),
        stop=stop,
        max_jobs=max_jobs,
        handlers=handlers,
        sleep=sleep,
        publish=publish,
        spare=spare,
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
        settings: WorkerSettings | None = None,
        *,
        stop: StopFlag | None = None,
        max_jobs: int | None = None,
        handlers: Mapping[str, registry.Handler] | None = None,
        sleep: Callable[[float], None] | None = None,
        publish: Callable[..., None] | None = None,
        spare: Callable[[], Sequence[int]] = tuple,
    ) -> None:
        settings = WorkerSettings() if settings is None else settings  # checked when made
        self.settings = settings
        self.path, self.worker_id, self.lease_seconds = path, worker_id, lease_seconds
        self.idle_exit = idle_exit
        self.stop = stop or StopFlag()
        self.max_jobs, self.sleep, self.publish = max_jobs, sleep, publish
        self.handlers = registry.HANDLERS if handlers is None else handlers
        # What the steps read, as attributes (the hot path reads batch and commit_interval).
        self.batch, self.commit_interval, self.poll = settings.batch, settings.commit_interval, settings.poll
        self.wake, self.reconnect_limit = settings.wake, settings.reconnect_limit
        self.names = names = settings.queue_names
        take_turns = names is not None and len(names) > 1 and not settings.strict
        self.turns = QueueTurns(names, settings.turn_weights) if names and take_turns else None
        self.scheduler = Scheduler(settings.schedules)
        self.purge_after, self.purge_every = settings.purge_after, settings.purge_every
        self.next_purge = time.monotonic()
        self.options: dict[str, Any] = settings.queue_options()
        self.renewer = Renewer(
            renewal_queue(path, lease_seconds, self.options),
            lease_seconds=lease_seconds,
            worker=worker_id,
            job_timeout=settings.job_timeout,
            limits=registry.TIMEOUTS,
            spare=spare,
        )
        self.handled = 0  # jobs run to an outcome
        self.jobs: list[Job] = []  # the batch in hand: claimed, not run yet
        self.give_up_at: float | None = None  # set by the first empty look, cleared by any job
        self.why = ""  # why the loop ended, for the last log line

    def run(self) -> int:
        """Work until should_stop() or idle_exit_due(); returns the number of jobs handled."""
        try:
            with self.open() as q:
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

    def open(self) -> Any:
        """The queue, opened as a running worker reconnects: a server that cannot be reached
        yet is waited for with backoff, within reconnect_limit (labqueue.reconnect)."""
        self.reconnector = Reconnector(
            None,
            name=self.worker_id,
            limit=self.reconnect_limit,
            log=log,
            stopping=lambda: self.stop.requested,
        )
        return self.reconnector.first_open(
            lambda: open_queue(self.path, lease_seconds=self.lease_seconds, **self.options)
        )

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
        self.call = self.reconnector.call
        watch(self.renewer.held)  # labqueue.cancelled(job) reads it
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
        for job_id in self.call(lambda: self.scheduler.tick(q, q.server_time())):
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
        now = self.call(self.q.server_time)
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
            limit_for=self.renewer.limit_for,
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
# The worker's options are labqueue.settings.WorkerSettings' fields.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labqueue.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "db",
        help=f"the queue's SQLite file or postgresql:// URL; '-' reads it from ${DB_VARIABLE} "
        "(how a supervisor passes it: a command line is readable by every local user)",
    )
    parser.add_argument("worker_id", help="a name for this worker, stored on the jobs it claims")
    parser.add_argument("lease_seconds", type=duration, help="how long each claim holds a job")
    parser.add_argument(
        "idle_exit",
        type=duration,
        nargs="?",
        default=DEFAULT_IDLE_EXIT,
        help=f"leave after this many seconds with nothing to do (default {DEFAULT_IDLE_EXIT})",
    )
    parser.add_argument(
        "--no-idle-exit",
        action="store_true",
        help="never leave for lack of work: run until stopped (IDLE_EXIT is then ignored)",
    )
    # Run by hand, a worker takes its settings from its command line alone; started by a
    # supervisor, from LABQUEUE_WORKER_SETTINGS alone, where the supervisor wrote what it read.
    WorkerSettings.add_options(parser, variables=False)
    try:
        start = take_worker_start()
    except InvalidArgument as exc:
        parser.error(str(exc))
    if start is None:
        args = parser.parse_args(argv)
        if args.lease_seconds <= 0:
            parser.error(f"LEASE_SECONDS must be more than zero, got {args.lease_seconds}")
        idle_exit = None if args.no_idle_exit else args.idle_exit
        settings = WorkerSettings.from_args(args)  # reads no variable
        try:
            start = WorkerStart(args.worker_id, args.lease_seconds, idle_exit, settings)
        except InvalidArgument as exc:
            parser.error(str(exc))
        db = args.db
    else:
        given = sys.argv[1:] if argv is None else argv
        if given:
            parser.error(f"{WORKER_SETTINGS_VARIABLE} gives every argument; got more: {' '.join(given)}")
        db = "-"
    if db == "-":
        db = db_from_env()
        if db is None:
            parser.error(f"DB is '-', which reads the queue's location from {DB_VARIABLE}, but it is not set")
    return work_as_told(parser, db, start)


def work_as_told(parser: argparse.ArgumentParser, db: str, start: WorkerStart) -> int:
    """The worker process itself, once it knows its queue and settings."""
    settings, worker_id = start.settings, start.worker_id
    configure_logging(settings.log_level, settings.log_format, log_success=settings.log_success)
    guard_logging(db)  # whatever is logged, the location's password is not
    publish = running_publisher()  # a pool's supervisor reads which job ran, should this process die
    # This process is a worker's own: its heap keeps its top between statements (labqueue.heap).
    if not heap.keep_top():
        log.debug("worker %s: not glibc, the allocator keeps its own settings", worker_id)
    try:
        registry.load_for_worker(list(settings.handlers))
    except ImportError as exc:  # HandlersNotLoaded: the module and the cause, on one line
        parser.error(f"--handlers: {redact(exc, db)}")
    except NoHandlers as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    watchdog = None
    if publish is None and (settings.job_timeout is not None or registry.TIMEOUTS):
        # No supervisor reads a slot of ours: a watchdog process keeps the time limits from
        # outside, for a handler that holds the GIL and so stops the renewal thread too.
        watchdog = Watchdog(db, worker_id).start()
        publish = watchdog.publisher()
    stop = StopFlag()
    stop.install()
    try:
        run(
            db,
            worker_id,
            start.lease_seconds,
            start.idle_exit,
            settings,
            stop=stop,
            publish=publish,
            spare=tuple if watchdog is None else watchdog.pids,
        )
    except ForcedShutdown:
        return 1
    except LabqueueError as exc:  # a bad file, a lock held too long: one line, not a traceback
        log.error("worker %s stopped: %s", worker_id, redact(exc, db))
        return 1
    finally:
        if watchdog is not None:
            watchdog.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
