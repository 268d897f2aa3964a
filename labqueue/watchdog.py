"""A standalone worker's watchdog: the time limits kept from outside the worker's process.

A worker's renewal thread times out a handler that runs past its limit, but a handler
stuck in C with the GIL held (a regular expression backtracking, an extension that never
releases it) keeps that thread from running at all. Under a pool the supervisor kills such
a worker (labqueue.pool); a worker started on its own, ``python -m labqueue.worker``, starts
this process beside it when a time limit can apply:

    python -m labqueue.watchdog WORKER_ID

It reads the worker's running slot (labqueue.attribution.RunningSlot, its descriptor in
LABQUEUE_RUNNING_SLOT) a few times a second. Once the running handler is past its limit
plus renewal.KILL_GRACE, it kills the worker and everything the worker started (itself
spared), fails the job "timed out" in the queue (LABQUEUE_DB: the location, never on a
command line), and leaves; whatever restarts the worker (systemd, a container's policy)
starts a fresh one. It leaves as soon as the worker does.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from .attribution import RUNNING_SLOT_VARIABLE, RunningSlot, fail_timed_out
from .environment import DB_VARIABLE, db_from_env
from .procs import kill_tree
from .redaction import guard_logging

log = logging.getLogger("labqueue.watchdog")
TICK = 0.1  # how often it reads the slot


class Watchdog:
    """The worker's end: start() the watchdog process, publisher() for the loop, stop()."""

    def __init__(self, location: str, worker_id: str) -> None:
        self.location, self.worker_id = location, worker_id
        self.slot = RunningSlot()
        self.proc: subprocess.Popen | None = None

    def start(self) -> Watchdog:
        env = {**os.environ, DB_VARIABLE: self.location, **self.slot.environment()}
        command = [sys.executable, "-m", "labqueue.watchdog", "--", self.worker_id]
        self.proc = subprocess.Popen(command, env=env, pass_fds=(self.slot.fd,), stdin=subprocess.DEVNULL)
        return self

    def publisher(self) -> Callable[..., None]:
        return self.slot.publisher()

    def pids(self) -> tuple[int, ...]:
        return () if self.proc is None else (self.proc.pid,)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.slot.close()


def watch(slot: RunningSlot, worker_pid: int, worker_id: str, location: str, *, tick: float = TICK) -> int:
    """Watch the worker `worker_pid` (this process's parent) until it ends, or kill it
    once its running handler is overdue. Returns 0 either way."""
    while os.getppid() == worker_pid:
        over = slot.overdue()
        if over is not None:
            job_id, limit = over
            killed = kill_tree(worker_pid, spare=(os.getpid(),))
            fail_timed_out(location, worker_id, job_id, limit, pid=worker_pid, killed=len(killed))
            return 0
        time.sleep(tick)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--"]:
        args = args[1:]
    if len(args) != 1:
        print("usage: python -m labqueue.watchdog WORKER_ID", file=sys.stderr)
        return 2
    location = db_from_env()
    raw = os.environ.pop(RUNNING_SLOT_VARIABLE, "")
    if location is None or not raw.isdigit():
        print(f"labqueue.watchdog: needs {DB_VARIABLE} and {RUNNING_SLOT_VARIABLE}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the worker's to act on: it stops us
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    guard_logging(location)
    slot = RunningSlot.adopt(int(raw))
    return watch(slot, os.getppid(), args[0], location)


if __name__ == "__main__":
    sys.exit(main())
