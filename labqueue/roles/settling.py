"""Group commit, the worker loop's path: report a whole batch and claim the next one in
one write transaction. Each job keeps its own rules: its completion is fenced by its
token, its effect commits with its completion or not at all (a savepoint per job), its
failure is retried or dead-lettered. What the batch shares is the transaction, so one
commit serves many jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import validate
from ..core import (
    INFRASTRUCTURE,
    ClaimedRow,
    Effect,
    Finished,
    Job,
    check_job,
)
from ..errors import (
    EffectEndedTransaction,
)
from ..results import check_effect, result_json
from .claiming import Claiming
from .reporting import Reporting


class Settling(Claiming, Reporting):
    """settle() and complete_and_claim(): reports and the next claim, in one transaction."""

    def complete_and_claim(
        self,
        job: Job,
        worker: str,
        effect: Effect | None = None,
        *,
        queues: Sequence[str] | None = None,
        result: Any = None,
    ) -> tuple[bool, Job | None]:
        """complete(job, effect), then claim_next(worker), in one write transaction.

        Returns (accepted, next job or None). The fence, the effect and its rollback
        are complete()'s: a stale lease returns False without running the effect and
        still claims; an effect that raises rolls back the completion and the claim
        together, and the exception propagates with the job still leased to us."""
        check_job(job)
        check_effect(effect)
        value = result_json(result)
        self._check_worker(worker)
        scope = self._scope(queues)
        with self._tx():
            accepted = self._d.complete(job, self._now(), value)
            if accepted and effect is not None:
                self._d.run_effect(job, effect)
            return accepted, self._claim_one(worker, scope)

    def settle(
        self,
        finished: Sequence[Finished],
        *,
        claim_for: str | None = None,
        limit: int = 1,
        queues: Sequence[str] | None = None,
        claim_token: str | None = None,
        again: str | None = None,
    ) -> tuple[list[str], list[Job]]:
        """Report every job in `finished` in one write transaction and, when `claim_for`
        names a worker, claim its next batch of up to `limit` jobs in the same one.

        Returns each job's outcome ("done", "queued", "dead", "cancelled" for a job
        cancelled while it ran, or "lost" for a job whose lease was no longer ours) and
        the jobs claimed (from `queues`, None for every queue). A stale token rejects
        that job only; an effect that raises rolls back that job's completion only (a
        savepoint) and fails it with the error, while the rest of the batch still
        commits. A database failure (a lock or statement timeout, a lost connection, a
        full disk) is never counted as a job's failure: it raises, nothing of the batch
        is saved, and the same reports can be settled again (each is fenced). An effect
        that tries to end the transaction raises EffectEndedTransaction and nothing of
        the batch is saved, as complete() does.

        A settle repeated after a lost connection (its COMMIT may have reached the server
        with the reply lost) passes `again`, the reporting worker's name, and the same
        `claim_token` (the claim's lease token, chosen by the caller): the jobs an earlier
        try claimed under it are returned rather than stranded, and a completion the
        earlier try committed (the job done, last held by `again`) is reported "done",
        not "lost"."""
        for report in finished:
            check_job(report.job)
        scope = None
        if claim_for is not None:
            limit = validate.claim_limit(limit)
            self._check_worker(claim_for)
            scope = self._scope(queues)
            if scope.name == "none":
                scope = None
        if again is not None:
            earlier = self._earlier_try(finished, claim_token, again)
            if earlier is not None:
                return earlier
        one_call = self._d.settle_in_one_call
        if one_call is not None and all(r.error is None and r.effect is None for r in finished):
            now = self._now()
            claim = None if scope is None else self._claim_params(claim_for or "", limit, scope, claim_token)
            pairs = [(r.job.id, r.job.lease_token) for r in finished if r.result is None]
            valued = [(r.job.id, r.job.lease_token, r.result) for r in finished if r.result is not None]

            def call() -> tuple[list[int], list[ClaimedRow]] | None:
                if valued:  # completions with a value: the driver's call takes them too
                    return one_call(pairs, now, claim, valued)
                return one_call(pairs, now, claim) if pairs or claim else ([], [])

            settled = self._read(call)
            if settled is not None:
                done = set(settled[0])
                outcomes = self._read(lambda: [self._plain_outcome(r.job, done, again) for r in finished])
                if finished:
                    self._d.hint_finished()
                return outcomes, self._claimed_jobs(settled[1], claim)
        rows, claim = [], None
        with self._tx():
            now = self._now()
            done = self._complete_plain(finished, now)
            outcomes = [
                self._plain_outcome(r.job, done, again)
                if r.error is None and r.effect is None and r.result is None
                else self._settle_one(r, now, again)
                for r in finished
            ]
            if scope is not None:
                claim = self._claim_params(claim_for or "", limit, scope, claim_token)
                rows = self._d.claim(claim, batch=True)
        if finished:  # producers waiting for one of these jobs look again
            self._d.hint_finished()
        return outcomes, self._claimed_jobs(rows, claim)

    def _earlier_try(
        self, finished: Sequence[Finished], token: str | None, worker: str
    ) -> tuple[list[str], list[Job]] | None:
        """What an earlier try of this settle committed, if it did: it claimed the jobs
        now running under `token` (found: it committed, reports and all), so each report
        reads its outcome back. None when nothing shows it committed: settle again."""
        rows = [] if token is None else self._read(lambda: self._d.claimed_by(token))
        if not rows:
            return None
        outcomes = self._read(lambda: [self._outcome_of(report.job, worker) for report in finished])
        return outcomes, self._claimed_jobs(rows, None)

    def _outcome_of(self, job: Job, worker: str) -> str:
        """A report an earlier try committed: the job's state as it stands ("done",
        "queued", "dead", "cancelled"), or "lost" if another worker holds it now."""
        record = self._d.job(job.id)
        if record is None or record.state == "running" or record.worker != worker:
            return "lost"
        return record.state

    def _plain_outcome(self, job: Job, done: set[int], again: str | None = None) -> str:
        """A plain completion's outcome, given the ids its statement completed."""
        if job.id in done:
            done.remove(job.id)  # a job reported twice is done once
            return "done"
        return self._why_lost(job, again)

    def _complete_plain(self, finished: Sequence[Finished], now: float | None) -> set[int]:
        """The completions without an effect, one fenced statement per lease token (a batch
        claim gives all its jobs one token): the ids still ours, now done. A job reported
        twice is done once; its second report finds it no longer ours."""
        by_token: dict[str, list[int]] = {}
        for report in finished:  # a plain completion: no error, no effect, no value
            if report.error is None and report.effect is None and report.result is None:
                by_token.setdefault(report.job.lease_token, []).append(report.job.id)
        done: set[int] = set()
        for token, ids in by_token.items():
            done.update(self._d.complete_many(ids, token, now))
        return done

    def _settle_one(self, report: Finished, now: float | None, again: str | None = None) -> str:
        job, d = report.job, self._d
        if report.error is not None:
            failed = self._fail(job, report.error, report.retry, now, report.exception)
            return failed or self._why_lost(job, again)
        if report.effect is None:
            return "done" if d.complete(job, now, report.result) else self._why_lost(job, again)
        with d.savepoint() as undo:
            if not d.complete(job, now, report.result):
                return self._why_lost(job, again)
            try:
                d.run_effect(job, report.effect)
                return "done"
            except EffectEndedTransaction:
                raise  # the transaction itself is in question: the whole batch rolls back
            except Exception as exc:
                if d.classify(exc) in INFRASTRUCTURE:
                    raise  # the database's failure, not the job's: the batch rolls back
                error, raised = f"{type(exc).__name__}: {exc}", exc
            undo()  # this job's completion and effect are undone, no other job's
        return self._fail(job, error, True, now, raised) or self._why_lost(job, again)

    def _why_lost(self, job: Job, again: str | None = None) -> str:
        """A report refused by the fence: "cancelled" if the job was cancelled, else "lost"
        (another worker holds it now, or it was retired). Read on the rare path only. A
        settle tried `again` by that worker reads back what its earlier try committed."""
        if again is not None:
            return self._outcome_of(job, again)
        return "cancelled" if self._d.state_of(job.id) == "cancelled" else "lost"
