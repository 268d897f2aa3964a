"""Which jobs a crashed worker process held, written where an operator will look.

When a worker dies (a segfault in a C extension, the OOM killer, ``os._exit`` in a
handler), its jobs stay ``running`` under its name until their leases run out, and
then say only "lease expired". The supervisor knows the worker's name and how it
ended; ``note_crash`` writes that into each such job's ``last_error`` (only rows still
running under that name, so a job another worker has taken since is left alone), and
the supervisor's log line names the job ids.
"""

from __future__ import annotations

import logging
import os
import signal

from .backends import open_queue
from .renewal import EXIT_TIMED_OUT

log = logging.getLogger("labqueue.pool")


def crash_message(returncode: int | None) -> str:
    """The note for a job whose worker died: with its exit code or signal. A worker that
    stopped because a handler ran past its time limit recorded that job's failure itself
    where it could (it is no longer running, so it gets no note); a job it still held gets
    this one (on SQLite, for now, the timed-out job too: labqueue.renewal)."""
    if returncode == EXIT_TIMED_OUT:
        return f"worker stopped (exit code {returncode}: a job ran past its time limit) holding this job"
    if returncode is not None and returncode < 0:
        try:
            how = f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"signal {-returncode}"
    else:
        how = f"exit code {returncode}"
    return f"worker crashed ({how}) while running this job"


def note_crash(location: str | os.PathLike[str], worker: str, returncode: int | None) -> list[int]:
    """Write the crash note into the jobs still running under `worker` in the queue at
    `location`, and return their ids. Never raises: a supervisor must go on restarting
    workers even when the queue cannot be reached (the failure is logged)."""
    try:
        with open_queue(str(location), create=False) as q:
            return q.note_crash(worker, f"{crash_message(returncode)} (worker {worker})")
    except Exception as exc:
        log.warning("could not note the crash of worker %s on its jobs: %s", worker, exc)
        return []
