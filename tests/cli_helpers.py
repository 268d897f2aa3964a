"""Running the `labqueue` command in a subprocess, and a module of handlers for it to load.

Shared by test_cli.py and test_pool.py. Every wait is bounded; nothing asserts a timing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LABQUEUE = [sys.executable, "-m", "labqueue"]
HANDLERS = "cli_test_jobs"

# Jobs for the command's tests. `gated` holds its worker until the test creates the
# file `release` in the payload's folder, so a test knows a job is in flight without
# guessing how long anything takes.
HANDLER_SOURCE = """
import json
import time
from pathlib import Path

from labqueue import handler


@handler("settings")
def settings(job, q):
    level = q.db.execute("PRAGMA synchronous").fetchone()[0]
    seen = {
        "lease_seconds": q.lease_seconds,
        "max_attempts": q.max_attempts,
        "backoff_base": q.backoff_base,
        "backoff_cap": q.backoff_cap,
        "synchronous": ["OFF", "NORMAL", "FULL", "EXTRA"][level],
    }
    Path(job.payload["out"]).write_text(json.dumps(seen))


@handler("gated")
def gated(job, q):
    folder = Path(job.payload["folder"])
    (folder / f"started-{job.id}").touch()
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@handler("boom")
def boom(job, q):
    raise RuntimeError(f"boom {job.id}")


@handler("noop")
def noop(job, q):
    return None
"""


def handler_module(folder: Path) -> dict[str, str]:
    """Write the handlers into `folder` and return an environment that can import them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{HANDLERS}.py").write_text(textwrap.dedent(HANDLER_SOURCE))
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def labqueue(*args: object, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60):
    """`labqueue ARGS...` to the end: the CompletedProcess, with text stdout and stderr."""
    return subprocess.run(
        [*LABQUEUE, *map(str, args)], input=stdin, capture_output=True, text=True, env=env, timeout=timeout
    )


def start(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`labqueue ARGS...` in the background, its stderr (the log) kept for the test."""
    return subprocess.Popen(
        [*LABQUEUE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_for(predicate, timeout: float = 30.0, every: float = 0.02):
    """Poll until predicate() is truthy; fail loudly instead of hanging."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"gave up after {timeout} s waiting for {predicate}")


def one_line_error(result: subprocess.CompletedProcess, code: int) -> str:
    """Check that the command failed with `code` and a short message, never a traceback."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


class LogReader:
    """Collects a background process's stderr lines as they come, so a test can wait for
    one (say, the supervisor's "warm stop") without blocking on the pipe."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for_line(self, text: str, timeout: float = 30.0) -> str:
        return wait_for(lambda: next((line for line in self.lines if text in line), None), timeout)

    def text(self, timeout: float = 30.0) -> str:
        """Everything logged, once the process has closed its stderr."""
        self._thread.join(timeout)
        return "".join(self.lines)


def install_app(tmp_path: Path, monkeypatch, name: str, source: str) -> Path:
    """Write a handlers module `name` (its `source`) into tmp_path/app, on the PYTHONPATH of
    every worker process started after (a pool's): how the process tests load handlers."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return folder


LEDGER = "CREATE TABLE IF NOT EXISTS ledger (job_id INTEGER NOT NULL, attempt INTEGER NOT NULL)"


def ledgered_location(request, tmp_path: Path) -> Iterator[str]:
    """For a fixture parametrized "sqlite"/"postgres": a queue with a ledger table, as a file
    or on a database of its own on the session's server."""
    from labqueue import open_queue

    if request.param == "sqlite":
        path = str(tmp_path / "jobs.db")
        with open_queue(path) as q:
            q.db.execute(LEDGER)
        yield path
        return
    from labqueue.postgres.server import fresh_database

    with fresh_database(request.getfixturevalue("pg_url")) as url:
        with open_queue(url) as q:
            q.db.execute(LEDGER)
        yield url


def default_schema_location(request, tmp_path: Path) -> Iterator[str]:
    """For a fixture parametrized "sqlite"/"postgres": a new file, or the session's server
    with its default schema (labqueue, which workers started without --schema open) dropped
    before and after."""
    from labqueue import open_queue

    if request.param == "sqlite":
        yield str(tmp_path / "jobs.db")
        return
    url = request.getfixturevalue("pg_url")
    with open_queue(url) as q:
        q.db.execute("DROP SCHEMA IF EXISTS labqueue CASCADE")
    yield url
    with open_queue(url) as q:
        q.db.execute("DROP SCHEMA IF EXISTS labqueue CASCADE")
