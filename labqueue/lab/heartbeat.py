"""Notebook 06: work that outlasts the lease, first bare, then under a KeepAlive.

Two worker threads share one job. A sampler thread reads the job's row every few
milliseconds from its own connection, so the timeline plot shows the lease
deadline as the database held it, not as the workers believed it to be.

Every run takes the JobQueue and KeepAlive classes to use: notebook 06 passes the
learner's (its cells' heartbeat and KeepAlive); without them, the tutorial's
(`labqueue.tutorial`, the same code as the notebook's cells).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import InvalidArgument
from ..tutorial.jobqueue import Job, JobQueue
from ..tutorial.keepalive import KeepAlive
from .assets import figure_png, new_figure
from .scratch import db_path
from .tables import html_table
from .walks import Folder

POLL_SECONDS = 0.05  # how often an idle worker asks for a job
SAMPLE_SECONDS = 0.01  # how often the sampler reads the job's row
SECOND_WORKER_DELAY = 0.3

#: A handler of one's own for scenario(): handler(path, job, lease, work), run in the worker's thread.
Handler = Callable[[Path, Job, float, float], object]


@contextlib.contextmanager
def _opened(queue_class: type | None, path: Path, **settings: object) -> Iterator[JobQueue]:
    """A queue of `queue_class` (the tutorial's by default) whose connection is closed after."""
    q = (queue_class or JobQueue)(path, **settings)
    try:
        yield q
    finally:
        q.db.close()


@dataclass(frozen=True)
class Event:
    t: float  # seconds since the scenario started
    worker: str
    what: str


@dataclass
class Run:
    """What one scenario did, as recorded while it ran."""

    name: str
    lease: float
    work: float
    heartbeat: bool
    interval: float | None = None
    runs: list[str] = field(default_factory=list)  # one entry per handler run
    completes: dict[str, bool] = field(default_factory=dict)
    beats: int | None = None
    lost: bool = False
    lost_after: float | None = None
    extended: bool = False  # lost_lease(): w1's beats moved w2's lease deadline
    empty_polls: dict[str, list[float]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    deadline: list[tuple[float, float, str]] = field(default_factory=list)  # (t, deadline, worker)

    def claims_by(self, worker: str) -> list[Event]:
        return [e for e in self.events if e.worker == worker and e.what.startswith("claim")]


def _check_seconds(name: str, value: object, low: float, high: float) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a number of seconds from {low} to {high}, got {value!r}")
    return float(value)


@contextlib.contextmanager
def _sampling(path: Path, t0: float, run: Run) -> Iterator[None]:
    """While the body runs, a thread with a connection of its own reads job 1 every
    SAMPLE_SECONDS and records the lease deadline the database holds (running jobs only)."""
    finished = threading.Event()

    def sample() -> None:
        with contextlib.closing(sqlite3.connect(str(path), timeout=5.0)) as db:
            while not finished.is_set():
                row = db.execute("SELECT visible_at, state, worker FROM jobs WHERE id = 1").fetchone()
                if row and row[1] == "running":
                    run.deadline.append((time.time() - t0, row[0] - t0, row[2]))
                finished.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, name="lease-sampler", daemon=True)
    sampler.start()
    try:
        yield
    finally:
        finished.set()
        sampler.join()


def scenario(
    heartbeat: bool,
    *,
    lease: float = 1.0,
    work: float = 3.0,
    interval: float | None = None,
    second_worker_delay: float = SECOND_WORKER_DELAY,
    folder: Folder = None,
    handler: Handler | None = None,
    queue_class: type | None = None,
    keepalive_class: type | None = None,
) -> Run:
    """One 'report' job, worker w1 from t=0 and w2 from `second_worker_delay`. Each
    works on the first job it gets for `work` seconds (with a KeepAlive if
    `heartbeat`), then reports. w2 gives up once the job is finished.

    `handler(path, job, lease, work)`, if given, is the work instead (notebook 06's
    exercise): it runs in the worker's thread and decides itself whether to beat.
    `queue_class` and `keepalive_class` are the learner's JobQueue and KeepAlive."""
    lease = _check_seconds("lease", lease, 0.1, 30)
    work = _check_seconds("work", work, 0.0, 60)
    if interval is not None:
        interval = _check_seconds("interval", interval, 0.01, lease)
    name = "keepalive" if heartbeat else "no_heartbeat"
    run = Run(name, lease, work, heartbeat, interval if heartbeat else None)
    path = db_path(f"heartbeat_{name}", folder)
    keepalive = keepalive_class or KeepAlive
    with _opened(queue_class, path, lease_seconds=lease) as q:
        q.enqueue("report", {})
    lock = threading.Lock()
    horizon = work * 2 + lease + 2.0  # a safety stop; normally the job finishes long before

    def note(worker: str, what: str) -> None:
        with lock:
            run.events.append(Event(time.time() - t0, worker, what))

    def next_job(wq: JobQueue, worker_id: str) -> Job | None:
        """Poll until a claim succeeds; None once the job is finished or time is up."""
        while time.time() - t0 < horizon:
            claimed = wq.claim(worker_id)
            if claimed:
                return claimed[0]
            (state,) = wq.db.execute("SELECT state FROM jobs WHERE id = 1").fetchone()
            if state in ("done", "dead"):
                return None
            with lock:
                run.empty_polls.setdefault(worker_id, []).append(time.time() - t0)
            time.sleep(POLL_SECONDS)
        return None

    def work_on_one_job(worker_id: str, start_delay: float) -> None:
        time.sleep(start_delay)
        with _opened(queue_class, path, lease_seconds=lease, schema=None) as wq:  # one connection per thread
            job = next_job(wq, worker_id)
            if job is None:
                return
            note(worker_id, f"claim (attempt {job.attempts})")
            with lock:
                run.runs.append(f"{worker_id} attempt {job.attempts}")
            if handler is not None:
                handler(path, job, lease, work)
            else:
                guard = keepalive(path, job, lease_seconds=lease, interval=interval) if heartbeat else None
                with guard or contextlib.nullcontext():
                    time.sleep(work)  # the handler's "work"
                if guard is not None:
                    run.beats = guard.beats
            accepted = wq.complete(job)
            run.completes[worker_id] = accepted
            note(worker_id, f"complete() -> {accepted}")

    t0 = time.time()
    starts = {"w1": 0.0, "w2": second_worker_delay}
    with _sampling(path, t0, run), ThreadPoolExecutor(max_workers=len(starts)) as pool:
        pending = [pool.submit(work_on_one_job, worker_id, delay) for worker_id, delay in starts.items()]
        for future in pending:
            future.result()  # a worker thread's exception is raised here
    run.events.sort(key=lambda e: e.t)
    return run


def lost_lease(
    *,
    lease: float = 1.0,
    interval: float = 0.2,
    takeover_after: float = 0.5,
    folder: Folder = None,
    queue_class: type | None = None,
    keepalive_class: type | None = None,
) -> Run:
    """w1 works under a KeepAlive; at `takeover_after` w2 claims the job as though w1 had
    stalled past its lease. Returns when w1's heartbeat has noticed (or after 3 s).
    `run.extended` says whether w1's beats moved w2's lease (a heartbeat without the fence)."""
    lease = _check_seconds("lease", lease, 0.1, 30)
    interval = _check_seconds("interval", interval, 0.01, lease)
    run = Run("lost", lease, takeover_after, True, interval)
    path = db_path("heartbeat_lost", folder)
    # w2 sees the time one lease (and a second) ahead, as if w1 had stalled that long:
    # its claim finds the lease ended in the same statement that takes the job, so no
    # heartbeat can slip in between (an UPDATE of visible_at first would race with one).
    ahead = lease + 1.0
    keepalive = keepalive_class or KeepAlive

    def ahead_clock() -> float:
        return time.time() + ahead

    with (
        _opened(queue_class, path, lease_seconds=lease) as q,
        _opened(queue_class, path, lease_seconds=lease, schema=None, clock=ahead_clock) as other,
    ):
        q.enqueue("report", {})
        t0 = time.time()
        with _sampling(path, t0, run):
            (job,) = q.claim("w1")
            run.events.append(Event(time.time() - t0, "w1", f"claim (attempt {job.attempts})"))
            run.runs.append(f"w1 attempt {job.attempts}")
            with keepalive(path, job, lease_seconds=lease, interval=interval) as hb:
                time.sleep(takeover_after)
                (taken,) = other.claim("w2")
                (w2_deadline,) = q.db.execute("SELECT visible_at FROM jobs WHERE id = 1").fetchone()
                run.events.append(Event(time.time() - t0, "w2", f"claim (attempt {taken.attempts})"))
                run.runs.append(f"w2 attempt {taken.attempts}")
                while not hb.lost.is_set() and time.time() - t0 < takeover_after + 3:
                    time.sleep(0.01)  # a handler would look at hb.lost between steps of its work
                run.lost = hb.lost.is_set()
                run.lost_after = time.time() - t0
                run.events.append(Event(run.lost_after, "w1", f"heartbeat refused, lost={run.lost}"))
            run.beats = hb.beats
            (deadline_now,) = q.db.execute("SELECT visible_at FROM jobs WHERE id = 1").fetchone()
            run.extended = deadline_now != w2_deadline  # only w2 itself may move its deadline
            run.completes["w2"] = other.complete(taken)
    return run


def describe(run: Run) -> list[str]:
    """The tutorial's summary lines for one run."""
    if run.name == "lost":
        w2 = run.runs[-1].split()[-1]
        seen = f"w1 saw lost={run.lost} after {run.lost_after:.1f}s"
        then = "stops working" if run.lost else "keeps working on a job that is not its own"
        return [f"w2 holds the job (attempt {w2}); {seen} and {then}"]
    lines = [f"handler ran {len(run.runs)} time(s): {', '.join(run.runs)}"]
    for worker_id in sorted(run.completes):
        beats = f" heartbeats={run.beats}" if run.heartbeat and worker_id == "w1" else ""
        lines.append(f"  {worker_id}: complete={run.completes[worker_id]}{beats}")
    return lines


def summary_table(runs: list[Run]) -> pd.DataFrame:
    rows = []
    for run in runs:
        rows.append(
            {
                "scenario": run.name,
                "lease (s)": run.lease,
                "work (s)": None if run.name == "lost" else run.work,
                "handler runs": len(run.runs),
                "who ran it": ", ".join(run.runs),
                "w1 complete()": run.completes.get("w1"),
                "w2 complete()": run.completes.get("w2"),
                "heartbeats": run.beats,
                "lost noticed after (s)": None if run.lost_after is None else round(run.lost_after, 2),
            }
        )
    # Int64: whole beats, with <NA> where a scenario has no heartbeat (not 5.0 and NaN)
    return pd.DataFrame(rows).astype({"heartbeats": "Int64"}).set_index("scenario")


COLOURS = {"no_heartbeat": "#c44e52", "keepalive": "#4c72b0", "lost": "#8172b2"}


def plot_timeline(runs: list[Run]):
    """The lease deadline the database held, against time, for each run; w2's claims marked."""
    fig, ax = new_figure()
    end = max([e.t for run in runs for e in run.events] + [run.work for run in runs] + [1.0])
    ax.plot([0, end], [0, end], color="#999999", linestyle=":", linewidth=1, label="now (lease ended below)")
    for run in runs:
        colour = COLOURS.get(run.name, "black")
        for worker_id, style in (("w1", "-"), ("w2", "--")):
            samples = [(t, d) for t, d, w in run.deadline if w == worker_id]
            if samples:
                ts, ds = zip(*samples, strict=True)
                label = f"{run.name}: {worker_id}'s lease deadline"
                ax.step(ts, ds, where="post", color=colour, linestyle=style, label=label)
        for event in run.claims_by("w2"):
            ax.plot(event.t, event.t, marker="X", markersize=10, color=colour, linestyle="none")
            ax.annotate(
                f"w2 claims ({run.name})",
                (event.t, event.t),
                xytext=(6, -12),
                textcoords="offset points",
                fontsize="small",
                color=colour,
            )
        polls = run.empty_polls.get("w2", [])
        if polls and not run.claims_by("w2"):
            ax.hlines(0.05 * end, polls[0], polls[-1], color=colour, linewidth=4)
            ax.annotate(
                f"w2 polls {len(polls)}×, claims nothing ({run.name})",
                (polls[0], 0.05 * end),
                xytext=(0, 5),
                textcoords="offset points",
                fontsize="small",
                color=colour,
            )
    ax.set_xlabel("time since w1 claimed (s)")
    ax.set_ylabel("lease deadline (s)")
    ax.set_xlim(0, end * 1.05)
    ax.set_ylim(0, end * 1.15)
    ax.legend(loc="upper left", fontsize="x-small")
    return fig


def run_pair(
    lease: float,
    work: float,
    folder: Folder = None,
    queue_class: type | None = None,
    keepalive_class: type | None = None,
) -> list[Run]:
    """The two scenarios the widget compares, with the same lease and work length."""
    classes = {"queue_class": queue_class, "keepalive_class": keepalive_class}
    return [
        scenario(False, lease=lease, work=work, folder=folder, **classes),
        scenario(True, lease=lease, work=work, folder=folder, **classes),
    ]


def heartbeat_panel(
    initial: list[Run] | None = None,
    folder: Folder = None,
    queue_class: type | None = None,
    keepalive_class: type | None = None,
):
    """Sliders for the lease and the work; the button runs both scenarios (real threads,
    so it takes about as long as the work does, twice) on the classes given."""
    import ipywidgets as widgets

    lease = widgets.FloatSlider(value=1.0, min=0.2, max=3.0, step=0.1, description="lease (s)")
    work = widgets.FloatSlider(value=3.0, min=0.2, max=6.0, step=0.1, description="work (s)")
    button = widgets.Button(
        description="run both scenarios", button_style="primary", layout=widgets.Layout(width="auto")
    )
    status = widgets.HTML()
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))

    def show(runs: list[Run], note: str) -> None:
        picture.value = figure_png(plot_timeline(runs))
        table.value = html_table(summary_table(runs).reset_index())
        status.value = note  # last, so the note never describes an older chart

    def on_run(_button: object = None) -> None:
        button.disabled = True
        status.value = f"running: lease {lease.value:.1f} s, work {work.value:.1f} s …"
        try:
            runs = run_pair(lease.value, work.value, folder, queue_class, keepalive_class)
            show(runs, f"<b>lease {lease.value:.1f} s, work {work.value:.1f} s</b>")
        except KeyboardInterrupt:  # the kernel was interrupted: the worker threads have ended
            status.value = "<b>interrupted</b>: press the button to run both scenarios again"
        finally:
            button.disabled = False

    button.on_click(on_run)
    if initial:
        show(initial, "<b>the runs above</b>; move the sliders and press the button to run again")
    else:
        status.value = "<b>move the sliders and press the button to run both scenarios</b>"
    return widgets.VBox([widgets.HBox([lease, work, button]), status, table, picture])
