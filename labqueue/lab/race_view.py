"""Tables, the bar chart and the widget panel for the claim race (notebook 01)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from .assets import data_file, figure_png, new_figure
from .race import DEFAULT_JOBS, DEFAULT_WORKERS, MAX_WORKERS, STRATEGY_NAMES, RaceResult, race_all
from .tables import html_table

DATA_FILE = "claim_race_tutorial.csv"
COLUMNS = ["strategy", "jobs", "workers", "claims", "distinct", "duplicates", "wasted", "seconds"]


def tutorial_results(path: Path | None = None) -> pd.DataFrame:
    """The tutorial's published race (20,000 jobs, 4 processes), from data/."""
    return pd.read_csv(path or data_file(DATA_FILE), comment="#")


def results_frame(results: Sequence[RaceResult]) -> pd.DataFrame:
    return pd.DataFrame([r.row() for r in results], columns=COLUMNS)


def side_by_side(results: Sequence[RaceResult], tutorial: pd.DataFrame | None = None) -> pd.DataFrame:
    """This run and the tutorial's, per 1,000 jobs so that different sizes compare."""
    tutorial = tutorial_results() if tutorial is None else tutorial
    runs = {"this run": results_frame(results), "tutorial": tutorial}
    rows = []
    for source, frame in runs.items():
        for r in frame.itertuples():
            rows.append(
                {
                    "strategy": r.strategy,
                    "source": source,
                    "jobs": r.jobs,
                    "duplicates per 1,000 jobs": round(1000 * r.duplicates / r.jobs, 1),
                    "wasted retries per 1,000 jobs": round(1000 * r.wasted / r.jobs, 1),
                }
            )
    return pd.DataFrame(rows)


def plot_race(results: Sequence[RaceResult], tutorial: pd.DataFrame | None = None):
    """Two bar charts, duplicates and wasted retries per 1,000 jobs, this run beside
    the tutorial's. Returns the figure, which a notebook cell shows by returning it."""
    table = side_by_side(results, tutorial)
    fig, axes = new_figure(1, 2)
    names = list(STRATEGY_NAMES)
    width = 0.38
    for ax, column in zip(axes, ["duplicates per 1,000 jobs", "wasted retries per 1,000 jobs"], strict=True):
        for k, (source, color) in enumerate([("this run", "tab:blue"), ("tutorial", "tab:gray")]):
            part = table[table.source == source].set_index("strategy").reindex(names)
            xs = [i + (k - 0.5) * width for i in range(len(names))]
            bars = ax.bar(xs, part[column], width, label=source, color=color)
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        ax.set_xticks(range(len(names)), names)
        ax.set_xlabel("claim strategy")
        ax.set_ylabel(column.replace(" per", "\nper"))
        ax.margins(y=0.15)
    axes[0].legend(fontsize="small")
    fig.suptitle(
        f"{results[0].workers} processes, {results[0].jobs:,} jobs (tutorial: 4, 20,000)", fontsize=10
    )
    return fig


class RacePanel:
    """Sliders for the number of jobs and of workers, a Run button, and an output
    that shows the latest table and chart. The button calls `run`, which is plain
    Python, so tests drive the panel the same way a learner does."""

    def __init__(
        self,
        initial: Sequence[RaceResult] | None = None,
        runner: Callable[..., list[RaceResult]] = race_all,
        code: str | os.PathLike[str] | None = None,
    ) -> None:
        import ipywidgets as w

        self.runner = runner
        self.code = code  # the learner's workspace: the racers run its race.py
        self.results: list[RaceResult] = list(initial or [])
        self.jobs = w.IntSlider(
            value=DEFAULT_JOBS, min=500, max=20_000, step=500, description="jobs", continuous_update=False
        )
        self.workers = w.IntSlider(
            value=DEFAULT_WORKERS, min=2, max=MAX_WORKERS, description="workers", continuous_update=False
        )
        self.button = w.Button(description="Run the race", button_style="primary", icon="play")
        self.status = w.HTML()
        self.table = w.HTML()
        self.chart = w.Image(format="png", layout=w.Layout(width="640px", max_width="100%"))
        self.button.on_click(lambda _: self.run())
        self.widget = w.VBox(
            [w.HBox([self.jobs, self.workers]), self.button, self.status, self.table, self.chart]
        )
        self.render()

    def run(self) -> list[RaceResult]:
        self.button.disabled = True
        self.status.value = (
            f"<i>racing {self.jobs.value:,} jobs with {self.workers.value} processes, three times…</i>"
        )
        try:
            self.results = self.runner(self.jobs.value, self.workers.value, progress=False, code=self.code)
        except KeyboardInterrupt:  # the kernel was interrupted: the racers are already stopped
            self.status.value = "<b>interrupted</b>: the racers were stopped; press <b>Run the race</b> again"
            return self.results
        finally:
            self.button.disabled = False
        self.render()
        return self.results

    def render(self) -> None:
        if not self.results:
            self.status.value = "Pick a size and press <b>Run the race</b>."
            return
        r = self.results[0]
        self.status.value = (
            f"last run: {r.jobs:,} jobs, {r.workers} processes; naive made <b>{r.duplicates:,}</b> "
            f"duplicate claims"
        )
        self.table.value = html_table(results_frame(self.results))
        self.chart.value = figure_png(plot_race(self.results))


def race_panel(initial: Sequence[RaceResult] | None = None, code: str | os.PathLike[str] | None = None):
    """The notebook's widget panel, showing `initial` results until the first run; its
    races run the claims of `race.py` in the workspace folder `code` (the learner's)."""
    return RacePanel(initial, code=code).widget
