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

Time limits: a kind's own (``@handler("kind", timeout=...)``), else the worker's
(``--job-timeout``). Once a handler has run past it, the thread stops renewing,
records the job as failed, fenced ("timed out after N s": retried after a backoff
on another worker, or dead on its last attempt), gives back the batch's jobs not
started, reports those finished, and ends the worker process with EXIT_TIMED_OUT
(a Python thread cannot be stopped), so that its supervisor (labqueue.pool) starts a
fresh one. The limit counts the handler only, not the report of its result.

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
from .joblog import job_fields, queue_of

# The exit code of a worker process stopped because a handler ran past its time limit
# (sysexits' EX_TEMPFAIL: try again); the supervisor replaces it and says why
# (labqueue.pool, labqueue.attribution).
EXIT_TIMED_OUT = 75
MAX_TICK = 1.0  # the thread looks at least this often, so a time limit is kept to about a second
# Whether the thread may open its own connection to an SQLite file. It may since labqueue's
# open keeps the process's POSIX locks (issue 34: the open used to check the file through
# descriptors of its own, and closing one dropped every lock the process held on it, the
# worker's own connection's included). Off, a worker on SQLite renews nothing, and at a time
# limit only ends its process; the job then moves on when its lease ends.
SQLITE_SECOND_CONNECTION = True

log = logging.getLogger("labqueue.worker")


class Holding:
    """What a worker holds now, written by its loop and read by the renewal thread.
    Plain attributes, no lock: each write replaces one reference (atomic in CPython),
    and every decision the thread takes on them is fenced in the database."""

    __slots__ = ("finished", "pending", "running")

    def __init__(self) -> None:
        self.running: tuple[Job, float] | None = None  # the job whose handler runs, since (monotonic)
        self.pending: Sequence[Job] = ()  # claimed, not started (the loop pops from this list)
        self.finished: Sequence[Finished] = ()  # run, not reported yet

    def jobs(self) -> list[Job]:
        """Every job held: the running one, those not started, those not reported."""
        running = self.running
        held = [] if running is None else [running[0]]
        return held + list(self.pending) + [report.job for report in list(self.finished)]


def time_limit(value: object, name: str = "timeout") -> float | None:
    """A time limit: None (none), or a finite number of seconds above zero."""
    return None if value is None else validate.positive(name, value)


def renewal_queue(
    location: str, lease_seconds: float, settings: Mapping[str, Any]
) -> Callable[[], Any] | None:
    """How the renewal thread opens its own queue on the worker's `location`: an existing
    queue only (create=False; on SQLite no schema step either), with the worker's
    `settings` (its backoff, for the time-out's retry), no wake-ups, and a lock timeout
    no longer than the lease (a renewal that waits longer is too late anyway). None on
    SQLite while SQLITE_SECOND_CONNECTION is off."""
    own: dict[str, Any] = {**settings, "create": False, "wake": False, "timeout": min(30.0, lease_seconds)}
    if not is_postgres_url(location):
        if not SQLITE_SECOND_CONNECTION:
            return None
        own["schema"] = None
    return lambda: open_queue(location, lease_seconds=lease_seconds, **own)


class Renewer:
    """The renewal thread of one worker process (see the module's docstring).

    `opener()` opens the thread's own queue (called in the thread, the first time
    it writes; None: the thread has no connection, so it renews nothing, and at a time
    limit it only ends the process); `limits` maps a kind to its time limit (read at each look, so kinds
    registered later count), `job_timeout` is the limit of the other kinds (None: no
    limit). `exit(code)` ends the process (os._exit: the stuck handler's thread cannot
    be stopped); `monotonic` is the clock `Holding.running` is stamped with."""

    def __init__(
        self,
        opener: Callable[[], Any] | None,
        *,
        lease_seconds: float,
        worker: str,
        job_timeout: float | None = None,
        limits: Mapping[str, float] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        exit: Callable[[int], Any] = os._exit,
    ) -> None:
        lease_seconds = validate.positive("lease_seconds", lease_seconds)
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
        handler's limit, time it out; running a sixth of a lease or more, renew what the
        worker holds (again every third of a lease)."""
        running = self.held.running
        if running is None:
            return
        job, began = running
        ran = now - began
        limit = self.limit_for(job.kind)
        if limit is not None and ran >= limit:
            self.time_out(running, ran, limit)
            return
        if ran < self.renew_after or self._open is None:
            return
        last_run, last_at = self._renewed
        if last_run is running and now - last_at < self.renew_every:
            return
        if self.renew():
            self._renewed = (running, now)

    def _queue(self) -> Any:
        if self._q is None:
            assert self._open is not None  # every caller returns first when there is no opener
            self._q = self._open()
        elif self._reconnect:
            self._q.reconnect()
        self._reconnect = False
        return self._q

    def renew(self) -> bool:
        """Extend the lease of every job held (fenced: a job no longer ours is left as it
        is). False when the database could not be reached: the next look tries again."""
        jobs = self.held.jobs()
        if not jobs:
            return True
        try:
            kept = self._queue().extend(jobs)
        except Exception as exc:  # the lease may run out: another worker then takes the job
            self._reconnect = isinstance(exc, ConnectionLost)
            log.warning("worker %s: could not renew the leases of %d job(s): %s", self.worker, len(jobs), exc)
            return False
        self.renewals += 1
        lost = {job.id for job in jobs} - {job.id for job in kept}
        if lost:
            log.debug("worker %s: job(s) %s are no longer ours, not renewed", self.worker, sorted(lost))
        return True

    def time_out(self, running: tuple[Job, float], ran: float, limit: float) -> None:
        """The running handler is past its limit: record its job as failed (fenced), give
        back the jobs not started, report those finished, and end the process."""
        job = running[0]
        self.timed_out = job
        if self._open is None:  # nothing to record it with: its lease hands it on
            log.error(
                "job %d (%s) timed out after %g s on attempt %d of %d; worker %s stops to be replaced, "
                "and the job goes to another worker when its lease ends",
                job.id,
                job.kind,
                limit,
                job.attempts,
                job.max_attempts,
                self.worker,
                extra=job_fields(job, worker=self.worker, queue=None, duration_s=ran),
            )
            self._exit(EXIT_TIMED_OUT)
            return
        error = f"timed out after {limit:g} s (its time limit); its worker process was replaced"
        outcome: str | None = None
        queue = None
        try:
            q = self._queue()
            outcome = q.fail(job, error)
            queue = queue_of(q, job.id)
        except Exception as exc:
            log.error("worker %s: could not record job %d's time-out: %s", self.worker, job.id, exc)
        if outcome is None and self.held.running is not running:
            # Its handler returned meanwhile and its own report won the fence: no time-out.
            self.timed_out = None
            return
        words = {"queued": "it will be retried after a backoff", "dead": "no attempts left: it is dead"}
        log.error(
            "job %d (%s) timed out after %g s on attempt %d of %d; %s; worker %s stops to be replaced",
            job.id,
            job.kind,
            limit,
            job.attempts,
            job.max_attempts,
            words.get(outcome or "", "it was no longer this worker's"),
            self.worker,
            extra=job_fields(job, worker=self.worker, queue=queue, duration_s=ran),
        )
        try:
            q = self._queue()
            now = self.held.running
            others = [now[0]] if now is not None and now[0] is not job else []  # started meanwhile
            given = q.release(others + list(self.held.pending))
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
        self._exit(EXIT_TIMED_OUT)
