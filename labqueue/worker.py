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
from .errors import UnknownJobKind
from .queue import Job, JobQueue

DEFAULT_IDLE_EXIT = 2.0
DEFAULT_POLL = 0.05


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
) -> int:
    """Work until idle for `idle_exit` seconds, `max_jobs` are handled, or a stop
    is requested. Returns the number of jobs this worker handled.

    One write transaction per job: each completion claims the next job as it commits.
    An idle worker looks with a read (JobQueue.any_ready) and takes the write lock only
    when there is something to claim. A job that has been claimed is always handled
    before the loop leaves, so a stop never strands a fresh lease."""
    stop = stop or StopFlag()
    handled = 0

    def claim_for() -> str | None:
        more = not stop.requested and (max_jobs is None or handled + 1 < max_jobs)
        return worker_id if more else None

    with JobQueue(path, lease_seconds=lease_seconds) as q:
        give_up_at: float | None = None  # set by the first empty look, cleared by any job
        job: Job | None = None
        while True:
            if job is None:
                if stop.requested or (max_jobs is not None and handled >= max_jobs):
                    break
                job = q.claim_next(worker_id) if q.any_ready() else None
                if job is None:
                    now = time.monotonic()
                    if give_up_at is None:
                        give_up_at = now + idle_exit
                    if now >= give_up_at:
                        break
                    sleep(poll)
                    continue
                give_up_at = None
            _, job = handle_then_claim(q, job, handlers, claim_for=claim_for)
            handled += 1
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
    args = parser.parse_args(argv)
    if args.lease_seconds <= 0:
        parser.error(f"LEASE_SECONDS must be more than zero, got {args.lease_seconds}")
    for module in args.handlers:
        registry.load_module(module)
    stop = StopFlag()
    stop.install()
    try:
        run(args.db, args.worker_id, args.lease_seconds, args.idle_exit, poll=args.poll, stop=stop)
    except ForcedShutdown:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
