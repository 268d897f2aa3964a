"""The loop a worker process runs: claim, handle, complete or fail, repeat.

    python -m labqueue.worker DB WORKER_ID LEASE_SECONDS [IDLE_EXIT] [--handlers MODULE]

It leaves by itself after IDLE_EXIT seconds with nothing to do. The first
SIGTERM or SIGINT lets the current job finish and then exits (a warm stop); a
second one exits at once, and the job's lease hands it to another worker.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Mapping
from types import FrameType

from . import handlers as registry
from .errors import InvalidArgument, UnknownJobKind
from .queue import Finished, Job, JobQueue

DEFAULT_IDLE_EXIT = 2.0
DEFAULT_POLL = 0.05
# Group commit: on a deep queue a worker claims up to BATCH jobs at once and reports them
# (and claims the next batch) in one write transaction. A crash re-runs at most one batch.
DEFAULT_BATCH = 10
# A finished job is done only once its transaction commits. Within a batch the worker
# commits what has finished whenever this much time has passed since its last commit,
# so slow jobs are reported about as soon as they finish and only fast ones are grouped.
DEFAULT_COMMIT_INTERVAL = 0.05


class ForcedShutdown(BaseException):
    """Raised by the second stop signal. A BaseException, so that a handler's
    `except Exception` cannot swallow it; the open transaction rolls back."""


class StopFlag:
    """Signal handlers only set flags; the loop looks at them between jobs."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise ForcedShutdown(f"second stop signal ({signal.Signals(signum).name})")
        self.requested = True

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self)


def error_text(exc: BaseException) -> str:
    """What fail() records: the exception's class, so a person can sort the dead
    letters by cause, and its message."""
    return f"{type(exc).__name__}: {exc}"


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
        return q.fail(job, error_text(error), retry=False) or "lost", None
    try:
        effect = fn(job, q)
    except Exception as exc:
        return q.fail(job, error_text(exc)) or "lost", None
    try:
        worker = claim_for()
        if worker is None:
            accepted, next_job = q.complete(job, effect=effect), None
        else:
            accepted, next_job = q.complete_and_claim(job, worker, effect=effect)
    except Exception as exc:  # the effect raised and rolled back (with any claim): the job is still ours
        return q.fail(job, error_text(exc)) or "lost", None
    return ("done" if accepted else "lost"), next_job


def run_handler(q: JobQueue, job: Job, handlers: Mapping[str, registry.Handler]) -> Finished:
    """Run one job's handler and say what it came to, without reporting it yet: the
    effect it returned, or the failure (an unknown kind is final: no retry can fix it)."""
    fn = handlers.get(job.kind)
    if fn is None:
        error = UnknownJobKind(f"no handler is registered for kind {job.kind!r}")
        return Finished(job, error=error_text(error), retry=False)
    try:
        return Finished(job, effect=fn(job, q))
    except Exception as exc:
        return Finished(job, error=error_text(exc))


