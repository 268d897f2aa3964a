"""The producer's side of the queue: enqueue one job or many, tick a periodic schedule,
hint idle workers. Every job goes in checked (labqueue.validate, labqueue.stored.to_json)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .. import validate
from ..core import (
    NewJob,
    NewJobs,
    concurrency_rule,
    every_key,
)
from ..errors import (
    InvalidArgument,
    PayloadNotSerializable,
)
from ..stored import to_json
from ..validate import DEFAULT_QUEUE
from .base import QueueBase


class Producing(QueueBase):
    """enqueue, enqueue_many, every, wake_workers."""

    def enqueue(
        self,
        kind: str,
        payload: Any,
        *,
        delay: float = 0.0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
    ) -> int | None:
        """Add one job, ready after `delay` seconds, and return the new row's id. If a
        job with this dedupe_key is already stored, nothing changes and the result is None.
        A higher `priority` is claimed first; `queue` names the queue it waits in (a
        worker may take from some queues only). Idle workers are woken.

        With a `concurrency_key`, no claim hands the job out while `concurrency_limit`
        jobs of that key are running (a lease that ran out frees its place); jobs behind
        it are taken meanwhile. Without them, a kind whose handler was registered with a
        concurrency_limit in this process gets the handler's (concurrency_rule()).

        The payload must read back as it went in: JSON without NaN or infinity, nested
        at most MAX_PAYLOAD_DEPTH deep, dict keys strings (JSON would turn 1 into "1",
        and {1: 'a', '1': 'b'} would lose a value); tuples come back as lists.
        Anything else raises PayloadNotSerializable."""
        row = NewJob(
            kind=validate.kind(kind),
            delay=validate.seconds("delay", delay, allow_zero=True),
            max_attempts=self.max_attempts
            if max_attempts is None
            else validate.attempts("max_attempts", max_attempts),
            dedupe_key=validate.dedupe_key(dedupe_key),
            priority=validate.priority(priority),
            queue=validate.queue_name(queue),
            payload=to_json(payload),
            now=self._now(),
        )
        key, limit = concurrency_rule(kind, payload, concurrency_key, concurrency_limit)
        if key is not None:
            row = replace(row, concurrency_key=key, concurrency_limit=limit)
        with self._tx():
            job_id = self._d.insert(row)
            if job_id is not None and row.delay == 0:
                self._d.hint_in_transaction()
        if job_id is not None and row.delay == 0:
            self._d.hint_after_commit()
        return job_id

    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Any],
        *,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
    ) -> int:
        """Add many jobs in one transaction: all of them, or (on any error) none.
        Each payload follows enqueue()'s rules. A `concurrency_key` (and limit) applies to
        every one of them; a handler's rule that takes its key from the payload does not
        apply here (enqueue them one by one)."""
        validate.kind(kind)
        priority = validate.priority(priority)
        queue = validate.queue_name(queue)
        key, limit = concurrency_rule(kind, None, concurrency_key, concurrency_limit, per_payload=False)
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Iterable):
            raise InvalidArgument(f"payloads must be an iterable of payloads, got {payloads!r:.80}")
        bodies = []
        for index, payload in enumerate(payloads):
            try:
                bodies.append(to_json(payload))
            except PayloadNotSerializable as exc:
                raise PayloadNotSerializable(f"payload #{index}: {exc}") from None
        if not bodies:
            return 0
        rows = NewJobs(kind, bodies, self.max_attempts, priority, queue, self._now(), key, limit)
        with self._tx():
            self._d.insert_many(rows)
            self._d.hint_in_transaction()
        self._d.hint_after_commit()
        return len(bodies)

    def wake_workers(self) -> int:
        """Hint idle workers that a job may be ready (never inside a transaction).
        Returns how many hints went out; never raises. A hint only ends a wait early."""
        try:
            return self._d.wake()
        except Exception:  # a hint that cannot be sent costs a poll, never a job
            return 0

    def every(
        self,
        kind: str,
        seconds: float,
        payload: Any = None,
        *,
        name: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int | None = None,
    ) -> int | None:
        """One tick of a periodic schedule: enqueue this period's job unless it exists.

        Periods are the clock's multiples of `seconds` (a 60 s schedule's periods start
        on the minute; on a database server, its clock's). The job carries the dedupe key
        "every:<name>:<period start>", so however many schedulers tick at once, each
        period gets exactly one job; call it as often as you like. Returns the new job's
        id, or None if this period's job was enqueued already. Missed periods are
        skipped: after downtime the current period runs once. `name` (default: kind)
        tells two schedules of one kind apart."""
        validate.kind(kind)
        validate.seconds("seconds", seconds)
        key = every_key(kind, seconds, name, self.server_time())
        return self.enqueue(
            kind, payload, dedupe_key=key, priority=priority, queue=queue, max_attempts=max_attempts
        )
