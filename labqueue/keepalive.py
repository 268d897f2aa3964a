"""Extend a job's lease from a background thread while its handler works."""

from __future__ import annotations

import os
import threading
import time

from .queue import Clock, Job, JobQueue


class KeepAlive:
    """``with KeepAlive(path, job, lease_seconds=30) as hb:`` around slow work.

    Every `interval` (a third of the lease by default) the thread sends a fenced
    heartbeat. When one is refused, the lease belongs to someone else: `lost` is
    set and the thread stops, so the handler can check `hb.lost` and give up."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        job: Job,
        *,
        lease_seconds: float,
        interval: float | None = None,
        clock: Clock = time.time,
    ) -> None:
        if interval is not None and interval <= 0:
            raise ValueError(f"interval must be more than zero, got {interval!r}")
        self.path = path
        self.job = job
        self.lease_seconds = lease_seconds
        self.interval = interval or lease_seconds / 3
        self.clock = clock
        self.beats = 0
        self.lost = threading.Event()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"keepalive-{job.id}", daemon=True)

    def _run(self) -> None:
        # A sqlite3 connection belongs to the thread that opened it: open our own.
        try:
            with JobQueue(self.path, lease_seconds=self.lease_seconds, clock=self.clock, schema=None) as q:
                while not self._stop.wait(self.interval):
                    if not q.heartbeat(self.job):
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
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
