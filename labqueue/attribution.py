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

The slot also carries the running handler's time limit and the moment (on the machine's
monotonic clock, which every process shares) past which the handler's process is to be
killed from outside: the limit plus renewal.KILL_GRACE. A handler stuck in C with the GIL
held keeps the worker's own renewal thread from ever timing it out; the supervisor
(labqueue.pool) or a standalone worker's watchdog (labqueue.watchdog) reads `overdue()`
and kills it, then fails the job "timed out" itself (`fail_timed_out`).
"""

from __future__ import annotations

import logging
import mmap
import os
import signal
import stat
import struct
import tempfile
import time
from collections.abc import Callable, MutableMapping
from typing import Any

from .backends import open_queue
from .joblog import outcome_words
from .renewal import EXIT_CANCELLED, EXIT_TIMED_OUT, KILL_GRACE, timed_out_error

log = logging.getLogger("labqueue.pool")

RUNNING_SLOT_VARIABLE = "LABQUEUE_RUNNING_SLOT"  # the descriptor a pool's worker inherits
# The running job's id (a signed 64-bit integer), the monotonic time past which it is to
# be killed (0.0: never) and its time limit in seconds, in this machine's byte order.
_SLOT = struct.Struct("=qdd")
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
    elif returncode == EXIT_CANCELLED:
        what = f"worker stopped (exit code {returncode}: a cancelled job's handler ran on)"
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


def fail_timed_out(
    location: str | os.PathLike[str], worker: str, job_id: int, limit: float, *, pid: int, killed: int
) -> str | None:
    """Record that `worker` (pid `pid`) was killed from outside, with the `killed` processes
    it had started, its job `job_id`'s handler past its time limit: the job is failed,
    "timed out" (retried after a backoff, or dead), fenced by the worker's name and the
    running state (Queue.fail_for_worker), and a line logged. Returns the outcome, or None
    when the job was no longer that worker's. Never raises (logged)."""
    error = timed_out_error(limit, "killed")
    outcome = None
    try:
        with open_queue(str(location), create=False) as q:
            outcome = q.fail_for_worker(job_id, worker, error)
    except Exception as exc:
        log.warning("could not record job %d's time-out for worker %s: %s", job_id, worker, exc)
    log.error(
        "worker %s (pid %d): job %d ran past its time limit (%g s) and the worker did not stop it; "
        "%s; killed %d process(es)",
        worker,
        pid,
        job_id,
        limit,
        outcome_words(outcome),
        killed,
    )
    return outcome


class RunningSlot:
    """The supervisor's end of a worker's slot: a file without a name (no other process can
    open it by a name), its descriptor passed to the worker (`pass_fds`, and
    `environment()`). `read()`: the id of the job whose handler is running (after the
    worker ended: was running), or None; `overdue(now)`: that job and its limit once `now`
    is past the moment it is to be killed."""

    _file: Any  # the unnamed file (or, adopted, the inherited descriptor's)

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (it lives as long as the slot: close())
        self._file.write(_SLOT.pack(_NO_JOB, 0.0, 0.0))
        self._file.flush()

    @classmethod
    def adopt(cls, fd: int) -> RunningSlot:
        """A slot whose descriptor this process inherited (a standalone worker's watchdog)."""
        slot = cls.__new__(cls)
        slot._file = os.fdopen(fd, "rb", buffering=0)
        return slot

    @property
    def fd(self) -> int:
        return self._file.fileno()

    def environment(self) -> dict[str, str]:
        return {RUNNING_SLOT_VARIABLE: str(self.fd)}

    def _fields(self) -> tuple[int, float, float] | None:
        """The slot as written, read twice until both reads agree (a reader never acts on a
        half-written slot)."""
        try:
            for _ in range(10):
                first = os.pread(self.fd, _SLOT.size, 0)
                if os.pread(self.fd, _SLOT.size, 0) == first:
                    return _SLOT.unpack(first)
        except (OSError, ValueError, struct.error):  # closed already
            return None
        return None

    def read(self) -> int | None:
        fields = self._fields()
        return None if fields is None or fields[0] == _NO_JOB else fields[0]

    def overdue(self, now: float | None = None) -> tuple[int, float] | None:
        """(job id, its time limit) when the running handler is past its kill time at `now`
        (time.monotonic() by default); else None."""
        fields = self._fields()
        if fields is None or fields[0] == _NO_JOB or fields[1] <= 0.0:
            return None
        now = time.monotonic() if now is None else now
        return (fields[0], fields[2]) if now > fields[1] else None

    def publisher(self) -> Callable[..., None]:
        """The worker's end, for a slot made in the worker's own process (a standalone
        worker's, which its watchdog reads)."""
        return _publisher(self.fd)

    def close(self) -> None:
        self._file.close()


def _publisher(fd: int) -> Callable[..., None]:
    """publish(job_id, limit=None): the running job's id (None: none) and its time limit in
    seconds (None: none), one store each into the mapped slot (about 150 ns)."""
    mapped = mmap.mmap(fd, _SLOT.size)
    ids = memoryview(mapped).cast("q")
    times = memoryview(mapped).cast("d")

    def publish(job_id: int | None, limit: float | None = None) -> None:
        if job_id is None:
            ids[0] = _NO_JOB
            times[1] = 0.0
            return
        if limit is None:
            times[1] = 0.0
        else:
            times[2] = limit
            times[1] = time.monotonic() + limit + KILL_GRACE
        ids[0] = job_id

    return publish


def running_publisher(environ: MutableMapping[str, str] | None = None) -> Callable[..., None] | None:
    """The worker's end: a function that writes the running job's id (None: none) and its
    time limit where its supervisor reads them, or None when this process was not given a
    slot. The variable is taken out of the environment, so that no process this one starts
    takes a descriptor of its own for the slot; a descriptor that is not an unnamed file of
    the slot's size is left alone."""
    environ = os.environ if environ is None else environ
    raw = environ.pop(RUNNING_SLOT_VARIABLE, None)
    if not raw:
        return None
    try:
        fd = int(raw)
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 0 or found.st_size != _SLOT.size:
            raise ValueError("not a running slot")
        publish = _publisher(fd)
        os.close(fd)
    except (ValueError, OSError) as exc:
        why = "a crash note cannot say which job ran"
        log.debug("%s=%r is no running slot (%s): %s", RUNNING_SLOT_VARIABLE, raw, exc, why)
        return None
    return publish
