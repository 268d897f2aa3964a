"""Running a claimed batch, the one way a job is run: each job's handler in turn, and its
report with the next claim in one write transaction (group commit: Queue.settle). The
worker loop (labqueue.worker) runs every batch through work_batch; handle() is the same
path for one job, for tests and a learner's cell."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from . import handlers as registry
from . import joblog
from .core import new_token, split_return
from .errors import EffectEndedTransaction, UnknownJobKind
from .joblog import job_fields, outcome_words, queue_of
from .queue import Finished, Job, JobQueue
from .renewal import Closed, Holding
from .settings import DEFAULT_COMMIT_INTERVAL
from .signals import StopFlag
from .unknown_kinds import give_back_unknown

# The worker's logger: a job's lines are the worker's, whichever module writes them.
log = logging.getLogger("labqueue.worker")
log.addHandler(logging.NullHandler())


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

