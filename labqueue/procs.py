"""Starting worker processes and killing them, with everything they started."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import psutil

from . import validate
from .environment import DB_VARIABLE, WORKER_SETTINGS_VARIABLE
from .settings import DEFAULT_IDLE_EXIT, WorkerSettings, WorkerStart, worker_settings

# What a worker run by hand may give in the place of DB: "read the location from
# LABQUEUE_DB". A location may be a URL with a password, and every local user can read a
# command line (ps, /proc/PID/cmdline); a process's environment only its owner.
DB_FROM_ENVIRONMENT = "-"


class HasPid(Protocol):
    @property
    def pid(self) -> int | None: ...  # read only: Popen's int and Process's int | None both fit


def kill_tree(proc: HasPid | int, *, timeout: float = 10.0, spare: Collection[int] = ()) -> list[int]:
    """A hard kill of a process and all its descendants, on every platform.

    The tree is frozen first, so nothing in it can start a new child between the
    listing and the kill; no except or finally block runs anywhere in it. Accepts a
    Popen, a multiprocessing.Process or a pid, reaps a Popen, and returns the pids
    it killed (an already-finished process gives an empty list). The processes in
    `spare` (a watchdog killing the worker that started it) are neither frozen nor killed."""
    pid = proc if isinstance(proc, int) else proc.pid
    if pid is None:
        raise ValueError("kill_tree: this process was never started")
    try:
        root = psutil.Process(pid)
        tree = _freeze_tree(root, set(spare))
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    # Reap the root through its own handle: if psutil reaped it, Popen would
    # report exit code 0 for a process that was killed.
    if isinstance(proc, subprocess.Popen):
        proc.wait(timeout=timeout)
    elif hasattr(proc, "join"):
        proc.join(timeout)
    psutil.wait_procs([p for p in tree if p.pid != pid], timeout=timeout)
    return [p.pid for p in tree]


def _freeze_tree(root: psutil.Process, spare: set[int]) -> list[psutil.Process]:
    frozen: dict[int, psutil.Process] = {}
    while True:
        found = [root, *root.children(recursive=True)] if root.is_running() else []
        fresh = [p for p in found if p.pid not in frozen and p.pid not in spare]
        if not fresh:
            return list(frozen.values())
        for p in fresh:
            try:
                p.suspend()
                frozen[p.pid] = p
            except psutil.NoSuchProcess:
                pass


def worker_command() -> list[str]:
    """The command line of a worker process labqueue starts: ``python -m labqueue.worker``
    and nothing else. Everything it needs is in its environment (worker_environment), so
    no option can be smuggled in by a name, and a password in a URL stays out of ``ps``."""
    return [sys.executable, "-m", "labqueue.worker"]


def worker_environment(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = DEFAULT_IDLE_EXIT,
    settings: WorkerSettings | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, str]:
    """The environment of a worker process started by worker_command(): `environ` (this
    process's by default) with the queue's location in LABQUEUE_DB and the rest in
    LABQUEUE_WORKER_SETTINGS, one JSON value (labqueue.settings.WorkerStart): its name,
    `lease_seconds`, and `idle_exit` (it leaves after that many seconds with nothing to
    do; None: it runs until stopped), and `settings` (WorkerSettings), changed by any of
    its fields given as keywords (handlers=["myapp.jobs"], poll=0.1). A bad value is
    refused here with InvalidArgument, before any process starts."""
    start = WorkerStart(worker_id, lease_seconds, idle_exit, worker_settings(settings, **options))
    return {**location_environment(path, environ), WORKER_SETTINGS_VARIABLE: start.to_json()}


def location_environment(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`environ` (this process's by default) with LABQUEUE_DB set to the queue's location:
    for a worker whose DB is ``-`` (``python -m labqueue.worker - ID LEASE``)."""
    return {**(os.environ if environ is None else environ), DB_VARIABLE: validate.db_path(path)}


def start_worker(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = DEFAULT_IDLE_EXIT,
    settings: WorkerSettings | None = None,
    *,
    quiet: bool = True,
    **options: Any,
) -> subprocess.Popen:
    """Start a worker in a fresh interpreter: spawn-safe, whatever called it. Its location
    and settings go to it in its environment, never on its command line; the arguments as
    for worker_environment()."""
    out = subprocess.DEVNULL if quiet else None
    env = worker_environment(path, worker_id, lease_seconds, idle_exit, settings, **options)
    return subprocess.Popen(worker_command(), stdout=out, stderr=out, env=env)


def run_together(
    target: Callable[..., None],
    args_for: Sequence[tuple],
    what: str,
    *,
    start_timeout: float = 120.0,
    result_timeout: float = 600.0,
) -> tuple[list[Any], float]:
    """Start one spawned process per argument tuple, each called as target(*args, barrier,
    results), release them all at once through the barrier, and collect one report each
    (whatever each puts on `results`). Returns the reports and the wall-clock time of the
    release. A process that exits without a report, or no report by `result_timeout`,
    ends the wait with an error naming `what`; every process is joined, or killed with
    its children, on the way out. Races and benchmarks start their processes this way."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a fresh interpreter per process, on every platform
    barrier, results = ctx.Barrier(len(args_for) + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, results), daemon=True) for args in args_for]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=start_timeout)  # a process that died at start breaks it
        released = time.time()
        reports = collect_reports(results, procs, what, timeout=result_timeout)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                kill_tree(p)
    return reports, released


def collect_reports(results: Any, procs: Sequence[Any], what: str, *, timeout: float) -> list[Any]:
    """One report from each of `procs` off the `results` queue. A process that has exited
    with an error code before reporting, or `timeout` seconds without all the reports,
    ends the wait at once with an error naming `what`."""
    import queue

    deadline = time.monotonic() + timeout
    reports: list[Any] = []
    while len(reports) < len(procs):
        try:
            reports.append(results.get(timeout=0.5))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                message = f"{what}: a process exited with code {dead[0]} before reporting"
                raise RuntimeError(message) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: no report after {timeout:.0f} s") from None
    return reports
