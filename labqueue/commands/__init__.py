"""The labqueue command's commands, one function each, its docstring its help
(labqueue.cli parses the command line and calls one): working.py (worker, enqueue),
reading.py (stats, jobs, job), operating.py (requeue-dead, cancel, purge, pause, resume,
migrate), serving.py (health, metrics, dashboard). What they share is here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..backends import is_postgres_url, open_queue
from ..errors import LabqueueError, QueueNotFound
from ..queue import JobQueue
from ..redaction import redact

PROG = "labqueue"


class UsageError(LabqueueError):
    """A bad argument found after parsing: reported like argparse's own, exit code 2 (a
    LabqueueError, so a dashboard page shows its sentence: "no such file: ...")."""


def open_existing(location: str, *, read_only: bool = False, **settings: Any) -> Any:
    """The queue at `location` for a command that reads or changes it: never creates a file
    or a queue and never writes its schema (a queue of an older schema is refused, naming
    `labqueue migrate`), and refuses a location that holds no queue, as a usage error.
    `settings` go to the queue (the dashboard's shorter timeout); `read_only` opens a file
    for reading only (the dashboard of a file this user may not write)."""
    try:
        if is_postgres_url(location):
            return open_queue(location, create=False, **settings)
        if not Path(location).exists():
            raise UsageError(f"no such file: {redact(location)} (nothing was created)")
        return JobQueue(location, create=False, read_only=read_only, **settings)
    except QueueNotFound as exc:
        raise UsageError(str(exc)) from None
