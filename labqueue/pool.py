"""A supervised pool of worker processes: start N, replace the ones that crash, stop them
warm (SIGTERM: finish the current job) and then hard (kill_tree).

Every worker is a fresh interpreter running ``python -m labqueue.worker`` (see
``labqueue.procs.worker_command``), so the pool works the same under spawn, forkserver or
fork, and from a notebook. The queue's location (LABQUEUE_DB) and the worker's name and
settings (LABQUEUE_WORKER_SETTINGS, one JSON value) reach each worker in its environment,
never on its command line, where any local user could read a password.
``labqueue worker --concurrency N`` is this class with ``supervise()``; the course's labs
use its pieces (``fill``, ``reap``, ``kill``, ``stop``).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from . import validate
from .attribution import RunningSlot, fail_timed_out, note_crash
from .errors import InvalidArgument
from .procs import kill_tree, location_environment, worker_command, worker_environment
from .renewal import EXIT_CANCELLED, EXIT_TIMED_OUT
from .settings import DEFAULT_IDLE_EXIT, WorkerSettings, worker_settings

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

DEFAULT_GRACE = 10.0  # seconds a warm stop waits before the hard kill
TICK = 0.1  # how often supervise() looks at its workers
# Restarting a slot whose workers keep crashing at once (a dead database, a broken
# handler module): the first QUICK_CRASHES_FREE quick crashes in a row are replaced at
# once, then each waits RESTART_BASE * 2**n seconds (at most RESTART_CAP), half of it
# random, so a crash loop costs little CPU and N slots do not restart in step. A
# worker that ran STABLE_AFTER seconds or more resets its slot's count.
STABLE_AFTER = 1.0
QUICK_CRASHES_FREE = 2
RESTART_BASE = 0.25
RESTART_CAP = 10.0


def restart_delay(quick_crashes: int, rng: Callable[[], float] = random.random) -> float:
    """How long a slot waits before its next worker, after `quick_crashes` in a row."""
    if quick_crashes <= QUICK_CRASHES_FREE:
        return 0.0
    ceiling = min(RESTART_CAP, RESTART_BASE * 2 ** min(quick_crashes - QUICK_CRASHES_FREE - 1, 30))
    return ceiling / 2 + rng() * ceiling / 2


@dataclass
class Worker:
    """One worker process of a pool, from its start to its end."""

    name: str
    slot: int
    proc: subprocess.Popen
    started: float  # time.time() at the start
    ended: float | None = None
    running: RunningSlot | None = field(default=None, repr=False)  # which job runs, and its time limit
    last_running: int | None = None  # the job whose handler ran when it ended, read at reap()
    timed_out: tuple[int, float] | None = None  # (job, limit) it was killed for, past the limit

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def crashed(self) -> bool:
        """Ended with anything but exit code 0 (an error, a signal, a hard stop)."""
        return self.proc.returncode not in (None, 0)


def exit_reason(returncode: int | None) -> str:
    """How a process ended, in words: "exit code 3", "killed by SIGKILL", "running"."""
    if returncode is None:
        return "running"
    if returncode == EXIT_TIMED_OUT:
        return f"exit code {returncode}: a job ran past its time limit"
    if returncode == EXIT_CANCELLED:
        return f"exit code {returncode}: a cancelled job's handler ran on"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def stop_processes(procs: Iterable[subprocess.Popen], grace: float = DEFAULT_GRACE) -> list[subprocess.Popen]:
    """A warm stop of each process (SIGTERM lets the current job finish), all at once;
    after `grace` seconds, a hard kill (kill_tree) of any still running. Returns the
    processes that needed the hard kill."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    return _wait_then_kill(procs, grace)


def _wait_then_kill(procs: Sequence[subprocess.Popen], grace: float) -> list[subprocess.Popen]:
    deadline = time.monotonic() + grace
    hard = []
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            hard.append(proc)
    return hard


