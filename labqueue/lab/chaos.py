"""Notebook 12: the end-to-end chaos run on the learner's queue, its invariants, a timeline,
and the course's finale.

The supervisor, its faults and the invariants are labqueue.chaos's (the tool behind
``python -m labqueue.chaos``, which runs labqueue's own workers). Here its pool runs the
tutorial's worker processes instead (``python -m labqueue.tutorial.process``), on the code
in folder `code` (the learner's workspace; None: the course's), and the queue is the
tutorial's table. This module adds a progress bar, tables, the timeline plot and the panel."""

from __future__ import annotations

import html
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..chaos.check import SLOW_STALL_SECONDS, JobRow, check_run, figures
from ..chaos.store import Store, check_new
from ..chaos.supervisor import RECORD_TABLES, TICK, ChaosConfig, ChaosResult, Supervisor, save_records
from ..demo.handlers import LEDGER_TABLE
from ..pool import WorkerPool
from ..tutorial import process
from .assets import data_file, figure_png, new_figure
from .scratch import db_path

DATA_FILE = "chaos_tutorial.csv"
LIFE_COLOUR = "#a6bddb"
Folder = str | os.PathLike[str] | None


JOB_ROWS = "SELECT id, kind, state, attempts, max_attempts, last_error, finished_at FROM jobs ORDER BY id"
LEDGER_ROWS = "SELECT job_id, attempt FROM ledger ORDER BY job_id, attempt"


# Run in a child process, so the queue is made by the JobQueue of the code folder without
# loading that code into the notebook's kernel: argv is PATH CODE MAX_ATTEMPTS KIND...
FILL = """
import itertools, sys
from labqueue.tutorial import process
path, code, max_attempts, order = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), sys.argv[4:]
q = process.tutorial_module("jobqueue", code).JobQueue(path, max_attempts=max_attempts)
for kind, run in itertools.groupby(order):
    q.enqueue_many(kind, [{} for _ in run])
q.db.close()
"""


def prepare(path: Path, config: ChaosConfig, code: Folder = None) -> int:
    """A fresh tutorial queue, made by the JobQueue in `code`, holding the mix shuffled with
    the config's seed, an empty ledger and the supervisor's record tables. Returns the job count."""
    check_new(path)
    order = [kind for kind, count in config.job_mix.items() for _ in range(count)]
    random.Random(config.seed).shuffle(order)  # the awkward jobs spread through the run
    where = "" if code is None else str(code)
    command = [sys.executable, "-c", FILL, str(path), where, str(config.max_attempts), *order]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"your JobQueue could not fill the queue (exit code {done.returncode}):\n{tail}")
    with Store(path) as store:
        store.execute(LEDGER_TABLE)
        store.script(RECORD_TABLES)
    return len(order)


def preflight(code: Folder) -> None:
    """Start one worker on an empty queue: if the code cannot even run, say so now, with
    the worker's own error, instead of a pool that crashes for ever."""
    with tempfile.TemporaryDirectory(prefix="labqueue-preflight-") as scratch:
        command = process.worker_command(Path(scratch) / "empty.db", "preflight", 1.0, 0.0, code)
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"a worker on your code cannot start (exit code {done.returncode}):\n{tail}")


class TutorialSupervisor(Supervisor):
    """labqueue.chaos's supervisor (replace every worker that ends, inject the faults, keep
    the record), with a pool of the tutorial's worker processes on the code in `code`."""

    def __init__(self, path: Path, config: ChaosConfig, started: float, code: Folder = None) -> None:
        super().__init__(path, config, started)
        self.pool = WorkerPool(
            path,
            config.workers,
            command=lambda name: process.worker_command(path, name, config.lease, config.idle_exit, code),
        )

    def settle(self, seconds: float) -> None:
        """After the drain, replace nobody and inject nothing: thaw the frozen workers when
        their time comes and let every worker finish what it holds and leave on its own. A
        stalled or frozen worker reports late, long after its lease; the fence must refuse it."""
        end = self.now() + seconds
        while self.now() < end and self.pool.alive() > 0:
            for worker in self.pool.reap():
                self._ended(worker)
            for name, (proc, wake_at, index) in list(self.paused.items()):
                if self.now() >= wake_at:
                    self._resume(name, proc, index)
            time.sleep(TICK)


