"""Notebook 07: full-jitter backoff, dead letters, and the job that kills its worker.

The delays come from the learner's own fail(): each always-failing job is claimed and
failed on a fake clock, and its delay read back from visible_at, so the plot shows the
formula the learner's queue runs. The poison rounds start real worker processes on the
learner's code (`code=`, the notebook's workspace folder).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass

import pandas as pd

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..procs import kill_tree
from ..tutorial import process
from ..tutorial.jobqueue import JobQueue
from .assets import figure_png, new_figure
from .scratch import db_path
from .tables import html_table
from .walks import Folder

# -- full jitter ---------------------------------------------------------------------

#: How many always-failing jobs the jitter plot and its panel draw (the same in both).
JITTER_JOBS = 500


def _number(name: str, value: object, low: float, high: float) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a number from {low} to {high}, got {value!r}")
    return float(value)


def _whole(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def ceiling(attempts: int, base: float, cap: float) -> float:
    """The tutorial's ceiling after failed attempt `attempts`: min(cap, base * 2 ** (attempts - 1))."""
    return min(cap, base * 2 ** (attempts - 1))


def jitter_delays(
    n_jobs: int = JITTER_JOBS,
    *,
    base: float = 1.0,
    cap: float = 60.0,
    max_attempts: int = 8,
    seed: int = 7,
    folder: Folder = None,
    queue_class: type | None = None,
) -> pd.DataFrame:
    """The retry delay after each failed attempt, for `n_jobs` jobs that fail every
    time, as `queue_class`'s fail() schedules it (the learner's JobQueue; the tutorial's
    without one): one row per (job, attempt), with the tutorial's ceiling for the attempt.
    The last attempt has no retry (the job is dead), so attempts run 1 to max_attempts - 1."""
    n_jobs = _whole("n_jobs", n_jobs, 1, 100_000)
    base = _number("base", base, 0.001, 3600)
    cap = _number("cap", cap, 0.001, 86_400)
    max_attempts = _whole("max_attempts", max_attempts, 2, 30)
    clock = FakeClock(0.0)
    path = db_path("retries_jitter", folder)
    settings = {"backoff_base": base, "backoff_cap": cap, "max_attempts": max_attempts}
    q = (queue_class or JobQueue)(path, clock=clock, rng=random.Random(seed).random, **settings)
    rows = []
    try:
        q.enqueue_many("always_fails", [{}] * n_jobs)
        for attempt in range(1, max_attempts):
            jobs = q.claim("jitter", limit=n_jobs)
            for job in jobs:
                q.fail(job, "ValueError: always fails")
            due = dict(q.db.execute("SELECT id, visible_at FROM jobs WHERE state = 'queued'").fetchall())
            top = ceiling(attempt, base, cap)
            rows += [(job.id, attempt, top, due.get(job.id, clock.now) - clock.now) for job in jobs]
            clock.now = max(due.values(), default=clock.now) + 1.0  # every retry is due again
    finally:
        q.db.close()
    return pd.DataFrame(rows, columns=["job", "attempt", "ceiling (s)", "delay (s)"])


def jitter_summary(delays: pd.DataFrame) -> pd.DataFrame:
    """Per attempt: the ceiling and how the delays spread under it."""
    grouped = delays.groupby("attempt")["delay (s)"]
    table = pd.DataFrame(
        {
            "ceiling (s)": delays.groupby("attempt")["ceiling (s)"].first(),
            "min (s)": grouped.min(),
            "median (s)": grouped.median(),
            "max (s)": grouped.max(),
            "mean / ceiling": grouped.mean() / delays.groupby("attempt")["ceiling (s)"].first(),
        }
    )
    return table.round(3)


def plot_jitter(delays: pd.DataFrame):
    """Every job's delay after each attempt, spread under the doubling (then capped) ceiling."""
    fig, ax = new_figure()
    offsets = random.Random(0)
    xs = [a + (offsets.random() - 0.5) * 0.5 for a in delays["attempt"]]
    ax.scatter(xs, delays["delay (s)"], s=4, alpha=0.35, color="#4c72b0", label="one job's delay")
    ceilings = delays.groupby("attempt")["ceiling (s)"].first()
    ax.hlines(ceilings.values, ceilings.index - 0.35, ceilings.index + 0.35, color="#c44e52", linewidth=2)
    ax.plot([], [], color="#c44e52", linewidth=2, label="ceiling min(cap, base·2^(n-1))")
    medians = delays.groupby("attempt")["delay (s)"].median()
    ax.plot(medians.index, medians.values, "k_", markersize=14, label="median")
    ax.set_xticks(list(ceilings.index))
    ax.set_xlabel("failed attempt n (retry after it)")
    ax.set_ylabel("delay before the retry (s)")
    ax.set_title(f"Full jitter, {delays['job'].nunique()} jobs that always fail")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def jitter_panel(n_jobs: int = JITTER_JOBS, folder: Folder = None, queue_class: type | None = None):
    """Sliders for base, cap and max attempts; the plot and table of `queue_class`'s delays
    (the learner's JobQueue) follow them."""
    import ipywidgets as widgets

    style = {"description_width": "initial"}
    base = widgets.FloatSlider(
        value=1.0, min=0.1, max=10.0, step=0.1, description="base (s)", style=style, continuous_update=False
    )
    cap = widgets.FloatSlider(
        value=60.0, min=1.0, max=300.0, step=1.0, description="cap (s)", style=style, continuous_update=False
    )
    attempts = widgets.IntSlider(
        value=8, min=2, max=15, description="max attempts", style=style, continuous_update=False
    )
    note = widgets.HTML()
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))

    def refresh(_change: object = None) -> None:
        try:
            draw()
        except KeyboardInterrupt:  # the kernel was interrupted mid-draw
            note.value = "<b>interrupted</b>: move a slider to draw again"

    def draw() -> None:
        note.value = f"{n_jobs} jobs that always fail: one dot per job and failed attempt"
        delays = jitter_delays(
            n_jobs,
            base=base.value,
            cap=cap.value,
            max_attempts=attempts.value,
            folder=folder,
            queue_class=queue_class,
        )
        table.value = html_table(jitter_summary(delays).reset_index())
        picture.value = figure_png(plot_jitter(delays))

    for control in (base, cap, attempts):
        control.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([base, cap, attempts]), note, picture, table])


