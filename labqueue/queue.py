"""JobQueue: the queue on one SQLite file (labqueue.core's rules over the SQLite driver)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from .core import (
    LAST_ATTEMPT_EXPIRED,
    MAX_CLAIM_LIMIT,
    MAX_ERROR_CHARS,
    MAX_PAYLOAD_DEPTH,
    STATES,
    Clock,
    Effect,
    Finished,
    Job,
    JobRecord,
    Purged,
    backoff_ceiling,
    batch_size,
    every_key,
    new_token,
    period_key,
    period_start,
    purge_settings,
    scope_of,
    settings,
    walk_purge,
)
from .core import to_json as _to_json
from .drivers.sqlite import sql
from .drivers.sqlite.driver import BUSY_SLICE, SYNCHRONOUS_LEVELS, SqliteDriver
from .drivers.sqlite.schema import SQLITE_HEADER, check_writable, run_migration
from .errors import CannotOpen
from .roles import Queue
from .validate import DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP, DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS

# SQLite's synchronous level unless told: in WAL mode a commit survives a crash of the process,
# and only a power cut may lose the last few.
DEFAULT_SYNCHRONOUS = "NORMAL"

__all__ = [
    "BUSY_SLICE",
    "DEFAULT_SYNCHRONOUS",
    "LAST_ATTEMPT_EXPIRED",
    "MAX_CLAIM_LIMIT",
    "MAX_ERROR_CHARS",
    "MAX_PAYLOAD_DEPTH",
    "SQLITE_HEADER",
    "STATES",
    "SYNCHRONOUS_LEVELS",
    "Clock",
    "Effect",
    "Finished",
    "Job",
    "JobQueue",
    "JobRecord",
    "Purged",
    "_to_json",
    "backoff_ceiling",
    "batch_size",
    "every_key",
    "new_token",
    "period_key",
    "period_start",
    "purge_settings",
    "run_migration",
    "scope_of",
    "walk_purge",
]


def writable(path: str | os.PathLike[str]) -> bool:
    """May this user write the queue at `path` (its file, its -wal and -shm, its folder)? The
    same checks as opening it (asked of os.access, never by opening): False means it opens
    with read_only=True only."""
    try:
        check_writable(Path(path))
    except CannotOpen:
        return False
    return True


class JobQueue(Queue):
    """The queue on one SQLite file. Open one per process or thread; it is not shared.

    The rules (labqueue.core, applied by labqueue.roles.Queue) are the same on every backend;
    what is SQLite's (the busy wait, the effect guard; the file checks and migrations) is the driver's,
    labqueue.drivers.sqlite (driver.py, schema.py; its SQL in sql.py).

    Opening a file: a new path becomes a queue. An SQLite file without a `jobs` table
    (another application's database, say) is changed: labqueue switches it to WAL
    journal mode and adds its `jobs` table and indexes, and records its schema version
    in the file's `PRAGMA user_version` (so it refuses a file whose user_version another
    application already uses). Pass `create=False` to open only an existing queue:
    then a missing file, or one without a jobs table, raises QueueNotFound and nothing
    is created or changed. A `jobs` table that is not labqueue's shape raises
    ForeignJobsTable (extra columns that may be NULL or have a default are allowed), a
    newer schema version SchemaTooNew, a file, -wal, -shm or folder this user cannot
    write CannotOpen, all before anything is written; a queue made before schema
    versions existed is upgraded in place. `schema=None` opens without creating or
    upgrading anything. `read_only=True` (with create=False) opens a file this user may
    only read: every read works, a write raises CannotOpen, and a queue of an older schema
    is refused (it cannot be upgraded).

    `timeout` is how long a write waits for another connection's write lock before
    QueueBusy. SQLite waits in slices of BUSY_SLICE and Python retries between them,
    so a signal handler (a worker's second stop signal) is never held up by the wait.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: float = DEFAULT_LEASE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        synchronous: str = DEFAULT_SYNCHRONOUS,
        clock: Clock = time.time,
        rng: Callable[[], float] = random.random,
        schema: str | None = sql.SCHEMA,
        timeout: float = 30.0,
        create: bool = True,
        wake: bool = True,
        read_only: bool = False,
    ) -> None:
        checked = settings(lease_seconds, max_attempts, backoff_base, backoff_cap, timeout, rng)
        driver = SqliteDriver(
            path,
            clock=clock,
            synchronous=synchronous,
            schema=schema,
            timeout=checked["timeout"],
            create=create,
            wake=wake,
            read_only=read_only,
        )
        super().__init__(driver, checked)
        self._sqlite = driver

    @property
    def path(self) -> Path:
        """The queue's SQLite file."""
        return self._sqlite.path

    @property
    def wake(self) -> bool:
        """Whether enqueue sends idle workers a wake-up hint after it commits (``wake=``)."""
        return self._sqlite.wake_enabled

    def __enter__(self) -> JobQueue:
        return self

    def __repr__(self) -> str:
        return f"JobQueue({str(self.path)!r}, lease_seconds={self.lease_seconds})"
