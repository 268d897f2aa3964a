"""Notebook 10: what to watch on a live queue, what to alert on, and putting dead jobs back.

The dashboard drains a shuffled mix of demo jobs (credit, bad, noop from labqueue.lab.demo_handlers)
with real worker processes and samples ``JobQueue.stats()`` while they run. Every sample is
read in one snapshot together with a plain full-table count, so the notebook can show that
the cheap, index-only numbers are the true ones.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..pool import WorkerPool
from ..queue import JobQueue
from .assets import DPI, FIGSIZE, figure_png, new_figure
from .demo_handlers import DEMO_HANDLERS, HANDLERS, LEDGER_TABLE

DEMO_MIX: dict[str, int] = {"credit": 40, "noop": 40, "bad": 4}
# The demo's named queues: payments apart from the rest, so the dashboard has two to show.
DEMO_QUEUES: dict[str, str] = {"credit": "payments"}
DEMO_MAX_ATTEMPTS = 3
SERIES = ("queued", "running", "ready_now", "dead")
CHART_SECONDS = 0.5  # the widget redraws its chart at most this often

# Ground truth for stats(): every row of the table, counted the obvious way (a full scan,
# which is exactly what stats() avoids; fine for a check, not for a dashboard on a big queue).
TRUE_COUNTS = """
SELECT COALESCE(SUM(state = 'queued'), 0)                                        AS queued,
       COALESCE(SUM(state = 'running'), 0)                                       AS running,
       COALESCE(SUM(state IN ('queued', 'running') AND visible_at <= :now), 0)   AS ready_now,
       COALESCE(SUM(state = 'dead'), 0)                                          AS dead,
       COALESCE(SUM(state = 'done'), 0)                                          AS done,
       COALESCE(SUM(state = 'running' AND visible_at <= :now), 0)                AS expired_leases
  FROM jobs
"""
LEDGER_ROWS = "SELECT job_id, COUNT(*) AS n FROM ledger GROUP BY job_id"
JOBS_BY_KIND = "SELECT kind, state, COUNT(*) AS n FROM jobs GROUP BY kind, state ORDER BY kind, state"
# queue_stats()'s ground truth, per named queue, by a full scan.
TRUE_BY_QUEUE = """
SELECT queue,
       SUM(state = 'queued') AS queued,
       SUM(state = 'running') AS running,
       SUM(state IN ('queued', 'running') AND visible_at <= :now) AS ready_now
  FROM jobs
 GROUP BY queue
HAVING SUM(state IN ('queued', 'running')) > 0
 ORDER BY queue
"""


def fill_demo_queue(
    path: str | os.PathLike[str],
    mix: Mapping[str, int] = DEMO_MIX,
    *,
    seed: int = 0,
    max_attempts: int = DEMO_MAX_ATTEMPTS,
    queues: Mapping[str, str] = DEMO_QUEUES,
) -> Path:
    """A fresh queue holding `mix` (kind -> count) shuffled with `seed`, each kind in its
    named queue (`queues`, else "default"), plus the ledger table the credit handler
    writes to. Returns the path, ready for the dashboard."""
    unknown = sorted(k for k in mix if k not in HANDLERS)
    if unknown:
        raise InvalidArgument(f"mix names kinds with no handler: {', '.join(map(repr, unknown))}")
    bad = {k: n for k, n in mix.items() if not isinstance(n, int) or isinstance(n, bool) or n < 0}
    if bad:
        raise InvalidArgument(f"mix counts must be whole numbers of 0 or more, got {bad!r}")
    kinds = [kind for kind, n in mix.items() for _ in range(n)]
    random.Random(seed).shuffle(kinds)
    with JobQueue(path, max_attempts=max_attempts) as q:
        q.db.execute(LEDGER_TABLE)
        for n, kind in enumerate(kinds):
            q.enqueue(kind, {"n": n}, queue=queues.get(kind, "default"))
    return Path(path)


def read_counts(q: JobQueue) -> tuple[dict[str, Any], dict[str, int]]:
    """stats() and the full-table truth, read in one snapshot at the same `now`."""
    q.db.execute("BEGIN")
    try:
        stats = q.stats()
        truth = dict(q.db.execute(TRUE_COUNTS, {"now": q.clock()}).fetchone())
    finally:
        q.db.execute("COMMIT")
    return stats, truth


JOB_COLUMNS = ["id", "kind", "state", "attempts", "max_attempts", "visible_at", "worker", "last_error"]


def jobs_table(q: JobQueue) -> Any:
    """Every job with its state and when it is next visible, relative to the queue's clock."""
    import pandas as pd

    now = q.clock()
    rows = q.db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    table = pd.DataFrame([dict(r) for r in rows], columns=JOB_COLUMNS)
    table["visible_in_s"] = (table.pop("visible_at") - now).round(1)
    live = table["state"].isin(["queued", "running"])
    table.loc[~live, "visible_in_s"] = None
    return table.set_index("id")