def run_tutorial(
    config: ChaosConfig, path: str | os.PathLike[str], code: Folder = None, progress: Any = None
) -> ChaosResult:
    """The end-to-end run on the tutorial's queue: prepare `path` (a new file), supervise the
    tutorial's workers until the queue drains or `config.timeout` passes, then check the
    invariants. Every worker is thawed and killed before it returns."""
    path = Path(path)
    preflight(code)
    total = prepare(path, config, code)
    started = time.time()
    supervisor = TutorialSupervisor(path, config, started, code)
    drained = False
    try:
        while supervisor.now() < config.timeout:
            if supervisor.live_jobs() == 0:
                drained = True
                break
            supervisor.tick()
            if progress is not None:
                progress(supervisor.finished_jobs(), total)
            time.sleep(TICK)
        elapsed = supervisor.now()
        if drained:  # a stalled slow job's first worker wakes up to 2 s after its claim
            supervisor.settle(config.pause_seconds + SLOW_STALL_SECONDS + config.idle_exit + 1.0)
    finally:
        elapsed = locals().get("elapsed", supervisor.now())
        supervisor.stop_all()
        supervisor.close()
    with Store(path) as db:
        jobs = [
            JobRow(r[0], r[1], r[2], r[3], r[4], r[5], None if r[6] is None else r[6] - started)
            for r in db.rows(JOB_ROWS)
        ]
        ledger = [(r[0], r[1]) for r in db.rows(LEDGER_ROWS)]
    result = ChaosResult(config, path, started, elapsed, supervisor.lives, supervisor.faults, jobs, ledger)
    result.crash_hits = supervisor.crash_hits
    hits = Counter(job_id for f in result.faults for job_id in f.hit) + Counter(result.crash_hits)
    result.checks = check_run(jobs, ledger, hits, lease=config.lease, drained=drained)
    save_records(path, result)
    if progress is not None:
        progress(sum(1 for j in jobs if j.state in ("done", "dead")), total)
    return result


def run_with_progress(
    config: ChaosConfig,
    name: str = "chaos",
    folder: Folder = None,
    progress: bool = True,
    code: Folder = None,
) -> ChaosResult:
    """One chaos run of the tutorial's workers on the code in `code` (the learner's
    workspace; None: the course's), on a fresh scratch queue, with a bar of jobs finished."""
    from tqdm.auto import tqdm

    path = db_path(name, folder)  # a fresh file: the last run's of that name is deleted
    with tqdm(total=config.jobs, desc=f"{name}: jobs finished", unit="job", disable=not progress) as bar:

        def advance(done: int, _total: int) -> None:
            bar.update(done - bar.n)

        return run_tutorial(config, path, code, progress=advance)


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
    fig, (lanes, done) = new_figure(2, 1, tall=True, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
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


def chaos_panel(initial: ChaosResult | None = None, folder: Folder = None, code: Folder = None):
    """Choose the size, the pool and the faults; Run starts a fresh supervised run of the
    tutorial's workers on the code in `code` (the learner's workspace) and shows its checks
    and timeline. Shows `initial` (the notebook's last run) until then."""
    import ipywidgets as w

    sizes = [30, 100, 300, 1000, 5000]
    # The controls start at the shown run's size, so what they say matches what is shown.
    shown = initial.config if initial is not None else None
    size = shown.jobs if shown is not None and shown.jobs in sizes else 300
    pool = shown.workers if shown is not None and 1 <= shown.workers <= 16 else 8
    jobs = w.Dropdown(options=sizes, value=size, description="jobs")
    workers = w.IntSlider(value=pool, min=1, max=16, description="workers")

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
            result = run_with_progress(config, "chaos_panel", folder, progress=False, code=code)
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
