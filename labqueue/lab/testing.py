"""Notebook 11: run the tutorial's test suite on the learner's queue, and test functions
written in the notebook.

pytest runs in a subprocess (a fresh interpreter, as in CI) and reports through a JUnit XML
file, which becomes a pandas table. The tutorial's suite (labqueue/tutorial/test_jobqueue.py)
runs through ``python -m labqueue.tutorial.process --code FOLDER test``, which loads the
learner's workspace first. A test function defined in a notebook cell is written, with its
source, to a module in the scratch folder (behind a header that loads the same workspace)
and run the same way.
"""

from __future__ import annotations

import html
import inspect
import os
import random
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..tutorial import process
from .assets import figure_png, new_figure
from .scratch import db_path

OUTCOMES = ("passed", "failed", "error", "skipped")
# Quiet, uncoloured output (it is captured); no cache folder; nbval is for notebooks and costs
# seconds of imports.
QUIET = ("-q", "--color=no", "-p", "no:cacheprovider", "-p", "no:nbval")
# The header of a module of notebook tests on the tutorial's queue in folder {code!r}: the
# learner's workspace (or "" for the course's own modules).
TUTORIAL_HEADER = '''"""Tests written in notebook 11, saved here by labqueue.lab.testing.write_test_module."""

import pytest

from labqueue import FakeClock
from labqueue.tutorial import process

JobQueue = process.tutorial_module("jobqueue", {code!r} or None).JobQueue
'''
# ... and the same queue with one rule broken: every lease lasts a millisecond.
SHORT_LEASES = '''

class JobQueue(JobQueue):
    """Broken on purpose: every lease is 1 ms long, whatever lease_seconds says."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lease_seconds = 0.001
'''


def tutorial_header(code: str | os.PathLike[str] | None = None, *, short_leases: bool = False) -> str:
    """The header for write_test_module: the tutorial's JobQueue from folder `code` (the
    learner's workspace; None: the course's), with leases broken on purpose if asked."""
    header = TUTORIAL_HEADER.format(code="" if code is None else str(code))
    return header + SHORT_LEASES if short_leases else header


class PytestMissing(RuntimeError):
    """pytest is not installed in the environment this kernel runs in."""


def pytest_available() -> bool:
    """True when this kernel's interpreter (the one that runs the tests) can import pytest."""
    import importlib.util

    return importlib.util.find_spec("pytest") is not None


def require_pytest() -> None:
    """Raise PytestMissing, saying how to install it, when no test could run."""
    if not pytest_available():
        raise PytestMissing(
            f"pytest is not installed for {sys.executable}, the Python this notebook runs. "
            "Build the course's lab environment again (python tasks.py lab), "
            'or run: pip install -e ".[notebooks]"'
        )


@dataclass
class TestRun:
    """What one pytest run reported: its exit code, one row per test, the last lines of output."""

    __test__ = False  # a result, not a test class for pytest to collect

    returncode: int
    table: Any
    output: str
    seconds: float
    args: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        found = self.table["outcome"].value_counts().to_dict() if len(self.table) else {}
        return {outcome: int(found.get(outcome, 0)) for outcome in OUTCOMES}

    @property
    def ok(self) -> bool:
        """Exit code 0 and at least one test: an empty run proves nothing."""
        return self.returncode == 0 and len(self.table) > 0 and self.counts["passed"] > 0


def parse_junit(path: str | os.PathLike[str]) -> Any:
    """One row per test case: its name, outcome, time in milliseconds and any message."""
    import pandas as pd

    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
                lines = (child.get("message") or "").strip().splitlines()
                message = lines[0][:200] if lines else ""
        rows.append(
            {
                "module": case.get("classname", "").rsplit(".", 1)[-1],
                "test": case.get("name"),
                "outcome": outcome,
                "ms": round(float(case.get("time", 0.0)) * 1000, 1),
                "message": message,
            }
        )
    return pd.DataFrame(rows, columns=["module", "test", "outcome", "ms", "message"])