COUNTED = ("queued", "running", "ready_now")


def queue_table(q: JobQueue) -> Any:
    """queue_stats() per named queue beside the full-scan count, in one snapshot: what a
    dashboard shows per queue, and whether it is right."""
    import pandas as pd

    q.db.execute("BEGIN")
    try:
        per_queue = q.queue_stats()
        truth = {r["queue"]: dict(r) for r in q.db.execute(TRUE_BY_QUEUE, {"now": q.clock()})}
    finally:
        q.db.execute("COMMIT")
    rows = []
    for name in sorted(set(per_queue) | set(truth)):
        got, want = per_queue.get(name, {}), truth.get(name, {})
        rows.append(
            {
                "queue": name,
                **{k: got.get(k, 0) for k in ("queued", "running", "ready_now", "oldest_ready_age_s")},
                "agrees with SQL": all(got.get(k, 0) == want.get(k, 0) for k in COUNTED),
            }
        )
    return pd.DataFrame(rows).set_index("queue")


def compare_counts(stats: Mapping[str, Any], truth: Mapping[str, int]) -> Any:
    """stats() beside the full-table count, one row per number ("" where one side has none)."""
    import pandas as pd

    keys = [*SERIES, "oldest_ready_age_s", "done", "expired_leases"]
    rows = {k: {"stats()": stats.get(k, ""), "full-table SQL": truth.get(k, "")} for k in keys}
    return pd.DataFrame.from_dict(rows, orient="index", dtype=object)


def agrees(stats: Mapping[str, Any], truth: Mapping[str, int]) -> bool:
    return all(stats[key] == truth[key] for key in SERIES)


def alerts(stats: Mapping[str, Any], *, max_age_s: float = 60.0) -> list[str]:
    """The three things worth waking someone for, read off one stats() sample."""
    found = []
    if stats["oldest_ready_age_s"] > max_age_s:
        found.append(
            f"backlog: the oldest ready job has waited {stats['oldest_ready_age_s']} s "
            f"(limit {max_age_s} s); workers are falling behind"
        )
    if stats["dead"] > 0:
        found.append(f"dead jobs: {stats['dead']} need a person to read last_error")
    # Ready jobs are ready queued jobs plus running jobs whose lease ran out, so any excess
    # of ready_now over queued is a lower bound on expired leases.
    expired = stats["ready_now"] - stats["queued"]
    if expired > 0:
        found.append(f"expired leases: at least {expired}; workers are dying or hanging")
    return found


@dataclass(frozen=True)
class Sample:
    """One refresh of the dashboard."""

    t: float
    queued: int
    running: int
    ready_now: int
    oldest_ready_age_s: float
    dead: int
    done: int
    workers_alive: int
    agrees_with_sql: bool
    per_queue: str = ""  # "payments 3 queued / 1 running · default ..."


