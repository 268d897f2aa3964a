"""Notebook 16, part 3: waking idle workers without polling, measured.

The measurement is the package's own benchmark, labqueue.bench.wakeup, at a size that fits
the notebook: for each way of waiting (polling every 50 ms, every 1 s, and wake-up hints
with a 1 s safety poll) one spawned worker idles, then picks up jobs enqueued at random
moments. This module runs its modes one by one under a progress bar, and tabulates and plots
what they measured.
"""

from __future__ import annotations

import html
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..bench import wakeup as bench
from ..errors import InvalidArgument
from .assets import figure_png, new_figure
from .scratch import work_folder
from .tables import html_table
from .walks import Folder

# The notebook's size: about four seconds per way of waiting on one CPU.
NOTEBOOK_SIZES = bench.Sizes(jobs=30, idle_seconds=1.5, max_gap=0.1, seed=16)
COLOURS = {"poll_50ms": "#dd8452", "poll_1s": "#c44e52", "wakeup": "#4c72b0"}


def _check(sizes: bench.Sizes) -> bench.Sizes:
    if not isinstance(sizes.jobs, int) or isinstance(sizes.jobs, bool) or not 1 <= sizes.jobs <= 1000:
        raise InvalidArgument(f"jobs must be a whole number from 1 to 1000, got {sizes.jobs!r}")
    for name in ("idle_seconds", "max_gap"):
        value = getattr(sizes, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.01 <= value <= 60:
            raise InvalidArgument(f"{name} must be a number of seconds from 0.01 to 60, got {value!r}")
    return sizes


def measure(
    sizes: bench.Sizes = NOTEBOOK_SIZES,
    *,
    folder: Folder = None,
    progress: bool = True,
    on_mode: Callable[[str], object] = lambda label: None,
) -> dict[str, Any]:
    """bench.run(), one way of waiting after the other, with a progress bar over them.
    Returns the same dictionary the benchmark writes with --out."""
    sizes = _check(sizes)
    where = Path(folder) if folder is not None else work_folder() / "wakeup"
    where.mkdir(parents=True, exist_ok=True)
    rng = random.Random(sizes.seed)
    rows = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(bench.MODES), unit="way", desc="pick-up latency")
    try:
        for mode in bench.MODES:
            on_mode(mode.label)
            if bar is not None:
                bar.set_postfix_str(mode.label)
            rows.append(bench.measure_mode(mode, where, sizes, rng))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return {"sizes": vars(sizes), "when": time.time(), "machine": bench.machine(), "modes": rows}


def saved_worker_run(data: Path | None = None) -> str:
    """The saved `labqueue bench wakeup --real-worker` run in the benchmarks page's words
    (data/bench_wakeup_worker.json), or how to measure one where none is saved."""
    from ..bench import published

    folder = published.DATA if data is None else data
    if not (folder / published.FILES["wakeup"]).is_file():
        return "No saved run here: `python tasks.py bench wakeup --real-worker` measures one (2 minutes)."
    return published.render("wakeup", folder)


def by_mode(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["mode"]: row for row in results["modes"]}


def table(results: dict[str, Any]) -> Any:
    """One row per way of waiting: jobs picked up, pick-up latency and idle CPU."""
    import pandas as pd

    rows = [
        {
            "way of waiting": row["label"],
            "picked up": f"{row['picked']}/{row['jobs']}",
            "median (ms)": row["median_ms"],
            "p95 (ms)": row["p95_ms"],
            "max (ms)": row["max_ms"],
            "idle CPU (ms per s)": row["idle_cpu_ms_per_s"],
        }
        for row in results["modes"]
    ]
    return pd.DataFrame(rows).set_index("way of waiting").round(3)


def plot_latency(results: dict[str, Any]):
    """A histogram of pick-up latencies per way of waiting, on a log scale, with each median."""
    fig, ax = new_figure()
    every = [x for row in results["modes"] for x in row["latencies_ms"] if x > 0]
    low = 10 ** math.floor(math.log10(min(every))) if every else 0.01
    high = 10 ** math.ceil(math.log10(max(every))) if every else 1000
    edges = [low * (high / low) ** (i / 48) for i in range(49)]
    for row in results["modes"]:
        values = [max(x, low) for x in row["latencies_ms"]]
        colour = COLOURS.get(row["mode"], "#999999")
        ax.hist(values, bins=edges, histtype="stepfilled", alpha=0.45, color=colour, label=row["label"])
        if row["median_ms"] is not None:
            ax.axvline(row["median_ms"], color=colour, linestyle="--", linewidth=1.2)
    ax.set_xscale("log")
    ax.set_xlabel("pick-up latency, enqueue to claim (ms, log scale); dashed: median")
    ax.set_ylabel("jobs")
    sizes = results["sizes"]
    ax.set_title(f"{sizes['jobs']} jobs per way of waiting, one idle worker each", fontsize="medium")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def wake_panel(initial: dict[str, Any] | None = None, *, folder: Folder = None):
    """Sliders for the jobs per way of waiting and the idle stretch; Measure pick-up runs the
    benchmark again (the benchmark's own default is 50 jobs and 5 s idle)."""
    import ipywidgets as widgets

    base = bench.Sizes(**initial["sizes"]) if initial is not None else NOTEBOOK_SIZES
    style = {"description_width": "initial"}
    jobs = widgets.IntSlider(value=base.jobs, min=5, max=200, step=5, description="jobs", style=style)
    idle = widgets.FloatSlider(
        value=base.idle_seconds, min=0.5, max=10.0, step=0.5, description="idle (s)", style=style
    )
    go = widgets.Button(description="Measure pick-up", button_style="primary", icon="play")
    status = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))
    numbers = widgets.HTML()

    def show(results: dict[str, Any], prefix: str = "") -> None:
        rows = by_mode(results)
        wake, poll = rows["wakeup"], rows["poll_50ms"]
        status.value = (
            f"{prefix}{results['sizes']['jobs']} jobs, {results['sizes']['idle_seconds']:g} s idle: "
            f"wake-up median {wake['median_ms']:.3g} ms, polling at 50 ms {poll['median_ms']:.3g} ms"
        )
        picture.value = figure_png(plot_latency(results))
        numbers.value = html_table(table(results).reset_index())

    def on_run(_: Any) -> None:
        go.disabled = True
        try:
            sizes = replace(base, jobs=jobs.value, idle_seconds=idle.value)
            show(measure(sizes, folder=folder, progress=False, on_mode=lambda m: _say(status, m)))
        except Exception as exc:
            status.value = f"<b style='color:#b00'>failed:</b> {html.escape(f'{type(exc).__name__}: {exc}')}"
        finally:
            go.disabled = False

    go.on_click(on_run)
    if initial is not None:
        show(initial, "Last run: ")
    return widgets.VBox([widgets.HBox([jobs, idle, go]), status, picture, numbers])


def _say(status: Any, label: str) -> None:
    status.value = f"measuring: {label}..."