def styled(table: Any) -> Any:
    """A results table for display: full test names, no index, times to 0.1 ms."""
    return table.style.hide(axis="index").format({"ms": "{:.1f}"})


def run_tutorial_suite(
    code: str | os.PathLike[str] | None = None,
    *,
    name: str = "tutorial_suite",
    extra: Sequence[str] = (),
    timeout: float = 600.0,
) -> TestRun:
    """Run the tutorial's own suite (23 tests) on the code in folder `code`, the learner's
    workspace (None: the course's modules), in a subprocess, and read its JUnit report."""
    junit = db_path(name).with_suffix(".xml")
    command = process.test_command(code, "-q", "--color=no", f"--junitxml={junit}", *extra)
    return _run(command, junit, timeout)


def _run(command: Sequence[str], junit: Path, timeout: float) -> TestRun:
    """Run a pytest command in the scratch folder and read the JUnit report it writes.
    Raises only if pytest could not run at all."""
    require_pytest()
    junit.unlink(missing_ok=True)  # an old report must not pass for this run's
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=junit.parent, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    if not junit.exists():
        raise RuntimeError(f"pytest wrote no report (exit code {proc.returncode}):\n{tail}")
    return TestRun(proc.returncode, parse_junit(junit), tail, seconds, list(command[1:]))


def summarize(run: TestRun) -> Any:
    """Tests per outcome with their total time."""
    import pandas as pd

    table = run.table
    rows = [
        {
            "outcome": o,
            "tests": int((table["outcome"] == o).sum()),
            "ms": table.loc[table["outcome"] == o, "ms"].sum(),
        }
        for o in OUTCOMES
    ]
    return pd.DataFrame(rows).set_index("outcome")


def write_test_module(
    functions: Sequence[Callable[..., Any]], name: str = "check_notebook_tests", header: str | None = None
) -> Path:
    """Write test functions defined in notebook cells, with their own source, to
    <scratch>/<name>.py so that pytest can run them in a fresh interpreter. The file name
    does not start with test_, so a test run over the notebooks folder never picks it up."""
    if not functions:
        raise InvalidArgument("functions must hold at least one test function, got none")
    parts = [tutorial_header() if header is None else header]
    for fn in functions:
        if not callable(fn) or not getattr(fn, "__name__", "").startswith("test"):
            raise InvalidArgument(f"pytest only collects functions named test*, got {fn!r}")
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError) as exc:
            raise InvalidArgument(f"cannot read the source of {fn.__name__}: {exc}") from None
        parts.append(textwrap.dedent(source))
    path = db_path(name).with_suffix(".py")
    path.write_text("\n\n".join(parts), encoding="utf-8")
    return path


def run_test_functions(
    functions: Sequence[Callable[..., Any]], name: str = "check_notebook_tests", header: str | None = None
) -> TestRun:
    """write_test_module (behind `header`, tutorial_header() by default), then pytest on it."""
    path = write_test_module(functions, name, header)
    junit = path.with_suffix(".xml")
    return _run([sys.executable, "-m", "pytest", str(path), *QUIET, f"--junitxml={junit}"], junit, 600.0)


def backoff_samples(
    rng: Callable[[], float], attempts: int = 3, n: int = 5, folder: Any = None, queue_class: Any = None
) -> list[float]:
    """The retry delay fail() sets after a job's `attempts`-th failed attempt, n times, on
    the tutorial's queue (`queue_class`, the course's by default: base 1 s, cap 60 s) on a
    FakeClock, with the given rng."""
    if queue_class is None:
        from ..tutorial.jobqueue import JobQueue as queue_class
    clock = FakeClock(0.0)
    q = queue_class(db_path("testing_backoff", folder), max_attempts=attempts + 1, clock=clock, rng=rng)
    delays = []
    try:
        for _ in range(n):
            job_id = q.enqueue("t", {})
            for _ in range(attempts):
                (job,) = q.claim("w")
                q.fail(job, "boom")
                (due,) = q.db.execute("SELECT visible_at FROM jobs WHERE id = ?", (job_id,)).fetchone()
                delay, clock.now = due - clock.now, due
            delays.append(round(delay, 3))
            q.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))  # the next draw starts afresh
    finally:
        q.db.close()
    return delays