class Dashboard:
    """Real workers draining a queue, sampled on demand. Thread-safe: each read opens its
    own short-lived connection, so a refresher thread and button callbacks can share it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        workers: int = 2,
        lease_seconds: float = 5.0,
        idle_exit: float = 30.0,
        interval: float = 0.2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 16:
            raise InvalidArgument(f"workers must be a whole number from 1 to 16, got {workers!r}")
        for name, value in (
            ("lease_seconds", lease_seconds),
            ("idle_exit", idle_exit),
            ("interval", interval),
        ):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise InvalidArgument(f"{name} must be a number of seconds above zero, got {value!r}")
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"no queue at {self.path}; fill it first (fill_demo_queue)")
        self.workers = workers
        self.lease_seconds = lease_seconds
        self.idle_exit = idle_exit
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.pool = WorkerPool(
            self.path,
            workers,
            lease_seconds=lease_seconds,
            idle_exit=idle_exit,
            handlers=(DEMO_HANDLERS,),
            names=lambda n: f"dash-{int(self.clock() * 1000) % 100_000}-{n}",
        )
        self.samples: list[Sample] = []
        self.events: list[tuple[float, str]] = []  # (t, what the operator did), for the chart
        self.listeners: list[Callable[[Sample], None]] = []
        self._lock = threading.Lock()
        self._live: threading.Event | None = None

    def _open(self, now: float) -> JobQueue:
        return JobQueue(self.path, clock=FakeClock(now), schema=None)

    @property
    def procs(self) -> list[subprocess.Popen]:
        """The pool's worker processes (running, or ended since it last looked)."""
        return [w.proc for w in self.pool.workers]

    def alive(self) -> int:
        return self.pool.alive()

    def start_workers(self) -> int:
        """Top the pool up to `workers` live processes. Returns how many were started."""
        with self._lock:
            self.pool.reap()
            return len(self.pool.fill())

    def stop_workers(self, timeout: float = 10.0) -> None:
        """A warm stop (SIGTERM: finish the current job, then leave); a hard kill if that hangs."""
        with self._lock:
            self.pool.stop(grace=timeout)
        self.refresh()  # the panel shows the workers gone now, not at its next tick

    def refresh(self) -> Sample:
        """Read stats() and the SQL truth in one snapshot, keep the sample, tell the listeners."""
        now = self.clock()
        with self._open(now) as q:
            stats, truth = read_counts(q)
            per_queue = " · ".join(
                f"{name} {row['queued']} queued / {row['running']} running"
                for name, row in q.queue_stats().items()
            )
        sample = Sample(
            t=round(now - self.started, 2),
            queued=stats["queued"],
            running=stats["running"],
            ready_now=stats["ready_now"],
            oldest_ready_age_s=stats["oldest_ready_age_s"],
            dead=stats["dead"],
            done=truth["done"],
            workers_alive=self.alive(),
            agrees_with_sql=agrees(stats, truth),
            per_queue=per_queue,
        )
        with self._lock:
            self.samples.append(sample)
        for listener in list(self.listeners):
            listener(sample)
        return sample

    def requeue_dead(self) -> list[int]:
        """Give every dead job a fresh set of attempts (after you fixed what killed it)."""
        now = self.clock()
        with self._open(now) as q:
            ids = q.requeue_dead()
        with self._lock:
            self.events.append((round(now - self.started, 2), f"requeue_dead(): {len(ids)}"))
        return ids

    def total_jobs(self) -> int:
        with self._open(self.clock()) as q:
            return q.db.execute("SELECT COUNT(*) AS total FROM jobs").fetchone()["total"]

    def run_until_drained(self, timeout: float = 120.0, progress: bool = True) -> Sample:
        """Start the workers and sample every `interval` until no job is queued or running.
        Returns the last sample; the workers stay up (stop them with stop_workers)."""
        from tqdm.auto import tqdm

        self.start_workers()
        deadline = time.monotonic() + timeout
        with tqdm(total=self.total_jobs(), desc="jobs finished (done or dead)", disable=not progress) as bar:
            try:
                return self._sample_until_drained(bar, deadline, timeout)
            except KeyboardInterrupt:  # the learner stopped the cell: stop the workers it started too
                self.stop_workers()
                raise

    def _sample_until_drained(self, bar: Any, deadline: float, timeout: float) -> Sample:
        while True:
            sample = self.refresh()
            bar.n = sample.done + sample.dead
            bar.refresh()
            if sample.queued == 0 and sample.running == 0:
                return sample
            if time.monotonic() > deadline:
                raise TimeoutError(f"the queue was not drained after {timeout} s: {sample}")
            if self.alive() == 0:
                self.start_workers()  # they left after idle_exit; jobs came due later
            time.sleep(self.interval)

    def history(self) -> Any:
        import pandas as pd

        with self._lock:
            rows = [asdict(s) for s in self.samples]
        return pd.DataFrame(rows, columns=list(Sample.__dataclass_fields__))

    def results(self) -> Any:
        """Jobs per kind and state, and how many ledger rows each credit job left."""
        import pandas as pd

        with self._open(self.clock()) as q:
            by_kind = pd.DataFrame(
                [dict(r) for r in q.db.execute(JOBS_BY_KIND)], columns=["kind", "state", "n"]
            )
            ledger = {r["job_id"]: r["n"] for r in q.db.execute(LEDGER_ROWS)}
        return by_kind.pivot(index="kind", columns="state", values="n").fillna(0).astype(int), ledger

    def start_live(self, on_end: Callable[[], None] | None = None) -> None:
        """Refresh in a background thread every `interval` until stop_live(), or until the
        queue has settled with no worker left, when there is nothing more to watch; then
        on_end() is called."""
        if self._live is not None:
            return
        stop = self._live = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                sample = self.refresh()
                if sample.queued == 0 and sample.running == 0 and sample.workers_alive == 0:
                    break
                stop.wait(self.interval * 2)
            if self._live is stop:
                self._live = None
            if on_end is not None and not stop.is_set():
                on_end()

        threading.Thread(target=loop, name="labqueue-dashboard", daemon=True).start()

    def stop_live(self) -> None:
        if self._live is not None:
            self._live.set()
            self._live = None

    def close(self) -> None:
        self.stop_live()
        self.stop_workers()