class StopSignals:
    """Counts SIGTERM and SIGINT: the first asks for a warm stop, a second for a hard one.
    Like every signal handler here it only sets a flag; supervise() acts on it."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    @property
    def warm(self) -> bool:
        return self.count >= 1

    @property
    def hard(self) -> bool:
        return self.count >= 2

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self)


class WorkerPool:
    """`size` worker processes on the queue at `path`, each in a slot of its own.

    Each process runs ``python -m labqueue.worker`` with `settings` (labqueue.settings.
    WorkerSettings), changed by any of its fields given as keywords (handlers=["myapp.jobs"],
    batch=1): handlers names modules of handlers to load, so the pool itself imports no
    application code. A worker leaves after `idle_exit` seconds with nothing to do; None:
    it runs until stopped. `names(n)` names
    the n-th process started (0, 1, 2, ...): a restarted worker gets a new name.
    `command(name)`, if given, replaces the worker command line altogether, for a lab
    that runs a worker program of its own. `quiet` sends the workers' output to
    /dev/null; `new_session` starts each in a session of its own, so a Ctrl-C in the
    terminal reaches only the process that supervises them, which passes it on.
    `note_crashes` writes, into each job a crashed worker still held, that it crashed
    and how (labqueue.attribution), and names those jobs in the log."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        size: int,
        *,
        lease_seconds: float = validate.DEFAULT_LEASE,
        idle_exit: float | None = DEFAULT_IDLE_EXIT,
        settings: WorkerSettings | None = None,
        names: Callable[[int], str] = "w{}".format,
        command: Callable[[str], list[str]] | None = None,
        quiet: bool = True,
        new_session: bool = False,
        popen_options: Mapping[str, Any] | None = None,
        note_crashes: bool = False,
        **options: Any,
    ) -> None:
        if path is None and command is None:
            raise InvalidArgument("a WorkerPool needs the queue's path (or a command of its own)")
        self.path = path
        self.size = _size(size)
        self.lease_seconds = lease_seconds
        self.idle_exit = idle_exit
        self.settings = worker_settings(settings, **options)
        self.names = names
        self.command = command
        self.quiet = quiet
        self.new_session = new_session
        self.popen_options = dict(popen_options or {})
        self.note_crashes = note_crashes
        self.crashed_jobs: dict[str, list[int]] = {}  # worker name: the jobs it held when it crashed
        self.slots: list[Worker | None] = [None] * self.size
        self.ended: list[Worker] = []  # every worker that has ended, oldest first
        self.started = 0  # processes started so far
        self.restarts = 0  # of them, replacements for crashed workers
        self.quick_crashes = [0] * self.size  # per slot, in a row (restart_delay)
        self.restart_at: dict[int, float] = {}  # slot -> time.monotonic() of its delayed restart

    # -- looking ----------------------------------------------------------------

    @property
    def workers(self) -> list[Worker]:
        """The workers in their slots (some may have ended since the last reap())."""
        return [w for w in self.slots if w is not None]

    @property
    def processes(self) -> dict[str, subprocess.Popen]:
        """Running workers by name."""
        return {w.name: w.proc for w in self.workers if w.proc.poll() is None}

    def alive(self) -> int:
        """How many worker processes are running."""
        return len(self.processes)

    def command_line(self, name: str) -> list[str]:
        """The command line of the worker called `name` (the same for every labqueue
        worker: its name and settings are in its environment, see _start)."""
        return worker_command() if self.command is None else self.command(name)

    # -- starting and replacing -----------------------------------------------------

    def fill(self) -> list[Worker]:
        """Start a worker in every empty slot (growing the slots to `size`). Returns the new ones."""
        self.slots += [None] * (_size(self.size) - len(self.slots))
        return [self._start(slot) for slot, w in enumerate(self.slots) if w is None and slot < self.size]

    def reap(self) -> list[Worker]:
        """Take every ended worker out of its slot, log how it ended, and return them."""
        now, gone = time.time(), []
        for slot, w in enumerate(self.slots):
            if w is not None and w.proc.poll() is not None:
                w.ended = now
                if w.running is not None:  # what it published last, then the slot is done with
                    w.last_running = w.running.read()
                    w.running.close()
                self.slots[slot] = None
                self.ended.append(w)
                gone.append(w)
                level = logging.WARNING if w.crashed else logging.INFO
                how = exit_reason(w.returncode)
                if w.timed_out is not None:
                    how += f", by its supervisor: job {w.timed_out[0]} ran past its time limit"
                log.log(level, "worker %s (pid %d) ended: %s", w.name, w.pid, how)
        return gone

    def enforce_time_limits(self, now: float | None = None) -> list[Worker]:
        """Kill every worker whose running handler is past its time limit plus KILL_GRACE
        (its own renewal thread did not stop it: a handler holding the GIL in C, a process
        frozen), with everything it started, and fail its job "timed out" for it. Returns
        the workers killed; reap() or check() then sees them gone."""
        killed = []
        for w in self.workers:
            over = None if w.running is None or w.proc.poll() is not None else w.running.overdue(now)
            if over is None:
                continue
            pids = kill_tree(w.proc)
            w.timed_out = over
            killed.append(w)
            if self.path is not None:
                fail_timed_out(self.path, w.name, *over, pid=w.pid, killed=len(pids))
        return killed

    def check(self) -> list[Worker]:
        """Enforce the time limits, reap(), then restart every worker that crashed (a clean
        exit, such as an idle exit, leaves its slot empty). Returns the workers that ended."""
        self.enforce_time_limits()
        gone = self.reap()
        for w in gone:
            if w.crashed and w.slot < self.size:
                self.quick_crashes += [0] * (w.slot + 1 - len(self.quick_crashes))
                quick = (w.ended or time.time()) - w.started < STABLE_AFTER
                self.quick_crashes[w.slot] = self.quick_crashes[w.slot] + 1 if quick else 0
                delay = restart_delay(self.quick_crashes[w.slot])
                held = self._note_crash(w)
                holding = _holding(held, w.last_running)
                if delay == 0:
                    fresh = self._restart(w.slot)
                    log.warning(
                        "worker %s crashed (%s)%s; restarted as %s (pid %d)",
                        w.name,
                        exit_reason(w.returncode),
                        holding,
                        fresh.name,
                        fresh.pid,
                    )
                else:
                    self.restart_at[w.slot] = time.monotonic() + delay
                    log.warning(
                        "worker %s crashed (%s)%s, %d quick crash(es) in a row in its slot; restart in %.1fs",
                        w.name,
                        exit_reason(w.returncode),
                        holding,
                        self.quick_crashes[w.slot],
                        delay,
                    )
        for slot, at in sorted(self.restart_at.items()):
            if time.monotonic() >= at:
                del self.restart_at[slot]
                fresh = self._restart(slot)
                log.warning("restarted slot %d as %s (pid %d) after its backoff", slot, fresh.name, fresh.pid)
        return gone

    def _restart(self, slot: int) -> Worker:
        self.restarts += 1
        return self._start(slot)

    def _note_crash(self, w: Worker) -> list[int]:
        """The jobs a crashed worker still held, each noted with how it crashed."""
        if not self.note_crashes or self.path is None:
            return []
        held = note_crash(self.path, w.name, w.returncode, running=w.last_running)
        if held:
            self.crashed_jobs[w.name] = held
        return held

    def _start(self, slot: int) -> Worker:
        name = self.names(self.started)
        out = subprocess.DEVNULL if self.quiet else None
        options: dict[str, Any] = {"stdout": out, "stderr": out, **self.popen_options}
        if self.path is not None and self.command is None:  # location and settings: never on a command line
            options["env"] = worker_environment(
                self.path, name, self.lease_seconds, self.idle_exit, self.settings, environ=options.get("env")
            )
        elif self.path is not None:  # a command of a lab's own reads the location only
            options["env"] = location_environment(self.path, options.get("env"))
        if self.new_session and os.name == "posix":
            options["start_new_session"] = True
        running = None
        if self.path is not None and self.command is None:
            running = RunningSlot()  # the worker says which job runs: for its time limit and the crash note
            options["env"] = {**options["env"], **running.environment()}
            options["pass_fds"] = (*options.get("pass_fds", ()), running.fd)
        try:
            proc = subprocess.Popen(self.command_line(name), **options)
        except BaseException:
            if running is not None:
                running.close()
            raise
        self.started += 1
        worker = Worker(name, slot, proc, time.time(), running=running)
        self.slots[slot] = worker
        log.info("started worker %s (pid %d)", name, proc.pid)
        return worker

    # -- stopping -----------------------------------------------------------------

    def kill(self, name: str) -> list[int]:
        """Hard-kill one running worker (with anything it started). Returns the pids killed;
        the next reap() or check() sees it gone."""
        proc = self.processes.get(name)
        return [] if proc is None else kill_tree(proc)

    def ask_to_stop(self, ask: Callable[[subprocess.Popen], None] | None = None) -> None:
        """The warm half of a stop: SIGTERM (or `ask(proc)`) to every running worker."""
        for proc in self.processes.values():
            (ask or subprocess.Popen.terminate)(proc)

    def stop(
        self, grace: float = DEFAULT_GRACE, *, ask: Callable[[subprocess.Popen], None] | None = None
    ) -> list[Worker]:
        """A warm stop of every worker, then a hard kill of those still running after
        `grace` seconds. Returns every worker that ended here."""
        self.ask_to_stop(ask)
        hard = _wait_then_kill([w.proc for w in self.workers], grace)
        if hard:
            log.warning("%d worker(s) did not stop within %g s and were killed", len(hard), grace)
        return self.reap()

    def kill_all(self) -> list[Worker]:
        """A hard stop: kill_tree every running worker at once. Returns the workers ended."""
        for proc in self.processes.values():
            kill_tree(proc)
        return self.reap()

    def close(self) -> None:
        """Stop the workers, warm then hard (leaving a ``with`` block does it)."""
        self.stop()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- supervising ----------------------------------------------------------------

    def supervise(self, signals: StopSignals, *, tick: float = TICK, grace: float | None = None) -> int:
        """Keep the pool running until every worker has left by itself (an idle exit) or a
        stop is asked for: restart crashed workers; on the first signal pass a warm stop to
        every worker and wait for them; on a second one (or after `grace` seconds, if given),
        kill them all. Returns 0, or 1 after a hard stop."""
        self.fill()
        log.info("supervising %d worker(s)", self.size)
        asked_at: float | None = None
        while True:
            if signals.hard:
                gone = self.kill_all()
                log.warning("hard stop: killed %d worker(s)", sum(w.crashed for w in gone))
                return 1
            if signals.warm and asked_at is None:
                n = self.alive()
                self.ask_to_stop()
                log.info("warm stop: asked %d worker(s) to finish their current job", n)
                asked_at = time.monotonic()
            if asked_at is None:
                self.check()
            else:
                self.enforce_time_limits()
                self.reap()
                if grace is not None and time.monotonic() - asked_at > grace:
                    signals.count = max(signals.count, 2)
                    continue
            if asked_at is not None:
                self.restart_at.clear()  # a stopping pool starts nothing
            if not self.workers and not self.restart_at:
                log.info("all workers stopped (%d restart(s))", self.restarts)
                return 0
            time.sleep(tick)


def _holding(held: list[int], running: int | None) -> str:
    """The crash log's words for the jobs a crashed worker held, and the one it ran."""
    if not held:
        return ""
    others = ", ".join(str(job_id) for job_id in held if job_id != running)
    if running not in held:
        return f" while holding job(s) {others}"
    return f" while running job(s) {running}" + (f" and holding {others}" if others else "")


def _size(value: object) -> int:
    return validate.workers("size", value)  # at most MAX_WORKERS: a size past it cannot be a list's