# -- the poison job, with real processes ---------------------------------------------


@dataclass(frozen=True)
class Round:
    round: int
    exit_code: int
    state: str
    attempts: int
    last_error: str | None

    def line(self) -> str:
        return (
            f"round {self.round}: worker exit code {self.exit_code}, job state={self.state} "
            f"attempts={self.attempts} last_error={self.last_error}"
        )


def poison_rounds(
    *,
    lease: float = 0.5,
    max_attempts: int = 3,
    idle_exit: float = 0.5,
    folder: Folder = None,
    code: str | os.PathLike[str] | None = None,
    rounds: int | None = None,
) -> list[Round]:
    """One 'poison' job, whose handler kills its own process. Starts a fresh worker
    process per round, running the tutorial's worker on the code in folder `code` (the
    learner's workspace; the course's without it), waits for it to die (or leave), then
    for the lease to run out, until a round finds the job no longer running, or after
    `rounds` rounds (max_attempts + 1 unless given)."""
    lease = _number("lease", lease, 0.1, 30)
    max_attempts = _whole("max_attempts", max_attempts, 1, 10)
    rounds = max_attempts + 1 if rounds is None else _whole("rounds", rounds, 1, 20)
    path = db_path("poison", folder)
    q = JobQueue(path, lease_seconds=lease, max_attempts=max_attempts)
    q.enqueue("poison", {})
    q.db.close()
    found: list[Round] = []
    with closing(sqlite3.connect(str(path), timeout=30.0)) as db:
        db.row_factory = sqlite3.Row
        for number in range(1, rounds + 1):
            proc = process.start_worker(path, f"w{number}", lease, idle_exit, code=code)
            try:
                exit_code = proc.wait(timeout=60)
            finally:
                kill_tree(proc)  # only does anything if the wait timed out
            row = db.execute("SELECT state, attempts, last_error, visible_at FROM jobs").fetchone()
            found.append(Round(number, exit_code, row["state"], row["attempts"], row["last_error"]))
            if row["state"] != "running":
                break
            time.sleep(max(0.0, row["visible_at"] - time.time()) + 0.05)  # until the lease has run out
    return found


def poison_table(counted: list[Round], uncounted: list[int]) -> pd.DataFrame:
    """Hand-outs so far after each round, for both designs, side by side."""
    n = max(len(counted), len(uncounted))

    def padded(values: list, dtype: str) -> pd.Series:
        return pd.Series(values + [None] * (n - len(values)), dtype=dtype, index=range(1, n + 1))

    table = pd.DataFrame(
        {
            "counted at claim: hand-outs": padded([r.attempts for r in counted], "Int64"),
            "counted at claim: state": padded([r.state for r in counted], "string"),
            "counted in fail(): hand-outs": padded(uncounted, "Int64"),
        }
    )
    table.index.name = "round"
    return table


def plot_poison(counted: list[Round], uncounted: list[int], max_attempts: int):
    fig, ax = new_figure()
    ax.plot(
        range(1, len(uncounted) + 1),
        uncounted,
        "o--",
        color="#c44e52",
        label="attempts counted in fail() (fake clock)",
    )
    ax.plot(
        [r.round for r in counted],
        [r.attempts for r in counted],
        "o-",
        color="#4c72b0",
        label="attempts counted at claim (real workers)",
    )
    dead = [r for r in counted if r.state == "dead"]
    for r in dead:
        ax.annotate("dead", (r.round, r.attempts), xytext=(0, 8), textcoords="offset points", ha="center")
    ax.axhline(max_attempts, color="#999999", linestyle=":", label=f"max_attempts = {max_attempts}")
    ax.set_xlabel("round (one worker process, killed by the job)")
    ax.set_ylabel("times the job was handed out")
    ax.legend(loc="upper left", fontsize="small")
    return fig
