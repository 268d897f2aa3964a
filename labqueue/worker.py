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
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import handlers as registry
from . import heap
from .attribution import running_publisher
from .backends import open_queue
from .batch import error_text, handle, run_handler, work_batch  # noqa: F401 (labqueue.worker's API)
from .durations import duration
from .environment import DB_VARIABLE, WORKER_SETTINGS_VARIABLE, db_from_env, take_worker_start
from .errors import InvalidArgument, LabqueueError, NoHandlers
from .fairness import QueueTurns
from .joblog import configure_logging
from .queue import Job
from .reconnect import Reconnector
from .redaction import guard_logging, redact
from .renewal import Renewer, renewal_queue, watch
from .schedule import Scheduler
from .settings import (
    DEFAULT_IDLE_EXIT,
    WorkerSettings,
    WorkerStart,
    worker_settings,
)
from .signals import ForcedShutdown, StopFlag
from .wakeup import SAFETY_POLL
from .watchdog import Watchdog

log = logging.getLogger("labqueue.worker")  # the same name when run as __main__
log.addHandler(logging.NullHandler())  # silent unless the program configures logging (main() does)


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
        (labqueue.batch.work_batch: group commit)."""
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