def backoff_table(n: int = 5, attempts: int = 3) -> Any:
    """Unpinned, seeded and pinned rngs side by side: only the pinned one gives a value to assert."""
    import pandas as pd

    return pd.DataFrame(
        {
            "random.random": backoff_samples(random.random, attempts, n),
            "random.Random(7).random": backoff_samples(random.Random(7).random, attempts, n),
            "lambda: 1.0": backoff_samples(lambda: 1.0, attempts, n),
        },
        index=pd.RangeIndex(1, n + 1, name="draw"),
    )


def plot_durations(run: TestRun, title: str = "Time per test"):
    """Every test's time, slowest first, on a log scale, coloured by outcome."""
    from matplotlib.patches import Patch

    table = run.table.sort_values("ms", ascending=False).reset_index(drop=True)
    colors = {"passed": "tab:green", "failed": "tab:red", "error": "tab:red", "skipped": "0.6"}
    fig, ax = new_figure()
    ax.bar(table.index, table["ms"].clip(lower=0.1), color=[colors[o] for o in table["outcome"]], width=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("tests, slowest first")
    ax.xaxis.get_major_locator().set_params(integer=True)  # a test is counted, never fractional
    ax.set_ylabel("time (ms, log scale)")
    ax.set_title(title, fontsize=10)
    present = [o for o in colors if (table["outcome"] == o).any()]
    ax.legend([Patch(color=colors[o]) for o in present], present, fontsize=7, frameon=False)
    return fig


def _table_html(run: TestRun) -> str:
    counts = ", ".join(f"{n} {o}" for o, n in run.counts.items() if n)
    failed = run.table[run.table["outcome"].isin(["failed", "error"])]
    rows = failed[["test", "message"]].to_html(index=False) if len(failed) else ""
    return f"<b>{counts or 'no tests'}</b> in {run.seconds:.1f} s (exit code {run.returncode}){rows}"


def panel(code: str | os.PathLike[str] | None = None, first: TestRun | None = None):
    """Type a -k expression (or none) and press Run: the tutorial's suite runs on the code in
    folder `code` (the learner's workspace) in a subprocess. `first`, a run already made, is
    shown until then."""
    import ipywidgets as w

    keyword = w.Text(value="", placeholder="e.g. lease or backoff", description="-k")
    button = w.Button(description="Run", icon="play", button_style="primary")
    status = w.HTML("Choose tests with a -k expression (empty: all of them), then press Run.")
    image = w.Image(format="png")
    runs: list[TestRun] = []
    if first is not None:
        status.value = "Last run: " + _table_html(first)
        image.value = figure_png(plot_durations(first))

    def on_click(_: Any) -> None:
        button.disabled = True
        chosen = keyword.value.strip()
        status.value = (
            f"running the tutorial's tests{f' matching {html.escape(chosen)}' if chosen else ''} ..."
        )
        try:
            run = run_tutorial_suite(code, name="testing_panel", extra=["-k", chosen] if chosen else [])
            runs.append(run)
            status.value = _table_html(run)
            if len(run.table):
                title = f"-k {chosen}: time per test" if chosen else "The tutorial's tests: time per test"
                image.value = figure_png(plot_durations(run, title))
        except KeyboardInterrupt:  # subprocess.run has already killed pytest
            status.value = "<b>interrupted</b>: pytest was stopped. Press Run again."
        except Exception as exc:  # show it in the panel; a callback's traceback is easy to miss
            status.value = f"<b>failed:</b> {type(exc).__name__}: {html.escape(str(exc))}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    box = w.VBox([w.HBox([keyword, button]), status, image])
    box.keyword, box.button, box.status, box.image, box.runs = keyword, button, status, image, runs
    return box
