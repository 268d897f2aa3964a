"""Starting worker processes and killing them, with everything they started."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Protocol

import psutil

from . import validate
from .errors import InvalidArgument


class HasPid(Protocol):
    pid: int | None


def kill_tree(proc: HasPid | int, *, timeout: float = 10.0) -> list[int]:
    """A hard kill of a process and all its descendants, on every platform.

    The tree is frozen first, so nothing in it can start a new child between the
    listing and the kill; no except or finally block runs anywhere in it. Accepts a
    Popen, a multiprocessing.Process or a pid, reaps a Popen, and returns the pids
    it killed (an already-finished process gives an empty list)."""
    pid = proc if isinstance(proc, int) else proc.pid
    if pid is None:
        raise ValueError("kill_tree: this process was never started")
    try:
        root = psutil.Process(pid)
        tree = _freeze_tree(root)
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


def _freeze_tree(root: psutil.Process) -> list[psutil.Process]:
    frozen: dict[int, psutil.Process] = {}
    while True:
        found = [root, *root.children(recursive=True)] if root.is_running() else []
        fresh = [p for p in found if p.pid not in frozen]
        if not fresh:
            return list(frozen.values())
        for p in fresh:
            try:
                p.suspend()
                frozen[p.pid] = p
            except psutil.NoSuchProcess:
                pass


def worker_command(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = None,
    *,
    handlers: Sequence[str] = (),
    poll: float | None = None,
) -> list[str]:
    """The command line of one worker process, ``python -m labqueue.worker ...``.

    Options come first and ``--`` ends them, so a path or worker id that begins with
    ``-`` (even ``--handlers=module``) is read as the value it is, never as an option.
    A handler module name that begins with ``-``, or any value with a NUL character,
    is refused with InvalidArgument."""
    path_text = validate.db_path(path)
    validate.text("worker_id", worker_id)
    validate.positive("lease_seconds", lease_seconds)
    options: list[str] = []
    for module in [handlers] if isinstance(handlers, str) else handlers:
        validate.text("handler module", module)
        if module.startswith("-"):
            raise InvalidArgument(f"a handler module name cannot begin with '-', got {module!r}")
        options += ["--handlers", module]
    if poll is not None:
        validate.positive("poll", poll)
        options += ["--poll", str(poll)]
    positionals = [path_text, worker_id, str(lease_seconds)]
    if idle_exit is not None:
        validate.positive("idle_exit", idle_exit, allow_zero=True)
        positionals.append(str(idle_exit))
    return [sys.executable, "-m", "labqueue.worker", *options, "--", *positionals]


def start_worker(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float | None = None,
    *,
    handlers: Sequence[str] = (),
    poll: float | None = None,
    quiet: bool = True,
) -> subprocess.Popen:
    """Start a worker in a fresh interpreter: spawn-safe, whatever called it."""
    out = subprocess.DEVNULL if quiet else None
    return subprocess.Popen(
        worker_command(path, worker_id, lease_seconds, idle_exit, handlers=handlers, poll=poll),
        stdout=out,
        stderr=out,
    )
