"""Notebook 09: how many no-op jobs per second one SQLite file hands out and finishes,
on the learner's queue.

Each run loads a fresh queue with no-op jobs and drains it with real worker processes
(``labqueue.lab.throughput_worker``) that run the learner's `JobQueue` (``code=ws.folder``,
the kernel's workspace; the course's copy without it) with the tutorial's drain: claim up
to a batch, complete each job. All are released at the same instant; the parent reads what
they did from SQLite. Rounds are interleaved across configurations, so a burst of load on a
shared machine hits every configuration alike, and the summary takes medians.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import pool
from ..errors import InvalidArgument
from ..tutorial import jobqueue as tutorial
from .assets import data_file, figure_png, new_figure
from .scratch import db_path
from .throughput_worker import RESULTS_TABLE

TUTORIAL_JOBS = 10_000
DEFAULT_JOBS = 400  # the FULL runs cost most: 400 jobs keep all 21 runs near ten seconds
DEFAULT_ROUNDS = 3
DATA_FILE = "throughput_tutorial.csv"
RUN_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.005
SUM_RESULTS = "SELECT SUM(done), SUM(claims), MAX(finished_at) FROM tp_results"
LEVELS_READ_BACK = "SELECT DISTINCT synchronous FROM tp_results"
COUNT_UNDONE = "SELECT COUNT(*) FROM jobs WHERE state != 'done'"
COUNT_CLAIMED_TWICE = "SELECT COUNT(*) FROM jobs WHERE attempts > 1"
PRAGMA_LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
COUNT_ROWS = {"tp_ready": "SELECT COUNT(*) FROM tp_ready", "tp_results": "SELECT COUNT(*) FROM tp_results"}


@dataclass(frozen=True)
class Config:
    """One row of the experiment: how many workers, how many jobs per claim, which sync level."""

    workers: int
    per_claim: int
    synchronous: str

    def __post_init__(self) -> None:
        for name in ("workers", "per_claim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")
        if self.synchronous not in tutorial.SYNCHRONOUS:
            raise InvalidArgument(
                f"synchronous must be one of {', '.join(tutorial.SYNCHRONOUS)}, got {self.synchronous!r}"
            )

    @property
    def label(self) -> str:
        return f"{self.workers} w, {self.per_claim}/claim, {self.synchronous}"


# The notebook's default: 1, 2 and 4 workers claiming one job at a time, 1 and 4 claiming ten,
# and 1 and 4 with every commit forced to disk.
DEFAULT_CONFIGS: tuple[Config, ...] = (
    Config(1, 1, "NORMAL"),
    Config(2, 1, "NORMAL"),
    Config(4, 1, "NORMAL"),
    Config(1, 10, "NORMAL"),
    Config(4, 10, "NORMAL"),
    Config(1, 1, "FULL"),
    Config(4, 1, "FULL"),
)

# The tutorial's seven configurations, in its order.
TUTORIAL_CONFIGS: tuple[Config, ...] = (
    Config(1, 1, "NORMAL"),
    Config(2, 1, "NORMAL"),
    Config(4, 1, "NORMAL"),
    Config(8, 1, "NORMAL"),
    Config(4, 10, "NORMAL"),
    Config(1, 1, "FULL"),
    Config(4, 1, "FULL"),
)


@dataclass(frozen=True)
class Run:
    """One measured drain: its jobs, its time, how many claims handed jobs out, how many jobs
    were handed out more than once, and the synchronous levels the workers' connections ran at."""

    config: Config
    jobs: int
    seconds: float
    claims: int = 0
    claimed_twice: int = 0
    levels: tuple[str, ...] = ()

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


def prepare(path: Path, n_jobs: int) -> None:
    """A fresh queue (the tutorial's schema) of n_jobs no-op jobs, loaded in one
    transaction, plus the result tables."""
    q = tutorial.JobQueue(path)
    try:
        q.db.executescript(RESULTS_TABLE)
        q.enqueue_many("noop", [{} for _ in range(n_jobs)])
    finally:
        q.db.close()


def _positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def worker_command(name: str, code: str | os.PathLike[str] | None = None) -> list[str]:
    """The command line of one draining process, on the workspace `code` if given."""
    where = ["--code", str(code)] if code is not None else []
    return [sys.executable, "-m", "labqueue.lab.throughput_worker", *where, name]


