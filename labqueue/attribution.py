"""Which jobs a crashed worker process held, written where an operator will look.

When a worker dies (a segfault in a C extension, the OOM killer, ``os._exit`` in a
handler), its jobs stay ``running`` under its name until their leases run out, and
then say only "lease expired". The supervisor knows the worker's name and how it
ended; ``note_crash`` writes that into each such job's ``last_error`` (only rows still
running under that name, so a job another worker has taken since is left alone), and
the supervisor's log line names the job ids.

Of a batch, one job at most was running: the others were claimed and not started, or
run and not yet reported. The database cannot tell them apart, so each worker the pool
starts publishes the id of the job whose handler runs in a ``RunningSlot``: eight bytes
of a file that has no name, which the supervisor made and the worker maps, one memory
write when a handler starts and one when it ends (about 0.3 us a job, against the tens
of microseconds a job costs). After the worker died, the supervisor reads it: that
job's note says "while running this job", the others' "while holding this job, not
running it". Where nobody published (a worker started otherwise), every note says
"while holding this job", which is true of each.
"""

from __future__ import annotations

import logging
import mmap
import os
import signal
import stat
import struct
import tempfile
from collections.abc import Callable, MutableMapping

from .backends import open_queue
from .renewal import EXIT_TIMED_OUT

log = logging.getLogger("labqueue.pool")

RUNNING_SLOT_VARIABLE = "LABQUEUE_RUNNING_SLOT"  # the descriptor a pool's worker inherits
_SLOT = struct.Struct("=q")  # the running job's id: a signed 64-bit integer, this machine's byte order
_NO_JOB = -(2**63)  # what the slot holds between handlers


def crash_message(returncode: int | None, running: bool | None = None) -> str:
    """The note for a job whose worker died, with its exit code or signal: the job whose
    handler was running (`running` True), one it held without running it (False), or one
    of a worker that did not say which it ran (None). A worker that stopped because a
    handler ran past its time limit recorded that job's failure itself where it could (it
    is no longer running, so it gets no note); a job it still held gets this one (on
    SQLite, for now, the timed-out job too: labqueue.renewal)."""
    if returncode == EXIT_TIMED_OUT:
        what = f"worker stopped (exit code {returncode}: a job ran past its time limit)"
    elif returncode is not None and returncode < 0:
        try:
            what = f"worker crashed (signal {signal.Signals(-returncode).name})"
        except ValueError:
            what = f"worker crashed (signal {-returncode})"
    else:
        what = f"worker crashed (exit code {returncode})"
    if running is None:
        return f"{what} while holding this job"
    return f"{what} while running this job" if running else f"{what} while holding this job, not running it"


def note_crash(
    location: str | os.PathLike[str], worker: str, returncode: int | None, running: int | None = None
) -> list[int]:
    """Write the crash note into the jobs still running under `worker` in the queue at
    `location`, and return their ids. `running` is the job whose handler was running
    (RunningSlot.read()): None when none ran, or nobody said. Never raises: a supervisor
    must go on restarting workers even when the queue cannot be reached (the failure is
    logged)."""
    try:
        with open_queue(str(location), create=False) as q:
            if running is None:
                return q.note_crash(worker, f"{crash_message(returncode)} (worker {worker})")
            return q.note_crash(
                worker,
                f"{crash_message(returncode, running=False)} (worker {worker})",
                running=running,
                running_message=f"{crash_message(returncode, running=True)} (worker {worker})",
            )
    except Exception as exc:
        log.warning("could not note the crash of worker %s on its jobs: %s", worker, exc)
        return []


class RunningSlot:
    """The supervisor's end of a worker's slot: a file of eight bytes without a name (no
    other process can open it by a name), its descriptor passed to the worker (`pass_fds`, and
    `environment()`). `read()` after the worker ended: the id of the job whose handler was
    running, or None."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (it lives as long as the slot: close())
        self._file.write(_SLOT.pack(_NO_JOB))
        self._file.flush()

    @property
    def fd(self) -> int:
        return self._file.fileno()

    def environment(self) -> dict[str, str]:
        return {RUNNING_SLOT_VARIABLE: str(self.fd)}

    def read(self) -> int | None:
        try:
            (job_id,) = _SLOT.unpack(os.pread(self.fd, _SLOT.size, 0))
        except (OSError, ValueError, struct.error):  # closed already
            return None
        return None if job_id == _NO_JOB else job_id

    def close(self) -> None:
        self._file.close()


def running_publisher(environ: MutableMapping[str, str] | None = None) -> Callable[[int | None], None] | None:
    """The worker's end: a function that writes the running job's id (None: none) where its
    supervisor reads it, or None when this process was not given a slot. The variable is
    taken out of the environment, so that no process this one starts takes a descriptor
    of its own for the slot; a descriptor that is not an unnamed file of eight bytes is
    left alone."""
    environ = os.environ if environ is None else environ
    raw = environ.pop(RUNNING_SLOT_VARIABLE, None)
    if not raw:
        return None
    try:
        fd = int(raw)
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 0 or found.st_size != _SLOT.size:
            raise ValueError("not a running slot")
        slot = memoryview(mmap.mmap(fd, _SLOT.size)).cast("q")  # one store per write: ~150 ns
        os.close(fd)
    except (ValueError, OSError) as exc:
        why = "a crash note cannot say which job ran"
        log.debug("%s=%r is no running slot (%s): %s", RUNNING_SLOT_VARIABLE, raw, exc, why)
        return None

    def publish(job_id: int | None) -> None:
        slot[0] = _NO_JOB if job_id is None else job_id

    return publish
