"""Notebook 16, part 2: periodic jobs, exactly one per period however many schedulers tick.

JobQueue.every() keeps no state of its own: each period has one dedupe key, and the first
INSERT under it wins. The walk shows the rule on a FakeClock; the race runs several
scheduler threads, each with its own connection, ticking as fast as they like in real time,
with one of them crashing and all of them down for a stretch, and records every tick.
"""

from __future__ import annotations

import html
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..pool import WorkerPool, exit_reason
from ..queue import JobQueue, period_start
from ..settings import WorkerSettings
from .assets import figure_png, new_figure
from .demo_handlers import DEMO_HANDLERS
from .scratch import db_path
from .walks import Folder

KIND = "report"


def schedule_walk(folder: Folder = None) -> list[tuple[float, str, int | None]]:
    """Three schedulers (a, b, c) of one 60 s schedule on a FakeClock, each with its own
    connection. Prints every tick and what it did; returns (time, scheduler, job id or None)."""
    clock = FakeClock(1200.0)
    path = db_path("schedule_walk", folder)
    ticks: list[tuple[float, str, int | None]] = []
    with (
        JobQueue(path, clock=clock, wake=False) as a,
        JobQueue(path, clock=clock, wake=False) as b,
        JobQueue(path, clock=clock, wake=False) as c,
    ):
        schedulers = {"a": a, "b": b, "c": c}
        plan = [(1200.0, "a"), (1200.0, "b"), (1231.5, "c"), (1259.9, "b"), (1260.0, "c"), (1261.0, "a")]
        plan += [(1290.0, "b"), (1530.0, "c"), (1531.0, "a")]
        for at, name in plan:
            if at == 1530.0:
                print("          (every scheduler down from t=1290 to t=1530: periods 1320 to 1440 pass)")
            clock.now = at
            job_id = schedulers[name].every(KIND, 60)
            ticks.append((at, name, job_id))
            said = f"job {job_id} created" if job_id is not None else "nothing: this period has its job"
            print(f"t={at:<7g} {name} ticks (period {period_start(at, 60):g}): {said}")
        print("jobs:", [(r.id, r.dedupe_key) for r in a.jobs()])
    return ticks


# -- the race, in real time --------------------------------------------------------------------


