"""The worker's claim: lease ready jobs (one, a batch), look before locking, wait for
work. A claimed row that cannot be read is dead-lettered ("buried") in the claim's
transaction, and a key over its limit given back (labqueue.core.within_limits)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import core, validate
from ..core import (
    CLAIMED_KEY,
    LAST_ATTEMPT_EXPIRED,
    Claim,
    ClaimedRow,
    Job,
    Scope,
    keys_of,
    within_limits,
)
from ..stored import MAX_ERROR_CHARS, decode_payload, describe_unreadable
from .base import QueueBase


class Claiming(QueueBase):
    """claim, claim_batch, claim_next; any_ready, next_due, listen, wait_for_jobs."""

    def claim(self, worker: str, *, limit: int = 1, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, highest priority first and then
        oldest first, from `queues` (None: every queue), returned sorted by id.

        Readiness is a single test, visible_at <= now. The column holds a queued job's
        start time and a running job's lease deadline, so an expired lease is picked up
        here and no reaper is needed. Jobs whose lease ran out on their last attempt
        become dead. A claimed row that cannot be read (its payload is not JSON text)
        is dead-lettered in the same transaction, with the reason, and left out; the
        rest of the batch is returned. `limit` is at most MAX_CLAIM_LIMIT. It looks
        before it locks: on an empty queue it returns [] after one read."""
        return self._look_then_claim(worker, limit, queues, batch=False)

    def claim_batch(self, worker: str, limit: int, *, queues: Sequence[str] | None = None) -> list[Job]:
        """Lease up to `limit` ready jobs to `worker`, oldest first, after a read has shown
        that something is ready (an empty queue costs no lock). A job handed out before
        (attempts > 0: its worker may have crashed on it) comes alone, so a job that
        kills its worker cannot take a batch of others down with it twice (batch_size())."""
        return self._look_then_claim(worker, limit, queues, batch=True)

    def claim_next(self, worker: str, *, queues: Sequence[str] | None = None) -> Job | None:
        """Lease the next ready job to `worker`, or return None. The same rules as
        claim(worker): oldest first, attempts counted, and jobs whose lease ran out on
        their last attempt retired as dead. An unreadable row is dead-lettered and the
        next ready job is claimed instead."""
        self._check_worker(worker)
        scope = self._scope(queues)
        with self._tx():
            return self._claim_one(worker, scope)

    def _look_then_claim(
        self, worker: str, limit: int, queues: Sequence[str] | None, *, batch: bool
    ) -> list[Job]:
        limit = validate.claim_limit(limit)
        self._check_worker(worker)
        scope = self._scope(queues)
        if scope.name == "none" or not self._ready(scope):
            return []
        one_call = self._d.settle_in_one_call if batch else None
        if one_call is not None:
            claim = self._claim_params(worker, limit, scope)
            settled = self._read(lambda: one_call([], claim.now, claim))
            if settled is not None:
                return self._claimed_jobs(settled[1], claim)
        with self._tx():
            return self._claimed(self._claim_params(worker, limit, scope), batch=batch)

    def _claim_one(self, worker: str, scope: Scope) -> Job | None:
        while scope.name != "none":  # an unreadable row is buried, and the next one claimed instead
            claim = self._claim_params(worker, 1, scope)
            rows = self._d.claim(claim, batch=True)
            if not rows:
                return None
            jobs = self._jobs_of(rows, claim.now)
            if jobs:
                return jobs[0]
        return None

    def _claim_params(self, worker: str, limit: int, scope: Scope, token: str | None = None) -> Claim:
        now = self._now()
        lease_end = None if now is None else now + self.lease_seconds
        # core.new_token, looked up at each claim: every claim's token comes from that one place
        token = core.new_token() if token is None else validate.text("claim_token", token)
        return Claim(scope, now, self.lease_seconds, lease_end, token, worker, limit, LAST_ATTEMPT_EXPIRED)

    def _claimed(self, claim: Claim, *, batch: bool) -> list[Job]:
        """The claim inside the caller's transaction: the driver leases rows, and each
        becomes a Job, or is dead-lettered with the reason when it cannot be read (no
        retry can change a stored payload, so that job is never run)."""
        rows = self._d.claim(claim, batch=batch)
        if not batch:
            rows = self._fit_limits(rows, claim)
        return self._jobs_of(rows, claim.now)

    def _fit_limits(self, rows: list[ClaimedRow], claim: Claim) -> list[ClaimedRow]:
        """claim()'s one statement leases before anything can count: two jobs of one key
        in a claim, or (on PostgreSQL) two workers' claims at the same moment, can take a
        key past its limit. Counted again with the keys locked (this claim's own rows left
        out), the later ones go back, queued and ready at once, their attempt returned (as
        release() does)."""
        keys = keys_of(rows, CLAIMED_KEY)
        if not keys:
            return rows
        self._d.lock_keys(keys)
        fit, over = within_limits(rows, CLAIMED_KEY, self._d.held(keys, claim.now, claim.token))
        for row in over:
            self._d.release(Job(row[0], row[1], None, row[3], row[4], row[5], row[6]), claim.now)
        return fit

    def _jobs_of(self, rows: list[ClaimedRow], now: float | None) -> list[Job]:
        """The claimed rows as jobs, inside the claim's transaction; one that cannot be
        read is dead-lettered there and left out."""
        jobs, unreadable = self._read_rows(rows)
        self._bury(unreadable, now)
        return jobs

    @staticmethod
    def _read_rows(rows: list[ClaimedRow]) -> tuple[list[Job], list[ClaimedRow]]:
        """Claimed rows as jobs, sorted by id, and the rows that cannot be read."""
        jobs, unreadable = [], []
        rows.sort()  # by id: ids are unique, so no other column is compared
        for row in rows:
            kind, payload = row[1], row[2]
            if type(kind) is str and type(payload) is str:
                try:
                    jobs.append(Job(row[0], kind, decode_payload(payload), row[3], row[4], row[5], row[6]))
                    continue
                except (ValueError, RecursionError):
                    pass
            unreadable.append(row)
        return jobs, unreadable

    def _claimed_jobs(self, rows: list[ClaimedRow], claim: Claim | None) -> list[Job]:
        """A batch claim's rows as jobs, read after COMMIT so the write lock is not held
        for it; a row that cannot be read is dead-lettered in a transaction of its own."""
        jobs, unreadable = self._read_rows(rows)
        if unreadable and claim is not None:
            with self._tx():
                self._bury(unreadable, claim.now)
        return jobs

    def _bury(self, unreadable: list[ClaimedRow], now: float | None) -> None:
        """Dead-letter claimed rows that cannot be read, with the reason (in a transaction)."""
        for row in unreadable:
            reason = f"unreadable job, not run: {describe_unreadable(row[1], row[2])}"
            self._d.bury(row[0], row[5], reason[:MAX_ERROR_CHARS], now)

    def any_ready(self, queues: Sequence[str] | None = None) -> bool:
        """Whether a claim would find something now: a job to run (in `queues`, None for
        every queue), or an expired lease on a last attempt to retire. One read and no
        write lock, so producers and busy workers carry on while an idle worker looks."""
        return self._ready(self._scope(queues))

    def _ready(self, scope: Scope) -> bool:
        if scope.name == "none":
            return False
        return self._read(lambda: self._d.ready(scope, self._now()))

    def next_due(self, queues: Sequence[str] | None = None) -> float | None:
        """When the next live job (in `queues`, None for every queue) is due by the clock:
        a delayed job's start, a retry's backoff, a lease's end (None when nothing is
        queued or running). An idle worker waits no longer than this."""
        scope = self._scope(queues)
        return None if scope.name == "none" else self._read(lambda: self._d.next_due(scope))

    def listen(self) -> bool:
        """Start listening for producers' hints (a worker calls it once, before its first
        idle wait). True if hints can reach this queue; False means wait_for_jobs() only
        sleeps (see the driver)."""
        return self._read(self._d.listen)

    def wait_for_jobs(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a producer's hint that a job was enqueued.
        True if one came. A hint is never the truth: look (any_ready) and claim after it."""
        timeout = validate.seconds("timeout", timeout, allow_zero=True)
        return self._read(lambda: self._d.wait_for_jobs(timeout))

    def interrupt_wait(self) -> None:
        """End a wait_for_jobs() in progress early where the driver can (a stop signal's
        handler calls it)."""
        self._d.interrupt_wait()
