"""Notebook 12: the end-to-end chaos run, its invariants, a timeline, and the course's finale.

The run itself is labqueue.chaos (also ``python -m labqueue.chaos``); this module adds
a progress bar, tables, the timeline plot and the widget panel."""

from __future__ import annotations

import html
import os
from typing import Any

from ..chaos.check import figures
from ..chaos.supervisor import ChaosConfig, ChaosResult, run
from .assets import DPI, FIGSIZE_TALL, data_file, figure_png
from .scratch import db_path

DATA_FILE = "chaos_tutorial.csv"
LIFE_COLOUR = "#a6bddb"
Folder = str | os.PathLike[str] | None


def run_with_progress(
    config: ChaosConfig, name: str = "chaos", folder: Folder = None, progress: bool = True
) -> ChaosResult:
    """One chaos run on a fresh scratch queue, with a bar of jobs finished (done or dead)."""
    from tqdm.auto import tqdm

    total = config.jobs
    with tqdm(total=total, desc=f"{name}: jobs finished", unit="job", disable=not progress) as bar:

        def advance(done: int, _total: int) -> None:
            bar.update(done - bar.n)

        return run(config, db_path(name, folder), progress=advance)


def print_report(result: ChaosResult) -> None:
    print("\n".join(result.report()))


def whole(table: Any) -> Any:
    """A table for display with every cell shown whole, left-aligned: pandas would cut long
    text at 50 characters with an ellipsis."""
    left = {"text-align": "left", "white-space": "normal"}
    headers = [{"selector": "th", "props": list(left.items())}]
    return table.style.set_properties(**left).set_table_styles(headers)


def checks_table(result: ChaosResult) -> Any:
    """Every invariant of the run, whether it held, and the first jobs that broke it."""
    import pandas as pd

    return pd.DataFrame(
        [(c.claim, "yes" if c.ok else "NO", c.detail) for c in result.checks],
        columns=["invariant", "held", "jobs that broke it"],
    )


def outcome_figures(result: ChaosResult) -> dict[str, float]:
    """The run's figures under the names the tutorial's table uses."""
    f = figures(result.jobs, result.ledger)
    states, slow, dead = f["states"], f["slow_by_attempt"], f["dead_attempts"]
    max_attempts = result.config.max_attempts
    return {
        "seconds": round(result.elapsed, 1),
        "worker processes started": len(result.workers),
        "exited with a crash": result.crashed,
        "done": states.get("done", 0),
        "dead": states.get("dead", 0),
        "ledger rows": f["ledger_rows"],
        "jobs with more than one ledger row": f["jobs_with_two_or_more_rows"],
        "credit jobs that needed a retry": f["credit_retried"],
        "slow jobs recorded from attempt 1": slow.get(1, 0),
        "slow jobs recorded from attempt 2": slow.get(2, 0),
        f"bad jobs dead after {max_attempts} attempts": dead.get(("bad", max_attempts), 0),
        f"poison jobs dead after {max_attempts} attempts": dead.get(("poison", max_attempts), 0),
    }


def beside_the_tutorial(*runs: tuple[str, ChaosResult]) -> Any:
    """The tutorial's published figures next to each of this machine's runs."""
    import pandas as pd

    table = pd.read_csv(data_file(DATA_FILE), comment="#").set_index("figure")
    table = table.rename(columns={"value": "tutorial"})
    for label, result in runs:
        table[label] = pd.Series(outcome_figures(result))
    return table.map(lambda value: f"{value:g}")


FAULT_WORDS = {
    "kill": "SIGKILL sent",
    "pause": "SIGSTOP sent (SIGCONT later)",
    "sever": "worker session terminated (PostgreSQL)",
}


def fates_table(result: ChaosResult) -> Any:
    """How the worker processes ended, and the faults the supervisor injected."""
    import pandas as pd

    rows = {}
    for life in result.workers:
        rows[life.fate] = rows.get(life.fate, 0) + 1
    for fault in result.faults:
        key = FAULT_WORDS.get(fault.fault, fault.fault)
        rows[key] = rows.get(key, 0) + 1
    return pd.DataFrame(sorted(rows.items()), columns=["what", "count"]).set_index("what")