class WorkerPool:
    """Draining processes kept alive across runs: a run uses the first `config.workers` of them.

    Each is ``python -m labqueue.lab.throughput_worker``, started from package code, so
    this works the same under spawn, forkserver or fork, and loads the learner's JobQueue
    from the workspace `code` (``ws.folder``) when it starts; they are a labqueue.pool.WorkerPool
    that runs this lab's worker program and never restarts one. Use as a context manager."""

    def __init__(self, code: str | os.PathLike[str] | None = None) -> None:
        self.pool = pool.WorkerPool(
            None,
            0,
            command=lambda name: worker_command(name, code),
            popen_options={"stdin": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True},
        )

    @property
    def procs(self) -> list[subprocess.Popen]:
        return [w.proc for w in self.pool.workers]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _grow(self, size: int) -> None:
        self.pool.size = max(self.pool.size, size)
        self.pool.fill()

    def run(self, config: Config, n_jobs: int, folder: str | os.PathLike[str] | None = None) -> Run:
        """Drain n_jobs no-op jobs with config.workers processes, timed from their common
        release to the last one's finish (the workers' own clock readings)."""
        n_jobs = _positive_int("n_jobs", n_jobs)
        name = f"tp_{config.workers}_{config.per_claim}_{config.synchronous.lower()}"
        path = db_path(name, folder)
        go_file = path.with_suffix(".go")
        go_file.unlink(missing_ok=True)
        prepare(path, n_jobs)
        self._grow(config.workers)
        command = {
            "db": str(path),
            "per_claim": config.per_claim,
            "synchronous": config.synchronous,
            "go_file": str(go_file),
            "max_claims": 2 * n_jobs,  # a queue that hands a job out twice still ends
        }
        for proc in self.procs[: config.workers]:
            proc.stdin.write(json.dumps(command) + "\n")
            proc.stdin.flush()
        db = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
        try:
            self._wait_for_rows(db, "tp_ready", config.workers)
            released = time.time()
            go_file.touch()
            self._wait_for_rows(db, "tp_results", config.workers)
            done, claims, finished = db.execute(SUM_RESULTS).fetchone()
            left = db.execute(COUNT_UNDONE).fetchone()[0]
            twice = db.execute(COUNT_CLAIMED_TWICE).fetchone()[0]
            levels = sorted(PRAGMA_LEVELS.get(n, str(n)) for (n,) in db.execute(LEVELS_READ_BACK))
        finally:
            db.close()
            go_file.unlink(missing_ok=True)
        if left:
            raise RuntimeError(
                f"{config.label}: the workers stopped with {left} of {n_jobs} jobs not done "
                f"({done} completions accepted): a claim found nothing while jobs were ready"
            )
        return Run(config, done, finished - released, claims, twice, tuple(levels))

    def _wait_for_rows(self, db: sqlite3.Connection, table: str, count: int) -> None:
        deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
        statement = COUNT_ROWS[table]
        while db.execute(statement).fetchone()[0] < count:
            for proc in self.procs:
                if proc.poll() is not None:
                    self._died(proc)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{table}: fewer than {count} workers reported after {RUN_TIMEOUT_SECONDS} s"
                )
            time.sleep(POLL_SECONDS)

    def _died(self, proc: subprocess.Popen) -> None:
        err = proc.stderr.read() if proc.stderr else ""
        self.close()
        raise RuntimeError(f"a throughput worker exited with code {proc.returncode}: {err[-800:]}")

    def close(self) -> None:
        """Close every worker's stdin so it leaves; kill any that does not."""
        for worker in self.pool.stop(grace=10, ask=_close_stdin):
            if worker.proc.stderr:
                worker.proc.stderr.close()


def _close_stdin(proc: subprocess.Popen) -> None:
    """How a throughput worker is asked to leave: no more runs will come."""
    if proc.stdin and not proc.stdin.closed:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def measure(
    config: Config,
    n_jobs: int = DEFAULT_JOBS,
    folder: str | os.PathLike[str] | None = None,
    code: str | os.PathLike[str] | None = None,
) -> Run:
    """One run with a pool of its own, on the workspace `code` (the course's queue without it)."""
    with WorkerPool(code) as pool:
        return pool.run(config, n_jobs, folder)