def draw_history(
    ax: Any,
    history: Any,
    events: Sequence[tuple[float, str]] = (),
    title: str = "The queue while workers drain it",
) -> None:
    """queued, running, ready_now and dead over time, and the operator's actions, on the given axes."""
    for t, label in events:
        ax.axvline(t, color="0.5", linestyle=":", linewidth=1)
        ax.annotate(
            label,
            (t, 0.45),
            xycoords=("data", "axes fraction"),
            xytext=(3, 0),
            textcoords="offset points",
            rotation=90,
            fontsize=7,
            color="0.4",
        )
    styles = {"queued": "-", "running": "-", "ready_now": "--", "dead": "-"}
    if len(history):
        for name in SERIES:
            ax.plot(history["t"], history[name], styles[name], label=name, drawstyle="steps-post")
        ax.legend(fontsize=7, frameon=False, ncol=4, loc="upper right")
    else:
        ax.text(0.5, 0.5, "no samples yet: press Refresh or Start", ha="center", transform=ax.transAxes)
    ax.set_xlabel("time since the dashboard opened (s)")
    ax.set_ylabel("jobs")
    ax.set_title(title, fontsize=10)


def plot_history(history: Any, events: Sequence[tuple[float, str]] = ()):
    """The chart as a notebook figure."""
    fig, ax = new_figure()
    draw_history(ax, history, events)
    return fig


