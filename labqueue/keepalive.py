"""KeepAlive: a background thread that keeps renewing one job's lease while its
handler is busy, so a short lease can still cover long work."""

from __future__ import annotations

import os
import threading
import time

from . import validate
from .backends import is_postgres_url, open_queue
from .core import Clock, Job


class KeepAlive:
    """Wrap the slow part of a handler:
    ``with KeepAlive(db_file_or_url, job, lease_seconds=q.lease_seconds) as hb: ...``.

    The location is a SQLite file or a postgresql:// URL (with `schema=` for a queue
    outside the default schema); `clock` defaults to the queue's own (time.time for a
    file, the server's clock for PostgreSQL).

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
        clock: Clock | None = None,
        schema: str | None = None,
    ) -> None:
        # Checked here, in the caller's thread: the heartbeat thread could only report it later.
        lease_seconds = validate.positive("lease_seconds", lease_seconds)
        self.interval = lease_seconds / 3 if interval is None else validate.positive("interval", interval)
        self.job, self.path = job, path
        self.lease_seconds, self.clock = lease_seconds, clock
        # A file is opened as it is (schema=None: nothing created or upgraded); a
        # PostgreSQL queue by its schema's name.
        postgres = is_postgres_url(path)
        self._settings: dict = {"schema": schema} if postgres and schema is not None else {}
        if not postgres:
            self._settings = {"schema": None, "clock": clock or time.time}
        elif clock is not None:
            self._settings["clock"] = clock
        self.beats = 0
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._halt = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(name=f"keepalive-{job.id}", daemon=True, target=self._run)

    def _run(self) -> None:
        # A connection belongs to the thread that opened it, so this thread opens its own, of
        # an existing queue only: a mistyped location is an error (QueueNotFound), never a new queue.
        try:
            with open_queue(self.path, lease_seconds=self.lease_seconds, create=False, **self._settings) as q:
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
        """Start renewing the lease every `interval` seconds, in a thread of its own."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop renewing and wait for the thread to end (leaving a ``with`` block does it)."""
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
