"""KeepAlive: a background thread that keeps renewing one job's lease while its
handler is busy, so a short lease can still cover long work."""

from __future__ import annotations

import os
import threading
import time

from . import validate
from .queue import Clock, Job, JobQueue


class KeepAlive:
    """Wrap the slow part of a handler:
    ``with KeepAlive(db_file, job, lease_seconds=q.lease_seconds) as hb: ...``.

    Every `interval` (a third of the lease unless given) the thread sends a fenced
    heartbeat. When one is refused, the job is no longer this worker's: `lost` is set
    and the thread ends, and the handler can look at `hb.lost` between its steps
    and give up. `cancelled` is set as well when the reason is that someone cancelled
    the job (rather than another worker taking it over after the lease ran out).
    `beats` counts the accepted heartbeats."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        job: Job,
        *,
        lease_seconds: float,
        interval: float | None = None,
        clock: Clock = time.time,
    ) -> None:
        # Checked here, in the caller's thread: the heartbeat thread could only report it later.
        lease_seconds = validate.positive("lease_seconds", lease_seconds)
        self.interval = lease_seconds / 3 if interval is None else validate.positive("interval", interval)
        self.job, self.path = job, path
        self.lease_seconds, self.clock = lease_seconds, clock
        self.beats = 0
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._halt = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(name=f"keepalive-{job.id}", daemon=True, target=self._run)

    def _run(self) -> None:
        # A sqlite3 connection belongs to the thread that opened it, so this thread opens its own,
        # of an existing queue only: a mistyped path is an error (QueueNotFound), never a new file.
        try:
            with JobQueue(
                self.path, lease_seconds=self.lease_seconds, clock=self.clock, schema=None, create=False
            ) as q:
                while not self._halt.wait(self.interval):  # wakes early, with True, when stopped
                    if not q.heartbeat(self.job):
                        record = q.job(self.job.id)
                        if record is not None and record.state == "cancelled":
                            self.cancelled.set()
                        self.lost.set()
                        return
                    self.beats += 1
        except Exception as exc:  # a heartbeat we cannot send is a lease we may lose
            self.error = exc
            self.lost.set()

    def start(self) -> KeepAlive:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