def history_png(history: Any, events: Sequence[tuple[float, str]] = ()) -> bytes:
    """The chart as PNG bytes for the widget. No pyplot: the live refresher draws from a
    background thread, and a bare Figure keeps that away from pyplot's shared state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    draw_history(fig.subplots(), history, events)
    return figure_png(fig)


def _status_html(sample: Sample | None, note: str = "") -> str:
    if sample is None:
        return note
    cells = "".join(
        f"<td style='padding:0 8px'><b>{getattr(sample, k)}</b><br>{k}</td>"
        for k in (*SERIES, "oldest_ready_age_s", "done", "workers_alive")
    )
    check = "stats() = SQL" if sample.agrees_with_sql else "<b>stats() differs from SQL</b>"
    queues = f"<br>per queue: {sample.per_queue}" if sample.per_queue else ""
    return f"<table><tr>{cells}</tr></table>t = {sample.t} s · {check} {note}{queues}"


def dashboard_panel(dash: Dashboard):
    """Buttons for the workers, a live toggle and requeue-dead, above the chart and the latest counts."""
    import ipywidgets as w

    start = w.Button(description="Start workers", icon="play", button_style="success")
    stop = w.Button(description="Stop workers", icon="stop")
    refresh = w.Button(description="Refresh", icon="refresh")
    requeue = w.Button(description="Requeue dead", icon="repeat", button_style="warning")
    live = w.ToggleButton(value=False, description="Live", icon="heartbeat")
    status = w.HTML()
    image = w.Image(format="png")

    drawn = [0.0]  # when the chart was last drawn: drawing costs more than sampling

    def show(sample: Sample | None, note: str = "") -> None:
        status.value = _status_html(sample, note)
        image.value = history_png(dash.history(), dash.events)
        drawn[0] = time.monotonic()

    def on_sample(sample: Sample) -> None:
        settled = sample.queued == 0 and sample.running == 0
        if settled or time.monotonic() - drawn[0] >= CHART_SECONDS:
            show(sample)
        else:
            status.value = _status_html(sample)

    def on_start(_: Any) -> None:
        n = dash.start_workers()
        live.value = True
        status.value = _status_html(dash.samples[-1] if dash.samples else None, f"· started {n} worker(s)")

    def on_stop(_: Any) -> None:
        dash.stop_workers()
        live.value = False
        show(dash.refresh(), "· workers stopped")

    def on_refresh(_: Any) -> None:
        dash.refresh()

    def on_requeue(_: Any) -> None:
        ids = dash.requeue_dead()
        show(dash.refresh(), f"· requeued {len(ids)} dead job(s)")

    def on_live_end() -> None:
        live.value = False

    def on_live(change: dict) -> None:
        dash.start_live(on_live_end) if change["new"] else dash.stop_live()

    start.on_click(on_start)
    stop.on_click(on_stop)
    refresh.on_click(on_refresh)
    requeue.on_click(on_requeue)
    live.observe(on_live, names="value")
    dash.listeners.append(on_sample)
    show(dash.samples[-1] if dash.samples else dash.refresh())
    box = w.VBox([w.HBox([start, stop, live, refresh, requeue]), status, image])
    box.dashboard = dash
    box.buttons = {"start": start, "stop": stop, "refresh": refresh, "requeue": requeue}
    box.live, box.status, box.image = live, status, image
    return box


# -- from the command line: metrics, health, pausing a queue ---------------------------------


@dataclass
class CommandRun:
    """One `labqueue` command, run in this process: its exit code and what it printed."""

    argv: list[str]
    exit_code: int
    out: str
    err: str

    def show(self) -> None:
        """The command as typed in this folder (paths relative to it), its exit code, its output."""
        here = f"{Path.cwd()}{os.sep}"
        print("$ labqueue " + " ".join(self.argv).replace(here, ""), f"(exit code {self.exit_code})")
        print((self.out + self.err).replace(here, "").rstrip())


def command(*argv: str) -> CommandRun:
    """Run `labqueue ARGV...` as a shell would, capturing its output (a notebook cell
    cannot read a subprocess's terminal as nicely, and the command is the same code)."""
    import contextlib
    import io

    from .. import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # a usage error exits through argparse
            code = int(exc.code or 0)
    return CommandRun(list(argv), code, out.getvalue(), err.getvalue())


def metric_lines(text: str, *names: str) -> list[str]:
    """The sample lines of the named metrics in a Prometheus text exposition."""
    return [line for line in text.splitlines() if line.split("{")[0].split(" ")[0] in names]


@dataclass(frozen=True)
class PauseDemo:
    """What a worker did with a paused queue, then after resume: done jobs per queue."""

    paused_run: dict[str, int]
    resumed_run: dict[str, int]
    pause: CommandRun
    resume: CommandRun


def pause_demo(path: str | os.PathLike[str], *, per_queue: int = 5) -> PauseDemo:
    """`labqueue pause --queue payments`, a worker drains the file, `labqueue resume`, the
    worker drains it again: the paused queue's jobs wait, untouched, then run."""
    from .. import worker

    path = str(path)
    with JobQueue(path) as q:
        q.enqueue_many("noop", [{"n": i} for i in range(per_queue)], queue="payments")
        q.enqueue_many("noop", [{"n": i} for i in range(per_queue)])

    def drain() -> dict[str, int]:
        worker.run(path, "ops-demo", 30.0, idle_exit=0, handlers=HANDLERS, wake=False)
        with JobQueue(path) as q:
            return {name: len(q.jobs(state="done", queue=name)) for name in ("default", "payments")}

    paused = command("pause", path, "--queue", "payments", "--reason", "card processor down")
    first = drain()
    resumed = command("resume", path, "--queue", "payments")
    return PauseDemo(first, drain(), paused, resumed)