def measure_all(
    configs: Iterable[Config] = DEFAULT_CONFIGS,
    n_jobs: int = DEFAULT_JOBS,
    rounds: int = DEFAULT_ROUNDS,
    folder: str | os.PathLike[str] | None = None,
    progress: bool = True,
    on_run: Callable[[Run], None] | None = None,
    code: str | os.PathLike[str] | None = None,
) -> Any:
    """Every config, `rounds` times, round-robin, with one pool of workers running the
    workspace `code` (``ws.folder``; the course's queue without it). One pandas row per run."""
    import pandas as pd
    from tqdm.auto import tqdm

    configs = list(configs)
    rounds = _positive_int("rounds", rounds)
    n_jobs = _positive_int("n_jobs", n_jobs)
    if not configs:
        raise InvalidArgument("configs must name at least one configuration, got an empty list")
    rows = []
    bar = tqdm(total=rounds * len(configs), desc="runs", disable=not progress)
    with WorkerPool(code) as pool, bar:
        for round_no in range(1, rounds + 1):
            for config in configs:
                run = pool.run(config, n_jobs, folder)
                rows.append(_row(run, round_no))
                if on_run:
                    on_run(run)
                bar.update()
    return pd.DataFrame(rows)


def _row(run: Run, round_no: int) -> dict[str, Any]:
    c = run.config
    return {
        "config": c.label,
        "workers": c.workers,
        "per_claim": c.per_claim,
        "synchronous": c.synchronous,
        "round": round_no,
        "jobs": run.jobs,
        "seconds": round(run.seconds, 3),
        "jobs_per_s": round(run.jobs_per_s),
        "jobs_per_claim": round(run.jobs / run.claims, 2) if run.claims else 0.0,
        "claimed_twice": run.claimed_twice,
        "synchronous_read_back": "/".join(run.levels),
    }


def tutorial_figures() -> Any:
    """The tutorial's published run (Windows 11, 14 logical CPUs, 10,000 jobs, one run each)."""
    import pandas as pd

    df = pd.read_csv(data_file(DATA_FILE), comment="#")
    df["config"] = [
        Config(int(w), int(b), s).label
        for w, b, s in zip(df.workers, df.per_claim, df.synchronous, strict=True)
    ]
    return df


def summarize(runs: Any) -> Any:
    """Median jobs/s per config (and the spread), beside the tutorial's figure."""
    tutorial = tutorial_figures().set_index("config")["jobs_per_s"]
    keys = ["config", "workers", "per_claim", "synchronous"]
    grouped = runs.groupby(keys, sort=False)["jobs_per_s"]
    table = grouped.agg(median="median", lowest="min", highest="max", rounds="count").reset_index()
    table = table.rename(columns={"median": "jobs_per_s"}).drop(columns=keys[1:])
    table["jobs_per_s"] = table["jobs_per_s"].round().astype(int)
    table["tutorial_jobs_per_s"] = table["config"].map(tutorial)
    return table


def median_of(summary: Any, config: Config) -> float:
    rows = summary.loc[summary["config"] == config.label, "jobs_per_s"]
    if rows.empty:
        raise KeyError(f"no measurement for {config.label!r}")
    return float(rows.iloc[0])


def plot(summary: Any, title: str = "No-op jobs drained per second"):
    """Grouped bars: this machine's median beside the tutorial's Windows figure, per config."""
    import numpy as np

    fig, ax = new_figure()
    x = np.arange(len(summary))
    width = 0.4
    here = summary["jobs_per_s"].to_numpy(dtype=float)
    spread = np.vstack([here - summary["lowest"], summary["highest"] - here])
    ax.bar(x - width / 2, here, width, yerr=spread, capsize=2, label="this machine (median, range)")
    if "tutorial_jobs_per_s" in summary:
        ax.bar(x + width / 2, summary["tutorial_jobs_per_s"], width, label="tutorial (Windows 11)")
    ax.set_xticks(x, [c.replace(", ", "\n") for c in summary["config"]], fontsize=9)
    ax.set_ylabel("throughput (jobs/s)")
    ax.set_xlabel("workers, jobs per claim, synchronous")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    return fig


def fsync_seconds(folder: str | os.PathLike[str] | None = None, rounds: int = 200) -> float:
    """The median cost of one small write plus fsync here: what FULL adds to each commit.
    The page is written over in place, as a WAL file is once a checkpoint has reset it, so
    the file's size (and the metadata a growing file must sync too) does not change. Where the
    system has fdatasync, it is the call timed, as SQLite makes it there."""
    import statistics

    rounds = _positive_int("rounds", rounds)
    path = db_path("tp_fsync", folder)
    samples = []
    sync = getattr(os, "fdatasync", os.fsync)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
        for n in range(rounds):
            started = time.perf_counter()
            os.pwrite(fd, bytes([n % 256]) * 4096, 0)
            sync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return statistics.median(samples)


