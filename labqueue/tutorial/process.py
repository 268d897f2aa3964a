"""Run the learner's code in worker processes, started from package code (spawn-safe).

A process loads a workspace's files as the modules `labqueue.tutorial.<name>` before
anything imports them, so `from labqueue.tutorial.jobqueue import JobQueue` inside the
learner's worker loop finds the learner's queue. Without a workspace, it runs the course's.

    python -m labqueue.tutorial.process [--code FOLDER] worker DB WORKER_ID LEASE [IDLE_EXIT]
    python -m labqueue.tutorial.process [--code FOLDER] test [PYTEST ARGS]

`test` runs the tutorial's own suite (labqueue/tutorial/test_jobqueue.py) with pytest, on
the workspace's code when FOLDER is given.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .sections import MODULES

PACKAGE_NAME = __package__ or "labqueue.tutorial"


def load(code: str | os.PathLike[str] | None) -> None:
    """Make the modules in folder `code` this process's `labqueue.tutorial.<name>`, in
    dependency order. Call it before importing them; with None, the course's stay."""
    if code is None:
        return
    for name in MODULES:
        path = Path(code) / f"{name}.py"
        if not path.is_file():
            continue
        spec = importlib.util.spec_from_file_location(f"{PACKAGE_NAME}.{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


def tutorial_module(name: str, code: str | os.PathLike[str] | None = None) -> ModuleType:
    """One of the tutorial's modules, the learner's where `code` names their workspace."""
    load(code)
    return importlib.import_module(f"{PACKAGE_NAME}.{name}")


def worker_command(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float = 2.0,
    code: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The command line of one worker process running the tutorial's loop."""
    where = ["--code", str(code)] if code is not None else []
    args = [str(path), worker_id, repr(float(lease_seconds)), repr(float(idle_exit))]
    return [sys.executable, "-m", f"{PACKAGE_NAME}.process", *where, "worker", *args]


def start_worker(
    path: str | os.PathLike[str],
    worker_id: str,
    lease_seconds: float,
    idle_exit: float = 2.0,
    code: str | os.PathLike[str] | None = None,
    **popen: Any,
) -> subprocess.Popen:
    """Start one worker process (stdout discarded unless `popen` says otherwise)."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    return subprocess.Popen(worker_command(path, worker_id, lease_seconds, idle_exit, code), **popen)


USAGE = (
    "usage: python -m labqueue.tutorial.process [--code FOLDER] worker DB WORKER_ID LEASE [IDLE_EXIT]\n"
    "       python -m labqueue.tutorial.process [--code FOLDER] test [PYTEST ARGS]"
)
SUITE = Path(__file__).resolve().parent / "test_jobqueue.py"


def test_command(code: str | os.PathLike[str] | None = None, *pytest_args: str) -> list[str]:
    """The command line that runs the tutorial's suite on the code in folder `code`."""
    where = ["--code", str(code)] if code is not None else []
    return [sys.executable, "-m", f"{PACKAGE_NAME}.process", *where, "test", *pytest_args]


def run_suite(code: str | os.PathLike[str] | None, pytest_args: list[str]) -> int:
    """Load the workspace, then run pytest on the suite in this process: its imports of
    labqueue.tutorial.* find the modules already loaded, the learner's."""
    import pytest

    load(code)
    # No cache folder beside the installed package; nbval (if installed) is for notebooks.
    quiet = ["-p", "no:cacheprovider", "-p", "no:nbval"]
    return int(pytest.main([str(SUITE), *quiet, *pytest_args]))


def main(argv: list[str]) -> int:
    code = None
    if argv[:1] == ["--code"] and len(argv) > 1:
        code, argv = argv[1], argv[2:]
    if argv[:1] == ["test"]:
        return run_suite(code, argv[1:])
    if not (4 <= len(argv) <= 5 and argv[0] == "worker"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        lease, idle = float(argv[3]), float(argv[4]) if len(argv) == 5 else 2.0
    except ValueError:
        print(f"{USAGE}\nLEASE and IDLE_EXIT are seconds, got {argv[3:]!r}", file=sys.stderr)
        return 2
    tutorial_module("worker", code).run(argv[1], argv[2], lease, idle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
