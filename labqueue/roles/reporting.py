"""The worker's reports on one job at a time: complete (with its effect and result), fail
(retried after full-jitter backoff, or dead), heartbeat and extend a lease, give jobs back
(release: never started; put_back: no handler here), and a supervisor's reports for a
worker that can no longer make them (fail_for_worker, note_crash). Each is fenced by the
job's lease token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from .. import validate
from ..core import (
    Effect,
    Failure,
    Job,
    backoff_ceiling,
    check_job,
)
from ..errors import (
    InvalidArgument,
)
from ..results import check_effect, exception_details, result_json
from .base import QueueBase


class Reporting(QueueBase):
    """complete, fail, heartbeat, extend, release, put_back; fail_for_worker, note_crash."""

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