def work_batch(
    q: JobQueue,
    batch: list[Job],
    handlers: Mapping[str, registry.Handler],
    *,
    claim_for: Callable[[int], tuple[str, int] | None],
    stop: StopFlag,
    commit_interval: float = DEFAULT_COMMIT_INTERVAL,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[int, list[Job]]:
    """Run a claimed batch and report it in one write transaction that also claims the
    next batch. Returns how many jobs ran and the next batch.

    What has finished is committed early whenever `commit_interval` has passed, so a
    slow batch is reported as it goes. Before each job, leases with less than half their
    time left are renewed for the rest of the batch, and jobs taken over meanwhile are
    dropped. A warm stop runs no further job: the ones not started are given back.
    `claim_for(ran)` names the worker and the size of the next batch, or None."""
    finished: list[Finished] = []
    pending = list(batch)
    last_commit = monotonic()
    ran = 0
    while pending:
        if stop.requested:
            q.release(pending)
            break
        if pending[0].lease_expires_at - q.clock() < q.lease_seconds / 2:
            if finished:  # report what is done before its lease runs low too
                q.settle(finished)
                finished, last_commit = [], monotonic()
            pending = q.extend(pending)
            continue
        finished.append(run_handler(q, pending.pop(0), handlers))
        ran += 1
        if pending and monotonic() - last_commit >= commit_interval:
            q.settle(finished)
            finished, last_commit = [], monotonic()
    nxt = None if stop.requested else claim_for(ran)
    if nxt is None:
        q.settle(finished)
        return ran, []
    worker, size = nxt
    _, next_batch = q.settle(finished, claim_for=worker, limit=size)
    return ran, next_batch


def run(
    path: str,
    worker_id: str,
    lease_seconds: float,
    idle_exit: float = DEFAULT_IDLE_EXIT,
    *,
    poll: float = DEFAULT_POLL,
    stop: StopFlag | None = None,
    max_jobs: int | None = None,
    handlers: Mapping[str, registry.Handler] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    batch: int = DEFAULT_BATCH,
    commit_interval: float = DEFAULT_COMMIT_INTERVAL,
) -> int:
    """Work until idle for `idle_exit` seconds, `max_jobs` are handled, or a stop
    is requested. Returns the number of jobs this worker handled.

    Group commit: the worker claims up to `batch` ready jobs, runs them, and reports
    them in one write transaction that also claims the next batch (work_batch). On a
    shallow queue a batch is whatever is ready, often one job: nothing waits for a batch
    to fill. An idle worker looks with a read (JobQueue.any_ready) and takes the write
    lock only when there is something to claim. A stop never strands a lease: jobs
    claimed but not started are given back."""
    stop = stop or StopFlag()
    table = registry.HANDLERS if handlers is None else handlers
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise InvalidArgument(f"batch must be a whole number of at least 1, got {batch!r}")
    handled = 0

    def room(ran: int) -> int:
        return batch if max_jobs is None else min(batch, max_jobs - handled - ran)

    def claim_for(ran: int) -> tuple[str, int] | None:
        size = room(ran)
        return (worker_id, size) if size > 0 else None

    with JobQueue(path, lease_seconds=lease_seconds) as q:
        give_up_at: float | None = None  # set by the first empty look, cleared by any job
        jobs: list[Job] = []
        while True:
            if not jobs:
                if stop.requested or room(0) <= 0:
                    break
                jobs = q.claim_batch(worker_id, room(0))
                if not jobs:
                    now = time.monotonic()
                    if give_up_at is None:
                        give_up_at = now + idle_exit
                    if now >= give_up_at:
                        break
                    sleep(poll)
                    continue
                give_up_at = None
            ran, jobs = work_batch(
                q, jobs, table, claim_for=claim_for, stop=stop, commit_interval=commit_interval
            )
            handled += ran
    return handled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labqueue.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("db", help="the queue's SQLite file")
    parser.add_argument("worker_id", help="a name for this worker, stored on the jobs it claims")
    parser.add_argument("lease_seconds", type=float, help="how long each claim holds a job")
    parser.add_argument(
        "idle_exit",
        type=float,
        nargs="?",
        default=DEFAULT_IDLE_EXIT,
        help=f"leave after this many seconds with nothing to do (default {DEFAULT_IDLE_EXIT})",
    )
    parser.add_argument(
        "--handlers",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module of your own handlers (repeatable)",
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=DEFAULT_POLL,
        help=f"seconds between claims when idle (default {DEFAULT_POLL})",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"most jobs claimed and reported per write transaction (default {DEFAULT_BATCH})",
    )
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=DEFAULT_COMMIT_INTERVAL,
        help="within a batch, commit what has finished after this many seconds "
        f"(default {DEFAULT_COMMIT_INTERVAL})",
    )
    args = parser.parse_args(argv)
    if args.lease_seconds <= 0:
        parser.error(f"LEASE_SECONDS must be more than zero, got {args.lease_seconds}")
    for module in args.handlers:
        registry.load_module(module)
    stop = StopFlag()
    stop.install()
    try:
        run(
            args.db,
            args.worker_id,
            args.lease_seconds,
            args.idle_exit,
            poll=args.poll,
            stop=stop,
            batch=args.batch,
            commit_interval=args.commit_interval,
        )
    except ForcedShutdown:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