@dataclass(frozen=True)
class RaceConfig:
    """A race of `schedulers` threads on one schedule of `period` seconds, for `seconds`.
    Each ticks every `tick_every` s (jittered by its own seed). `crash_at` (s from the start)
    ends scheduler s1 for good; every scheduler is down during `downtime` (start, end)."""

    schedulers: int = 4
    period: float = 0.2
    seconds: float = 3.0
    tick_every: float = 0.04
    crash_at: float | None = 1.0
    downtime: tuple[float, float] | None = (1.5, 2.3)
    seed: int = 15

    def __post_init__(self) -> None:
        n = self.schedulers
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 16:
            raise InvalidArgument(f"schedulers must be a whole number from 1 to 16, got {n!r}")
        for name in ("period", "seconds", "tick_every"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.01 <= value <= 60:
                raise InvalidArgument(f"{name} must be a number of seconds from 0.01 to 60, got {value!r}")
        if self.downtime is not None and not 0 <= self.downtime[0] < self.downtime[1]:
            raise InvalidArgument(f"downtime must be (start, end), 0 <= start < end, got {self.downtime!r}")


@dataclass
class RaceResult:
    config: RaceConfig
    started: float  # time.time() at the start: the periods are the clock's multiples of `period`
    ticks: Any  # DataFrame: scheduler, t (s), period (start, s since the epoch), job_id
    jobs: Any  # DataFrame: id, dedupe_key, period, created (s from the start)
    crashed: dict[str, float] = field(default_factory=dict)

    def periods(self) -> Any:
        """One row per period the run touched: its start (s from the run's start), the tick
        attempts in it, the jobs created for it, and whether every scheduler was down."""
        import pandas as pd

        period = self.config.period
        first = period_start(self.started, period)
        count = int((self.started + self.config.seconds - first) // period) + 1
        starts = [first + k * period for k in range(count)]
        ticks = self.ticks.groupby("period").size()
        jobs = self.jobs.groupby("period").size()
        down = self.config.downtime
        rows = []
        for k, start in enumerate(starts):
            key = _period_key(start)
            offset = start - self.started
            whole_down = down is not None and down[0] <= offset and offset + period <= down[1]
            rows.append(
                {
                    "period": k,
                    "starts at (s)": round(offset, 3),
                    "tick attempts": int(ticks.get(key, 0)),
                    "jobs": int(jobs.get(key, 0)),
                    "all down": whole_down,
                }
            )
        return pd.DataFrame(rows).set_index("period")

    def summary(self) -> str:
        per = self.periods()
        ticked = per[per["tick attempts"] > 0]
        one = int((ticked["jobs"] == 1).sum())
        return (
            f"{self.config.schedulers} schedulers, period {self.config.period:g} s, "
            f"{self.config.seconds:g} s: {len(self.ticks)} tick attempts, {len(self.jobs)} jobs; "
            f"{len(ticked)} periods had a tick and {one} of them exactly one job; "
            f"{int((per['tick attempts'] == 0).sum())} periods had no tick and "
            f"{int(per.loc[per['tick attempts'] == 0, 'jobs'].sum())} jobs"
        )


def _period_key(start: float) -> float:
    """Period starts compared as numbers: rounded, as floor(t / p) * p can differ in the last bits."""
    return round(start, 6)


def _period_of(key: str | None) -> float | None:
    """The period start in a schedule's dedupe key "every:<name>:<start>" (None for another key)."""
    if not key or not key.startswith("every:"):
        return None
    return _period_key(float(key.rsplit(":", 1)[1]))


class RecordingClock:
    """time.time(), remembering its first reading since the last reset(): the reading
    every() took its period from."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self) -> float:
        now = time.time()
        if self.first is None:
            self.first = now
        return now

    def reset(self) -> None:
        self.first = None


def race(
    config: RaceConfig = RaceConfig(),
    *,
    folder: Folder = None,
    progress: bool = True,
    tick: Callable[[JobQueue, RaceConfig], int | None] | None = None,
) -> RaceResult:
    """Run the schedulers as threads against one fresh queue file and record every tick.
    `tick(q, config)` is one tick (default: q.every(KIND, config.period))."""
    import pandas as pd

    path = db_path("schedule_race", folder)
    JobQueue(path, wake=False).close()
    do_tick = tick or (lambda q, c: q.every(KIND, c.period))
    names = [f"s{i + 1}" for i in range(config.schedulers)]
    records: list[tuple[str, float, float, int | None]] = []
    crashed: dict[str, float] = {}
    lock = threading.Lock()
    gate = threading.Barrier(config.schedulers + 1)
    errors: list[BaseException] = []
    started = [0.0]

    def scheduler(index: int, name: str) -> None:
        rng = random.Random(config.seed * 100 + index)
        clock = RecordingClock()
        try:
            with JobQueue(path, clock=clock, wake=False) as q:
                gate.wait()
                t0 = started[0]
                while (now := time.time() - t0) < config.seconds:
                    if config.crash_at is not None and index == 0 and now >= config.crash_at:
                        crashed[name] = now
                        return
                    if config.downtime is not None and config.downtime[0] <= now < config.downtime[1]:
                        time.sleep(config.downtime[1] - now)
                        continue
                    clock.reset()
                    job_id = do_tick(q, config)
                    at = clock.first if clock.first is not None else time.time()
                    with lock:
                        records.append((name, at - t0, _period_key(period_start(at, config.period)), job_id))
                    time.sleep(rng.uniform(0.5, 1.5) * config.tick_every)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            gate.abort()  # a scheduler that never reached the gate must not leave the others waiting

    threads = [threading.Thread(target=scheduler, args=(i, n), daemon=True) for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    started[0] = time.time()
    try:
        gate.wait(timeout=120)
    except threading.BrokenBarrierError:
        raise errors[0] if errors else RuntimeError("the schedulers did not all start within 120 s") from None
    _follow(threads, config.seconds, progress)
    if errors:
        raise errors[0]
    ticks = pd.DataFrame(records, columns=["scheduler", "t (s)", "period", "job_id"])
    ticks = ticks.sort_values("t (s)", kind="stable").reset_index(drop=True)
    ticks["job_id"] = ticks["job_id"].astype("Int64")
    with JobQueue(path, wake=False) as q:
        rows = [(r.id, r.dedupe_key, r.created_at - started[0]) for r in q.jobs(kind=KIND)]
    jobs = pd.DataFrame(rows, columns=["id", "dedupe_key", "created (s)"])
    jobs["period"] = [_period_of(key) for key in jobs["dedupe_key"]]
    return RaceResult(config, started[0], ticks, jobs, crashed)


def _follow(threads: list[threading.Thread], seconds: float, progress: bool) -> None:
    """Wait for the threads, with a progress bar in seconds when asked."""
    if not progress:
        for thread in threads:
            thread.join()
        return
    from tqdm.auto import tqdm

    begun = time.monotonic()
    with tqdm(total=round(seconds, 1), unit="s", desc="schedulers ticking") as bar:
        while any(t.is_alive() for t in threads):
            time.sleep(0.1)
            bar.n = round(min(time.monotonic() - begun, seconds), 1)
            bar.refresh()
        bar.n = round(seconds, 1)
        bar.refresh()


# -- the same schedule inside a pool of real workers ---------------------------------------


def pool_schedule(workers: int = 3, period: float = 0.5, seconds: float = 3.0, folder: Folder = None) -> Any:
    """Start `workers` worker processes (labqueue.pool.WorkerPool), each told
    `--every noop=<period>`, let them run for `seconds` from the first job a scheduler
    made, stop them, and return the jobs their schedulers made: one row per job, with
    its period and who ran it. (Counting from the first job, not from the start, keeps a
    loaded machine's slow process start out of the run.)"""
    import pandas as pd

    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 8:
        raise InvalidArgument(f"workers must be a whole number from 1 to 8, got {workers!r}")
    path = db_path("schedule_pool", folder)
    JobQueue(path, wake=False).close()
    settings = WorkerSettings(handlers=(DEMO_HANDLERS,), every=(f"noop={period:g}",))
    started = time.time()
    with WorkerPool(path, workers, lease_seconds=5.0, idle_exit=None, settings=settings) as pool:
        pool.fill()
        _wait_for_a_job(path, pool)
        time.sleep(seconds)
        pool.stop()
    with JobQueue(path, wake=False) as q:
        rows = [
            {
                "job": r.id,
                "dedupe_key": r.dedupe_key,
                "period starts at (s)": round(float(r.dedupe_key.rsplit(":", 1)[1]) - started, 3),
                "enqueued at (s)": round(r.created_at - started, 3),
                "state": r.state,
                "run by": r.worker,
            }
            for r in q.jobs(kind="noop")
        ]
    return pd.DataFrame(rows).set_index("job")


def _wait_for_a_job(path: Path, pool: WorkerPool, timeout: float = 60.0) -> None:
    """Until a scheduler has made a job; a worker that left is an error, with its exit."""
    deadline = time.monotonic() + timeout
    with JobQueue(path, wake=False) as q:
        while not q.jobs(kind="noop"):
            for w in pool.reap():
                raise RuntimeError(f"worker {w.name} left before its first tick: {exit_reason(w.returncode)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no worker ticked its schedule within {timeout:g} s")
            time.sleep(0.02)


def plot_race(result: RaceResult):
    """A lane per scheduler: every tick attempt (grey), the ticks that created the period's job
    (a large dot), a crash (x); the top lane has one mark per job. Faint lines are period
    starts, the shaded stretch is the downtime."""
    fig, ax = new_figure()
    config = result.config
    names = [f"s{i + 1}" for i in range(config.schedulers)]
    lane = {name: i for i, name in enumerate(names)}
    top = len(names)
    for _, row in result.periods().iterrows():
        if row["starts at (s)"] >= 0:
            ax.axvline(row["starts at (s)"], color="#dddddd", linewidth=0.8, zorder=0)
    if config.downtime is not None:
        ax.axvspan(*config.downtime, color="#f2d7d5", zorder=0, label="every scheduler down")
    ticks = result.ticks
    lost = ticks[ticks["job_id"].isna()]
    won = ticks[ticks["job_id"].notna()]
    ax.scatter(
        lost["t (s)"],
        [lane[n] for n in lost["scheduler"]],
        marker="|",
        s=60,
        color="#999999",
        label="tick: period already had its job",
    )
    ax.scatter(
        won["t (s)"],
        [lane[n] for n in won["scheduler"]],
        s=40,
        color="#4c72b0",
        zorder=3,
        label="tick that created the job",
    )
    for name, at in result.crashed.items():
        ax.plot(at, lane[name], "x", color="#c44e52", markersize=10, markeredgewidth=2)
        ax.annotate("crashed", (at, lane[name]), xytext=(6, -12), textcoords="offset points", fontsize=8)
    ax.scatter(
        result.jobs["created (s)"],
        [top] * len(result.jobs),
        marker="s",
        s=30,
        color="#55a868",
        label="job enqueued",
    )
    ax.set_yticks([*range(top), top])
    ax.set_yticklabels([*names, "jobs"])
    ax.set_ylim(-0.7, top + 0.7)
    ax.set_xlim(0, config.seconds)
    ax.set_xlabel(f"time since the start (s); grey lines: period starts, every {config.period:g} s")
    ax.set_ylabel("scheduler")
    ax.set_title(f"{len(ticks)} tick attempts, {len(result.jobs)} jobs", fontsize="medium")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, fontsize="x-small", frameon=False)
    return fig


def race_panel(initial: RaceResult | None = None, *, folder: Folder = None):
    """Sliders for the number of schedulers, the period and the run's length; Race schedulers
    runs it again and redraws the timeline."""
    import ipywidgets as widgets

    base = initial.config if initial is not None else RaceConfig()
    style = {"description_width": "initial"}
    count = widgets.IntSlider(value=base.schedulers, min=1, max=12, description="schedulers", style=style)
    period = widgets.FloatSlider(
        value=base.period, min=0.1, max=1.0, step=0.05, description="period (s)", style=style
    )
    length = widgets.FloatSlider(
        value=base.seconds, min=1.0, max=10.0, step=0.5, description="run (s)", style=style
    )
    go = widgets.Button(description="Race schedulers", button_style="primary", icon="play")
    status = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))

    def show(result: RaceResult, prefix: str = "") -> None:
        status.value = f"{prefix}{result.summary()}"
        picture.value = figure_png(plot_race(result))

    def on_run(_: Any) -> None:
        go.disabled = True
        status.value = "racing..."
        try:
            seconds = length.value
            config = replace(
                base,
                schedulers=count.value,
                period=period.value,
                seconds=seconds,
                crash_at=None if count.value < 2 else round(seconds / 3, 2),
                downtime=(round(seconds / 2, 2), round(seconds / 2 + 4 * period.value, 2)),
            )
            show(race(config, folder=folder, progress=False))
        except Exception as exc:
            status.value = f"<b style='color:#b00'>failed:</b> {html.escape(f'{type(exc).__name__}: {exc}')}"
        finally:
            go.disabled = False

    go.on_click(on_run)
    if initial is not None:
        show(initial, "Last run: ")
    return widgets.VBox([widgets.HBox([count, period, length, go]), status, picture])