class ThroughputLab:
    """The state behind the widget panel: the learner's own runs, kept in order."""

    def __init__(
        self,
        baseline: Any = None,
        folder: str | os.PathLike[str] | None = None,
        code: str | os.PathLike[str] | None = None,
    ) -> None:
        self.baseline = baseline
        self.folder = folder
        self.code = code
        self.runs: list[Run] = []

    def run(self, config: Config, n_jobs: int) -> Run:
        run = measure(config, n_jobs, self.folder, self.code)
        self.runs.append(run)
        return run

    def table(self) -> Any:
        import pandas as pd

        columns = ["config", "workers", "per_claim", "synchronous", "round", "jobs", "seconds", "jobs_per_s"]
        return pd.DataFrame([_row(r, n) for n, r in enumerate(self.runs, 1)], columns=columns)

    def figure(self) -> Any:
        """Your runs as bars, after the notebook's medians if there are any."""
        import pandas as pd

        parts = []
        if self.baseline is not None:
            parts.append(self.baseline[["config", "jobs_per_s"]].assign(source="notebook median"))
        mine = self.table()
        if not mine.empty:
            mine = mine.assign(config=[f"#{n} {c}" for n, c in enumerate(mine["config"], 1)])
            parts.append(mine[["config", "jobs_per_s"]].assign(source="your runs"))
        data = (
            pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["config", "jobs_per_s"])
        )
        return plot_runs(data)


def plot_runs(data: Any):
    """One horizontal bar per row of (config, jobs_per_s, source)."""
    fig, ax = new_figure()
    if data.empty:
        ax.text(0.5, 0.5, "no runs yet: press Run", ha="center", va="center", transform=ax.transAxes)
    else:
        colors = ["tab:gray" if s == "notebook median" else "tab:blue" for s in data["source"]]
        y = range(len(data))
        ax.barh(list(y), data["jobs_per_s"].astype(float), color=colors)
        ax.set_yticks(list(y), list(data["config"]), fontsize=9)
        ax.invert_yaxis()
    ax.set_xlabel("throughput (jobs/s)")
    ax.set_title("grey: the notebook's medians, blue: your runs", fontsize=9)
    return fig


def panel(
    baseline: Any = None,
    folder: str | os.PathLike[str] | None = None,
    lab: ThroughputLab | None = None,
    code: str | os.PathLike[str] | None = None,
):
    """Pick workers, jobs per claim, synchronous and size; Run drains a fresh queue with workers
    running the workspace `code` (``ws.folder``) and adds a bar."""
    import ipywidgets as w

    lab = lab or ThroughputLab(baseline, folder, code)
    workers = w.IntSlider(value=4, min=1, max=8, description="workers")
    per_claim = w.Dropdown(options=[1, 2, 5, 10, 50], value=10, description="per claim")
    synchronous = w.ToggleButtons(options=["NORMAL", "FULL"], value="NORMAL", description="synchronous")
    jobs = w.Dropdown(
        options=sorted({DEFAULT_JOBS, 500, 2_000, 5_000, TUTORIAL_JOBS}),
        value=DEFAULT_JOBS,
        description="jobs",
    )
    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.HTML("Choose a configuration and press Run.")
    image = w.Image(value=figure_png(lab.figure()), format="png")

    def on_click(_: Any) -> None:
        button.disabled = True
        config = Config(workers.value, per_claim.value, synchronous.value)
        status.value = f"running {config.label} on {jobs.value:,} jobs ..."
        try:
            run = lab.run(config, jobs.value)
            status.value = f"{config.label}: {run.jobs_per_s:,.0f} jobs/s ({run.seconds:.2f} s)"
            image.value = figure_png(lab.figure())
        except KeyboardInterrupt:  # the pool was closed on the way out; the chart keeps the last run
            status.value = f"<b>interrupted</b>: {config.label} stopped, its workers ended. Press Run again."
        except Exception as exc:  # show it in the panel; a callback's traceback is easy to miss
            status.value = f"<b>failed:</b> {type(exc).__name__}: {exc}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    box = w.VBox([w.HBox([workers, per_claim]), w.HBox([synchronous]), w.HBox([jobs, button]), status, image])
    box.lab = lab
    box.controls = {"workers": workers, "per_claim": per_claim, "synchronous": synchronous, "jobs": jobs}
    box.button, box.status, box.image = button, status, image
    return box


def machine_line(n_jobs: int, rounds: int) -> str:
    """What the runs were measured on, as the tutorial prints it, plus the load right now:
    on a shared machine the load explains more of the spread than anything else."""
    line = f"{os.cpu_count()} logical CPUs, {n_jobs:,} no-op jobs per run, {rounds} round(s)"
    if hasattr(os, "getloadavg"):
        line += f", load average {os.getloadavg()[0]:.1f}"
    return line
