"""Running jobs kept alive by their worker, and time limits.

A worker process runs one renewal thread beside its loop (labqueue.worker.run starts
it). The loop publishes what it holds in a `Holding`, a few plain attribute writes per
job: the job whose handler runs and since when, the batch's jobs not started yet and
those finished but not yet reported. The thread wakes every `tick` seconds (a sixth of
the lease, at most a second) and does nothing unless one handler has been running for
a sixth of the lease; then it renews the lease of every job the worker holds with the
queue's fenced heartbeat (`Queue.extend`: one UPDATE per job, checked against the
job's lease token, so a job another worker has taken over, or one cancelled, is never
renewed), and again every third of the lease while that handler runs. Jobs of a
no-op drain never get that far: the thread never touches the database for them.

The thread talks to the queue on a connection of its own (a second queue on the same
location, create=False), opened the first time it has something to write. A worker
that dies, is frozen (SIGSTOP) or loses its database renews nothing, so its jobs go
to another worker one lease later, as before.

At its first renewal for a handler (a sixth of the lease in), the thread also gives back
the batch's jobs not started yet (queued at once, their attempt returned): a long handler
does not keep the rest of its batch waiting while other workers are idle.

Time limits: a kind's own (``@handler("kind", timeout=...)``), else the worker's
(``--job-timeout``). Once a handler has run past it, the thread stops renewing,
records the job as failed, fenced ("timed out after N s": retried after a backoff
on another worker, or dead on its last attempt), gives back the batch's jobs not
started, reports those finished, kills the processes the handler started, and ends
the worker process with EXIT_TIMED_OUT (a Python thread cannot be stopped), so that
its supervisor (labqueue.pool) starts a fresh one. The limit counts the handler only,
not the report of its result. A handler stuck in C without releasing the GIL keeps
this thread from running at all: the process is then killed from outside, by its pool's
supervisor or a standalone worker's watchdog (labqueue.watchdog), KILL_GRACE seconds
past the limit.

One outcome per job: the loop and the thread agree through `Holding.lock`. The thread
times a handler out only while that same run is still the running one, and then closes
the Holding: the loop starts no job, reports nothing and claims nothing after that. A
handler that returned first keeps its own report.

Cancellation: when a renewal is refused because the running job was cancelled, the
thread marks it (`Holding.cancelled`), which the handler reads with
``labqueue.cancelled(job)`` (within a third of the lease of the cancel, once the handler
has run a sixth of one). A handler still running `cancel_grace` seconds later (CANCEL_GRACE
by default) is stopped as a timed-out one is, with EXIT_CANCELLED; the job stays
cancelled.

Renewal is by real time (time.monotonic). `Renewer.check(now)` is the thread's whole
decision, so a test can drive it with a clock of its own; the worker loop called on
its own (work_batch, as the fake-clock tests do) publishes into a Holding that nobody
reads, and renews nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import validate
from .backends import is_postgres_url, open_queue
from .core import Finished, Job
from .errors import ConnectionLost
from .joblog import job_fields, outcome_words, queue_of

# The exit code of a worker process stopped because a handler ran past its time limit
# (sysexits' EX_TEMPFAIL: try again); the supervisor replaces it and says why
# (labqueue.pool, labqueue.attribution).
EXIT_TIMED_OUT = 75
# The exit code of a worker process stopped because a handler kept running after its job
# was cancelled, CANCEL_GRACE seconds past the moment the handler could have seen it.
EXIT_CANCELLED = 79
CANCEL_GRACE = 10.0
# How long past a time limit a handler's process is killed from outside (the supervisor
# or the watchdog), should the renewal thread not have stopped it by then (a handler that
# holds the GIL in C, a process frozen). Time for the thread's own reports.
KILL_GRACE = 5.0
MAX_TICK = 1.0  # the thread looks at least this often, so a time limit is kept to about a second

log = logging.getLogger("labqueue.worker")


def timed_out_error(limit: float, process: str) -> str:
    """The error a job whose handler ran past its time limit is failed with; `process`
    says what became of its worker process ("replaced", "killed")."""
    return f"timed out after {limit:g} s (its time limit); its worker process was {process}"


class Holding:
    """What a worker holds now, written by its loop and read by the renewal thread.

    Plain attributes: each write replaces one reference (atomic in CPython), and every
    decision the thread takes on them is fenced in the database. `lock` orders the few
    moments where the two must agree: the loop takes a job from `pending` and marks it
    running, or marks it ended, under it; the thread times a run out (`closed`) or gives
    back the jobs not started under it. `cancelled`: the ids of held jobs the thread
    learned were cancelled."""

    __slots__ = ("cancelled", "closed", "finished", "lock", "pending", "resume", "running")

    def __init__(self) -> None:
        self.running: tuple[Job, float] | None = None  # the job whose handler runs, since (monotonic)
        self.pending: list[Job] = []  # claimed, not started (the loop pops from this list, in place)
        self.finished: Sequence[Finished] = ()  # run, not reported yet
        self.lock = threading.Lock()
        self.closed = False  # set by a time-out: the loop starts, reports and claims nothing more
        self.resume = threading.Event()  # set only where the process is not ended (a test's exit)
        self.cancelled: set[int] = set()

    def jobs(self) -> list[Job]:
        """Every job held: the running one, those not started, those not reported."""
        running = self.running
        held = [] if running is None else [running[0]]
        return held + list(self.pending) + [report.job for report in list(self.finished)]

    def take_pending(self) -> list[Job]:
        """Empty `pending` (in place: the loop holds the same list) and return what it held."""
        with self.lock:
            taken = list(self.pending)
            self.pending.clear()
        return taken


# The Holding of the worker loop running in this process (WorkerLoop.start sets it), for
# cancelled(): a handler asks about its own job without being handed anything new.
_current: list[Holding] = []


def watch(held: Holding) -> None:
    """Make `held` the one cancelled() reads (a worker loop starting in this process)."""
    _current[:] = [held]


def cancelled(job: Job) -> bool:
    """Whether `job`, whose handler runs in this worker process, has been cancelled.

    A handler that may run long checks it between steps and returns (or raises) when it
    is True; its result is discarded either way (the cancel voided the lease). The worker
    learns of a cancel at its next renewal: within a third of the lease, once the handler
    has run a sixth of one. A handler that runs on regardless is stopped CANCEL_GRACE
    seconds later, with its worker process (labqueue.renewal). Outside a worker (a test
    calling the handler directly) it is always False.

        @handler("export")
        def export(job, q):
            for page in pages(job.payload):
                if labqueue.cancelled(job):
                    return None
                write(page)
    """
    return bool(_current) and job.id in _current[0].cancelled


class Closed(BaseException):
    """Raised in the loop when the renewal thread closed its Holding and the process was
    not ended (only a test's exit function returns): the loop must not go on."""


def kill_children(spare: Sequence[int] = ()) -> list[int]:
    """Kill every process this one started (a stuck handler's subprocesses), with their own
    children, but those in `spare` (a watchdog). Returns the pids killed."""
    import psutil

    from .procs import kill_tree

    killed: list[int] = []
    for child in psutil.Process().children():
        if child.pid not in spare:
            with contextlib.suppress(Exception):  # gone already, or not ours to kill
                killed += kill_tree(child.pid)
    return killed


def time_limit(value: object, name: str = "timeout") -> float | None:
    """A time limit: None (none), or a duration above zero within every clock's bounds
    (validate.seconds: what --job-timeout accepts too)."""
    return None if value is None else validate.seconds(name, value)


def renewal_queue(location: str, lease_seconds: float, settings: Mapping[str, Any]) -> Callable[[], Any]:
    """How the renewal thread opens its own queue on the worker's `location`: an existing
    queue only (create=False; on SQLite no schema step either), with the worker's
    `settings` (its backoff, for the time-out's retry), no wake-ups, and a lock timeout
    no longer than the lease (a renewal that waits longer is too late anyway). A second
    connection to an SQLite file is safe: labqueue's open keeps the process's POSIX locks
    (closing a descriptor of the file would drop every lock the process holds on it)."""
    own: dict[str, Any] = {**settings, "create": False, "wake": False, "timeout": min(30.0, lease_seconds)}
    if not is_postgres_url(location):
        own["schema"] = None
    return lambda: open_queue(location, lease_seconds=lease_seconds, **own)


class Renewer:
    """The renewal thread of one worker process (see the module's docstring).

    `opener()` opens the thread's own queue (called in the thread, the first time
    it writes); `limits` maps a kind to its time limit (read at each look, so kinds
    registered later count), `job_timeout` is the limit of the other kinds (None: no
    limit). `exit(code)` ends the process (os._exit: the stuck handler's thread cannot
    be stopped); `monotonic` is the clock `Holding.running` is stamped with;
    `cancel_grace` how long a handler may run on once it could see its job cancelled;
    `spare()` the pids a stop must not kill (the worker's watchdog)."""

    def __init__(
        self,
        opener: Callable[[], Any],
        *,
        lease_seconds: float,
        worker: str,
        job_timeout: float | None = None,
        limits: Mapping[str, float] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        exit: Callable[[int], Any] = os._exit,
        cancel_grace: float = CANCEL_GRACE,
        spare: Callable[[], Sequence[int]] = tuple,
    ) -> None:
        lease_seconds = validate.positive("lease_seconds", lease_seconds)
        self.cancel_grace = validate.positive("cancel_grace", cancel_grace, allow_zero=True)
        self.spare = spare  # processes a stop must not kill (the worker's watchdog)
        self.job_timeout = time_limit(job_timeout, "job_timeout")
        self.held = Holding()
        self.worker = worker
        self.limits: Mapping[str, float] = {} if limits is None else limits
        self.renew_after = lease_seconds / 6  # a handler running this long gets its leases renewed...
        self.renew_every = lease_seconds / 3  # ... and again this often while it runs
        self.tick = min(self.renew_after, MAX_TICK)
        self.renewals = 0  # renewal transactions committed
        self.timed_out: Job | None = None
        self._open, self._exit, self.monotonic = opener, exit, monotonic
        self._q: Any = None
        self._reconnect = False
        self._renewed: tuple[tuple[Job, float] | None, float] = (None, 0.0)  # (for which run, when)
        self._cancel_seen: tuple[tuple[Job, float] | None, float] = (None, 0.0)  # (which run, when)
        self._halt = threading.Event()
        self._thread = threading.Thread(name=f"renewal-{worker}", daemon=True, target=self._run)

    # -- the thread ------------------------------------------------------------------

    def start(self) -> Renewer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (the worker is leaving) and close its connection."""
        self._halt.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self.close()

    def close(self) -> None:
        q, self._q = self._q, None
        if q is not None:
            with contextlib.suppress(Exception):  # a connection already gone
                q.close()

    def _run(self) -> None:
        try:
            while not self._halt.wait(self.wait()):
                self.check(self.monotonic())
                if self.timed_out is not None:
                    return
        finally:
            self.close()

    def limit_for(self, kind: str) -> float | None:
        return self.limits.get(kind, self.job_timeout)

    def wait(self) -> float:
        """How long the thread sleeps: a tick, or less when the running handler's limit comes first."""
        running = self.held.running
        if running is None:
            return self.tick
        limit = self.limit_for(running[0].kind)
        if limit is None:
            return self.tick
        return min(self.tick, max(running[1] + limit - self.monotonic(), 0.0))

    # -- one look ----------------------------------------------------------------------

    def check(self, now: float) -> None:
        """One look at the worker, at `now` (its monotonic clock): past the running
        handler's limit, time it out; past the cancel grace of a cancelled one, stop it;
        running a sixth of a lease or more, renew what the worker holds (again every
        third of a lease), giving back the batch's unstarted jobs at the first renewal."""
        running = self.held.running
        if running is None:
            return
        job, began = running
        ran = now - began
        limit = self.limit_for(job.kind)
        if limit is not None and ran >= limit:
            self.time_out(running, ran, limit)
            return
        seen_run, seen_at = self._cancel_seen
        if seen_run is running and now - seen_at >= self.cancel_grace:
            self.stop_cancelled(running, now - seen_at)
            return
        if ran < self.renew_after:
            return
        last_run, last_at = self._renewed
        if last_run is running and now - last_at < self.renew_every:
            return
        first = last_run is not running
        if self.renew(running, now):
            self._renewed = (running, now)
            if first:
                self.give_back_unstarted(running)

    def _queue(self) -> Any:
        if self._q is None:
            self._q = self._open()
        elif self._reconnect:
            self._q.reconnect()
        self._reconnect = False
        return self._q

    def renew(self, running: tuple[Job, float] | None = None, now: float | None = None) -> bool:
        """Extend the lease of every job held (fenced: a job no longer ours is left as it
        is). False when the database could not be reached: the next look tries again. A
        refused renewal of the `running` job asks why: cancelled, it is marked for its
        handler (labqueue.cancelled) from `now` on."""
        jobs = self.held.jobs()
        if not jobs:
            return True
        try:
            q = self._queue()
            kept = q.extend(jobs)
            lost = {job.id for job in jobs} - {job.id for job in kept}
            if running is not None and running[0].id in lost and running[0].id not in self.held.cancelled:
                record = q.job(running[0].id)
                if record is not None and record.state == "cancelled":
                    self.held.cancelled.add(running[0].id)
                    self._cancel_seen = (running, self.monotonic() if now is None else now)
                    log.info(
                        "job %d (%s) was cancelled while it ran; its handler can see it "
                        "(labqueue.cancelled) and is stopped if it runs on for %g s",
                        running[0].id,
                        running[0].kind,
                        self.cancel_grace,
                        extra=job_fields(running[0], worker=self.worker, queue=None),
                    )
        except Exception as exc:  # the lease may run out: another worker then takes the job
            self._reconnect = isinstance(exc, ConnectionLost)
            log.warning("worker %s: could not renew the leases of %d job(s): %s", self.worker, len(jobs), exc)
            return False
        self.renewals += 1
        if lost:
            log.debug("worker %s: job(s) %s are no longer ours, not renewed", self.worker, sorted(lost))
        return True

    def give_back_unstarted(self, running: tuple[Job, float]) -> None:
        """The running handler is long: give back the jobs of its batch not started yet, so
        other workers take them now (queued at once, the attempt returned). Only while that
        same run is still running: the loop is then inside the handler, not taking jobs."""
        with self.held.lock:
            if self.held.running is not running or not self.held.pending:
                return
            unstarted = list(self.held.pending)
            self.held.pending.clear()
        try:
            given = self._queue().release(unstarted)
        except Exception as exc:  # they go to another worker when their leases end
            self._reconnect = isinstance(exc, ConnectionLost)
            log.warning("worker %s: could not give back %d job(s): %s", self.worker, len(unstarted), exc)
            return
        log.info(
            "worker %s: job %d runs long; gave back %d job(s) of its batch not started yet",
            self.worker,
            running[0].id,
            given,
        )

    def _close(self, running: tuple[Job, float]) -> bool:
        """Take over the worker from its loop for `running`: True if that run is still the
        running one (the loop then starts, reports and claims nothing more); False if its
        handler returned first (its own report stands)."""
        with self.held.lock:
            if self.held.running is not running or self.held.closed:
                return False
            self.held.closed = True
            return True

    def time_out(self, running: tuple[Job, float], ran: float, limit: float) -> None:
        """The running handler is past its limit: record its job as failed (fenced), give
        back the jobs not started, report those finished, kill what the handler started,
        and end the process."""
        job = running[0]
        if not self._close(running):
            return  # its handler returned meanwhile: no time-out
        self.timed_out = job
        error = timed_out_error(limit, "replaced")
        outcome: str | None = None
        queue = None
        try:
            q = self._queue()
            outcome = q.fail(job, error, timed_out=True)
            queue = queue_of(q, job.id)
        except Exception as exc:
            log.error("worker %s: could not record job %d's time-out: %s", self.worker, job.id, exc)
        log.error(
            "job %d (%s) timed out after %g s on attempt %d of %d; %s; worker %s stops to be replaced",
            job.id,
            job.kind,
            limit,
            job.attempts,
            job.max_attempts,
            outcome_words(outcome),
            self.worker,
            extra=job_fields(job, worker=self.worker, queue=queue, duration_s=ran),
        )
        self._hand_back_and_end(EXIT_TIMED_OUT)

    def stop_cancelled(self, running: tuple[Job, float], since: float) -> None:
        """The running handler's job was cancelled and it ran on past the grace: stop it
        as a timed-out one is (the job stays cancelled: there is nothing to record)."""
        if not self._close(running):
            return
        job = running[0]
        self.timed_out = job
        log.error(
            "job %d (%s) was cancelled and its handler ran on for %g s; worker %s stops to be replaced",
            job.id,
            job.kind,
            since,
            self.worker,
            extra=job_fields(job, worker=self.worker, queue=None),
        )
        self._hand_back_and_end(EXIT_CANCELLED)

    def _hand_back_and_end(self, code: int) -> None:
        """With the Holding closed: give back the jobs not started, report those finished,
        and end the process."""
        try:
            q = self._queue()
            given = q.release(self.held.take_pending())
            outcomes, _ = q.settle(list(self.held.finished))
            if given or outcomes:
                log.info(
                    "worker %s: gave back %d job(s) not started, reported %d finished",
                    self.worker,
                    given,
                    len(outcomes),
                )
        except Exception as exc:  # they go to another worker when their leases end
            log.error("worker %s: could not give back the rest of its batch: %s", self.worker, exc)
        self.close()
        self._end(code)

    def _end(self, code: int) -> None:
        """Kill what the stuck handler started, then end the process; where `exit` returns
        (a test's), let the parked loop go, raising Closed."""
        killed = kill_children(self.spare()) if self._exit is os._exit else []
        if killed:
            log.warning("worker %s: killed %d process(es) the handler started", self.worker, len(killed))
        self._exit(code)
        self.held.resume.set()