def plot_timeline(result: ChaosResult):
    """Worker lifetimes per pool slot, with crash, kill and pause marks, over jobs finished."""
    import matplotlib.pyplot as plt

    fig, (lanes, done) = plt.subplots(
        2, 1, figsize=FIGSIZE_TALL, dpi=DPI, sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    end = result.elapsed
    for life in result.workers:
        stop = life.ended if life.ended is not None else end
        lanes.plot([life.started, stop], [life.slot, life.slot], color=LIFE_COLOUR, lw=3)
    marks = {
        "crashed": ("x", "#222222", "crash (poison job)"),
        "killed": ("X", "#c44e52", "SIGKILL"),
    }
    for fate, (marker, colour, label) in marks.items():
        points = [(w.ended, w.slot) for w in result.workers if w.fate == fate and w.ended is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            lanes.scatter(xs, ys, marker=marker, color=colour, s=30, zorder=3, label=label)
    slot_of = {w.name: w.slot for w in result.workers}
    pauses = [f for f in result.faults if f.fault == "pause"]
    for i, fault in enumerate(pauses):
        until = fault.until if fault.until is not None else end
        lanes.plot(
            [fault.at, until],
            [slot_of[fault.worker]] * 2,
            color="#dd8452",
            lw=7,
            alpha=0.6,
            solid_capstyle="butt",
            label="SIGSTOP to SIGCONT" if i == 0 else None,
        )
    lanes.set_ylabel("pool slot")
    lanes.set_yticks(range(result.config.workers))
    lanes.tick_params(axis="y", labelsize="small")
    lanes.set_ylim(-0.7, result.config.workers - 0.3)
    lanes.plot([], [], color=LIFE_COLOUR, lw=3, label="worker alive")
    lanes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize="small", ncol=4, frameon=False)
    for state, colour in (("done", "#55a868"), ("dead", "#c44e52")):
        times = sorted(j.finished_at for j in result.jobs if j.state == state and j.finished_at is not None)
        done.step([0.0, *times], range(len(times) + 1), where="post", color=colour, label=state)
    done.set_ylabel("jobs")
    done.set_xlabel("time since the start (s)")
    done.set_xlim(0, max(end, 0.1))
    done.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    plt.close(fig)
    return fig


def protections() -> Any:
    """What each piece of the queue protects against, and where the course showed it."""
    import pandas as pd

    rows = [
        ("one UPDATE ... RETURNING claims", "two workers taking the same job", "01"),
        ("a lease (visible_at)", "a job stuck forever with a worker that died", "02, 03"),
        ("the lease token on complete, fail, heartbeat", "a late worker undoing a newer attempt", "04"),
        ("the effect inside complete's transaction", "a stale worker's effect landing twice", "05"),
        ("a heartbeat (KeepAlive)", "a long job taken over while it still runs", "06"),
        (
            "attempts counted at claim, exhausted leases retired",
            "a poison job crashing workers forever",
            "07",
        ),
        ("backoff with full jitter", "retries hammering a failing service in step", "07"),
        ("the dead state with last_error", "a hopeless job retried forever or dropped silently", "07, 10"),
        ("partial indexes", "claims slowing down as finished rows pile up", "08"),
        (
            "WAL, and synchronous chosen on purpose",
            "readers blocking the writer; commits lost to a power cut",
            "09",
        ),
        ("stats() and requeue_dead()", "a backlog or dead jobs nobody notices", "10"),
        ("a fake clock, a pinned rng, a model test", "a timing rule broken by the next change", "11"),
        ("a supervisor that replaces workers", "a pool that shrinks as workers crash", "12"),
    ]
    return pd.DataFrame(rows, columns=["piece", "protects against", "notebook"]).set_index("piece")


# -- the widget ----------------------------------------------------------------------


def report_html(result: ChaosResult) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    colour = "#2e7d32" if result.passed else "#c62828"
    lines = html.escape("\n".join(result.report()))
    pre = "<pre style='font-size:11px; white-space:pre-wrap'>"  # long lines wrap, never cut off
    return f"<b style='color:{colour}'>{verdict}</b>{pre}{lines}</pre>"


def config_from(jobs: int, workers: int, kill_every: float, pause_every: float, seed: int) -> ChaosConfig:
    """The panel's settings as a run: the tutorial's lease and attempts, pauses 2.5 leases long."""
    lease = ChaosConfig().lease
    return ChaosConfig(
        jobs=jobs,
        workers=workers,
        kill_every=kill_every,
        pause_every=pause_every,
        pause_seconds=2.5 * lease,
        seed=seed,
    )


def chaos_panel(initial: ChaosResult | None = None, folder: Folder = None):
    """Choose the size, the pool and the faults; Run starts a fresh supervised run and shows
    its checks and timeline. Shows `initial` (the notebook's last run) until then."""
    import ipywidgets as w

    jobs = w.Dropdown(options=[30, 100, 300, 1000, 5000], value=300, description="jobs")
    workers = w.IntSlider(value=8, min=1, max=16, description="workers")

    def seconds_between(signal: str, value: float, most: float, step: float) -> Any:
        return w.FloatSlider(
            value=value,
            min=0.0,
            max=most,
            step=step,
            description=f"{signal} every",
            readout_format=".1f",
            style={"description_width": "initial"},  # the whole label, not "SIGKILL e..."
        )

    kill_every = seconds_between("SIGKILL", 0.5, 3.0, 0.1)
    pause_every = seconds_between("SIGSTOP", 1.5, 5.0, 0.5)
    seed = w.IntText(value=42, description="seed")
    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.HTML("Seconds between faults are averages; 0 turns a fault off. Press Run for a fresh run.")
    report = w.HTML()
    picture = w.Image(format="png", layout=w.Layout(width="100%", max_width="640px"))

    def show(result: ChaosResult) -> None:
        report.value = report_html(result)
        picture.value = figure_png(plot_timeline(result))

    def on_click(_: Any) -> None:
        button.disabled = True
        try:
            config = config_from(jobs.value, workers.value, kill_every.value, pause_every.value, seed.value)
            status.value = f"running {config.jobs} jobs on {config.workers} workers ..."
            result = run_with_progress(config, "chaos_panel", folder, progress=False)
            status.value = f"finished in {result.elapsed:.1f} s"
            show(result)
        except KeyboardInterrupt:  # run() thawed and killed every worker on its way out
            status.value = "<b>interrupted</b>: the run was stopped and its workers ended. Press Run again."
        except Exception as exc:  # show it in the panel; a callback's traceback is easy to miss
            status.value = f"<b>failed:</b> {type(exc).__name__}: {html.escape(str(exc))}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    if initial is not None:
        show(initial)
    box = w.VBox(
        [
            w.HBox([jobs, workers]),
            w.HBox([kill_every, pause_every]),
            w.HBox([seed, button]),
            status,
            report,
            picture,
        ]
    )
    box.controls = {
        "jobs": jobs,
        "workers": workers,
        "kill_every": kill_every,
        "pause_every": pause_every,
        "seed": seed,
    }
    box.button, box.status, box.report, box.picture = button, status, report, picture
    return box
