"""The operator's side: pause and resume named queues, cancel a job, requeue dead ones,
purge finished ones in short windows, hand disk space back."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .. import validate
from ..core import (
    Purged,
    PurgeWindow,
    purge_settings,
    walk_purge,
)
from ..errors import (
    CannotCancel,
    JobNotFound,
)
from .base import QueueBase


class Operating(QueueBase):
    """pause, resume, paused, cancel, requeue_dead, purge, space, reclaim_space, vacuum."""

    def pause(self, queue: str, *, reason: str | None = None) -> bool:
        """Stop workers from taking jobs from `queue` (any queue name, "default" too) until
        resume(). Jobs already running finish; queued ones wait, untouched; producers still
        enqueue. Every queue object sees it within PAUSES_READ_EVERY seconds. Returns False
        if the queue was paused already (its first pause and reason are kept)."""
        queue = validate.queue_name(queue)
        reason = None if reason is None else self._stored(validate.text("reason", reason))
        with self._tx():
            paused = self._d.pause(queue, reason, self._now())
        self._paused_read_at = -math.inf
        return paused

    def resume(self, queue: str) -> bool:
        """Let workers take jobs from `queue` again. Returns False if it was not paused."""
        queue = validate.queue_name(queue)
        with self._tx():
            resumed = self._d.resume(queue)
            if resumed:
                self._d.hint_in_transaction()
        if resumed:
            self._d.hint_after_commit()
        self._paused_read_at = -math.inf
        return resumed

    def paused(self) -> dict[str, dict[str, Any]]:
        """The paused queues: when each was paused (the queue's clock) and why."""
        return {name: {"paused_at": at, "reason": reason} for name, at, reason in self._read(self._d.paused)}

    def cancel(self, job_id: int) -> str:
        """Cancel job `job_id` and return the state it was cancelled in. "queued": it will
        never run. "running": its lease is void, so its worker's next heartbeat, completion
        or failure is refused (a late completion's effect never commits) and the worker can
        see the job's state is "cancelled". A finished job (done, dead, or cancelled
        already) raises CannotCancel and nothing changes; an unknown id JobNotFound."""
        validate.job_id(job_id)
        with self._tx():
            state = self._d.state_of(job_id, lock=True)
            if state is None:
                raise JobNotFound(f"no job has id {job_id}: nothing was cancelled")
            if state not in ("queued", "running"):
                raise CannotCancel(
                    f"job {job_id} is {state} already: only a queued or running job can be cancelled"
                )
            self._d.cancel(job_id, self._now())
        return state

    def requeue_dead(self, ids: Sequence[int] | None = None) -> list[int]:
        """Put dead jobs (all of them, or those in `ids`) back in the queue, attempts reset to 0.
        Returns the ids requeued, sorted. An empty `ids` requeues nothing."""
        chosen = None if ids is None else validate.job_ids(ids)
        if chosen == []:
            return []
        with self._tx():
            requeued = sorted(self._d.requeue_dead(chosen, self._now()))
            if requeued:
                self._d.hint_in_transaction()
        if requeued:
            self._d.hint_after_commit()
        return requeued

    def purge(
        self,
        older_than: float,
        *,
        states: str | Iterable[str] = ("done",),
        batch: int = 1000,
        archive: bool = False,
    ) -> Purged:
        """Remove finished jobs (`states`: done by default; dead and cancelled only when
        named) that finished at least `older_than` seconds ago, and return what was done.

        The table is walked by id in windows of `batch` rows, each window its own short
        write transaction, so producers and workers wait at most one window's work.
        (`longest_hold_s` is measured around BEGIN ... COMMIT, so it also counts the
        commit's own work.) Queued and running jobs are never removed, nor is the newest
        row (ids are never handed out twice). With `archive`, each window moves its rows
        into jobs_archive in a way that cannot split: a row is deleted only as it is
        archived. Freed space stays for new jobs; reclaim_space() hands it back."""
        older_than, chosen, batch = purge_settings(older_than, states, batch, archive)
        before = self.server_time() - older_than
        first, last = self._read(self._d.purge_bounds)

        def window(after: int, size: int) -> tuple[int, int]:
            with self._tx():
                return self._d.purge_window(PurgeWindow(chosen, before, after, size, self._now()), archive)

        def next_job(after: int) -> tuple[int, float] | None:
            return self._read(lambda: self._d.created_after(after))

        return walk_purge(first, last, batch, before, next_job, window)

    def space(self) -> dict[str, int]:
        """What the jobs take on disk (the driver's own measure: pages, or bytes)."""
        return self._read(self._d.space)

    def reclaim_space(self, pages: int | None = None) -> int:
        """Hand free space back (see the driver); returns how much was freed."""
        if pages is not None:
            pages = validate.whole("pages", pages, low=1)
        return self._read(lambda: self._d.reclaim_space(pages))

    def vacuum(self) -> None:
        """Rebuild or vacuum the table (see the driver): run it when the queue is quiet."""
        self._read(self._d.vacuum)
