"""Notebook 14: retention. Finished jobs purged in short windows, and the file's space given back.

A producer and a worker run in-process on a FakeClock, a simulated half hour in a few
seconds of real time: every simulated second the producer enqueues RATE jobs and the
worker claims them one at a time (each claim timed with a real clock) until nothing is
ready. One run keeps every finished row; the other purges done jobs older than the
retention period once a minute. Both sample the file's size and the claim's time every
simulated minute. Then the no-retention file, a queue that ran without any purge, gets
its first purge at several batch sizes, timing how long each window holds the write lock,
and shows where the freed pages go: to the file's free list, and with reclaim_space() back
to the file system.
"""

from __future__ import annotations

import html
import os
import sqlite3
import statistics
import time
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..clock import FakeClock
from ..drivers.sqlite import sql
from ..errors import InvalidArgument
from ..queue import Job, JobQueue, Purged
from .assets import figure_png, new_figure
from .scratch import db_path
from .tables import html_table
from .walks import Folder

START = 1_000_000.0  # the fake clock's start, in seconds
RATE = 10  # jobs the producer enqueues per simulated second
MINUTES = 30  # how long a run lasts, in simulated minutes
RETENTION = 300.0  # done jobs older than this many seconds are purged
PURGE_EVERY = 60  # seconds between two purges
BATCH = 1000  # ids per purge window: the package's default
BATCH_SIZES = (100, 1000, 10_000)
BODY = "x" * 200  # each job's payload carries this text, so a row is a realistic ~300 bytes
DEAD_EVERY = 200  # every 200th job fails for good: dead, and kept
SLOW_EVERY = 97  # every 97th job runs for SLOW_SECONDS: running across purges
SLOW_SECONDS = 45
SCHEDULED_DELAY = 900.0  # one job a minute is scheduled this far ahead: queued across purges
LEASE = 120.0
LIVE_STATES = ("queued", "running", "dead", "cancelled")  # what a purge of done jobs must keep
WORKER = "worker-1"

# Read the file's true size on disk: copy the write-ahead log into the main file first
# and empty the log, so that the main file holds every page.
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"
# A checkpoint copies the write-ahead log into the main file. By default the connection
# whose commit takes the log past 1,000 pages runs one, right after it has released the
# write lock; a timer around that commit (purge()'s, or ours around a claim) would count
# it as if the lock were held. So the timed connection here runs none of its own, and
# the lab checkpoints once a simulated minute, outside every timed step.
NO_AUTO_CHECKPOINT = "PRAGMA wal_autocheckpoint = 0"
MINUTE_CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"
REPEATS = 3  # each backlog purge runs this many times, on fresh copies: the medians are shown
EXPLAIN = "EXPLAIN QUERY PLAN "

TIME_MIN = "time (simulated minutes)"
SIZE_MB = "file size (MB)"
CLAIM_MS = "claim, median (ms)"


@dataclass(frozen=True)
class Setup:
    """One run: how long, how busy, and the retention (None: keep every finished row)."""

    minutes: int = MINUTES
    rate: int = RATE
    retention: float | None = RETENTION
    batch: int = BATCH
    purge_every: int = PURGE_EVERY

    @property
    def label(self) -> str:
        if self.retention is None:
            return "no retention"
        return f"retention {self.retention:.0f} s, batch {self.batch:,}"

    def checked(self) -> Setup:
        _whole("minutes", self.minutes, 3, 24 * 60)
        _whole("rate", self.rate, 1, 1000)
        _whole("batch", self.batch, 1, 100_000)
        _whole("purge_every", self.purge_every, 1, 3600)
        if self.retention is not None:
            _number("retention", self.retention, 0, 7 * 86_400)
        return self


@dataclass
class Run:
    """What one run saw: a sample per simulated minute, every purge, and the end state."""

    setup: Setup
    path: Path
    samples: pd.DataFrame  # per minute: size, free pages, rows, claim median
    purges: pd.DataFrame  # per purge: removed, windows, longest hold, live rows kept
    counts: dict[str, int]  # jobs per state at the end
    seconds: float  # real time the run took

    @property
    def end_bytes(self) -> int:
        return int(self.samples["file bytes"].iloc[-1])

    def growth(self, start: float, end: float = 1.0) -> int:
        """Bytes the file grew between two fractions of the run (0.0 to 1.0)."""
        sizes = self.samples["file bytes"]
        first = sizes.iloc[max(0, round(start * len(sizes)) - 1)]
        last = sizes.iloc[max(0, round(end * len(sizes)) - 1)]
        return int(last - first)

    def claim_ms(self, start: float = 0.0, end: float = 1.0) -> float:
        """The median of the per-minute claim medians between two fractions of the run."""
        claims = self.samples[CLAIM_MS]
        return float(claims.iloc[round(start * len(claims)) : max(1, round(end * len(claims)))].median())

    @property
    def longest_hold_ms(self) -> float:
        return float(self.purges["longest hold (ms)"].max()) if len(self.purges) else 0.0

    @property
    def live_kept(self) -> bool:
        """No purge changed the number of queued, running, dead or cancelled jobs."""
        return bool(self.purges["live rows kept"].all()) if len(self.purges) else True


def _whole(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return value


def _number(name: str, value: object, low: float, high: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a number from {low:,} to {high:,}, got {value!r}")
    return float(value)


def _live(q: JobQueue) -> dict[str, int]:
    counts = q.counts()
    return {state: counts[state] for state in LIVE_STATES}


def _file_bytes(q: JobQueue) -> int:
    """The database's size as the main file holds it once the log is checkpointed."""
    space = q.space()
    return space["page_count"] * space["page_size"]


def _disk_bytes(q: JobQueue) -> int:
    """The main file's size on disk right now, after a checkpoint."""
    q.db.execute(CHECKPOINT).fetchall()
    return os.path.getsize(q.path)


# -- the run: a producer and a worker on a fake clock ---------------------------------------


def simulate(
    setup: Setup = Setup(), name: str | None = None, folder: Folder = None, progress: bool = True
) -> Run:
    """Run the producer and the worker for setup.minutes simulated minutes on a fresh file.

    Each simulated second: RATE jobs in one enqueue_many; once a minute, a job scheduled
    SCHEDULED_DELAY ahead; then the worker claims one job at a time until none is ready,
    completing it, failing it for good (every DEAD_EVERY-th id) or keeping it running for
    SLOW_SECONDS (every SLOW_EVERY-th id). With a retention, purge() runs every
    setup.purge_every seconds, and the live states are counted before and after it."""
    from tqdm.auto import tqdm

    setup = setup.checked()
    path = db_path(name or ("no_retention" if setup.retention is None else "retention"), folder)
    clock = FakeClock(START)
    samples: list[dict[str, float]] = []
    purges: list[dict[str, Any]] = []
    claims: list[float] = []  # this minute's claim times, in ms
    slow: list[tuple[float, Job]] = []
    began = time.perf_counter()
    seconds = setup.minutes * 60
    with (
        JobQueue(path, clock=clock, lease_seconds=LEASE, max_attempts=1, wake=False) as q,
        tqdm(total=setup.minutes, desc=setup.label, unit="sim min", disable=not progress) as bar,
    ):
        q.db.execute(NO_AUTO_CHECKPOINT).fetchall()
        produced = 0
        for second in range(1, seconds + 1):
            q.enqueue_many("email", [{"n": produced + i, "body": BODY} for i in range(setup.rate)])
            produced += setup.rate
            if second % 60 == 1:
                q.enqueue("report", {"minute": second // 60, "body": BODY}, delay=SCHEDULED_DELAY)
            while True:
                started = time.perf_counter()
                got = q.claim(WORKER)
                took = (time.perf_counter() - started) * 1000
                if not got:
                    break
                claims.append(took)
                (job,) = got
                if job.id % DEAD_EVERY == 0:
                    q.fail(job, "ValueError: no such mailbox", retry=False)
                elif job.id % SLOW_EVERY == 0:
                    slow.append((clock.now + SLOW_SECONDS, job))
                else:
                    q.complete(job)
            for _due, job in [s for s in slow if s[0] <= clock.now]:
                q.complete(job)
            slow = [s for s in slow if s[0] > clock.now]
            if setup.retention is not None and second % setup.purge_every == 0:
                purges.append(_purge_once(q, setup, second))
            if second % 60 == 0:
                q.db.execute(MINUTE_CHECKPOINT).fetchall()
                space = q.space()
                samples.append(
                    {
                        TIME_MIN: second / 60,
                        "file bytes": space["page_count"] * space["page_size"],
                        SIZE_MB: space["page_count"] * space["page_size"] / 1e6,
                        "free pages": space["freelist_count"],
                        CLAIM_MS: statistics.median(claims) if claims else float("nan"),
                        "claims": len(claims),
                    }
                )
                claims = []
                bar.update(1)
            clock.advance(1.0)
        counts = q.counts()
    purge_columns = ["time (s)", "removed", "windows", "longest hold (ms)", "live rows kept"]
    return Run(
        setup,
        path,
        pd.DataFrame(samples),
        pd.DataFrame(purges, columns=purge_columns),
        counts,
        time.perf_counter() - began,
    )


def _purge_once(q: JobQueue, setup: Setup, second: int) -> dict[str, Any]:
    assert setup.retention is not None
    before = _live(q)
    done: Purged = q.purge(setup.retention, batch=setup.batch)
    return {
        "time (s)": second,
        "removed": done.removed,
        "windows": done.batches,
        "longest hold (ms)": done.longest_hold_s * 1000,
        "live rows kept": _live(q) == before,
    }


def compare(*runs: Run) -> pd.DataFrame:
    """One row per run: the file at the end, how much it grew in the last third, the claim."""
    rows = []
    for run in runs:
        rows.append(
            {
                "run": run.setup.label,
                "done rows at the end": run.counts["done"],
                "dead rows at the end": run.counts["dead"],
                "file at the end (MB)": round(run.end_bytes / 1e6, 2),
                "growth, last third (MB)": round(run.growth(2 / 3) / 1e6, 3),
                "claim, median (ms)": round(run.claim_ms(), 3),
                "purges": len(run.purges),
                "longest hold (ms)": round(run.longest_hold_ms, 2) if len(run.purges) else None,
            }
        )
    return pd.DataFrame(rows).set_index("run")


COLOURS = {"no retention": "#c44e52", "retention": "#4c72b0"}


def _colour(run: Run) -> str:
    return COLOURS["no retention"] if run.setup.retention is None else COLOURS["retention"]


def plot_runs(*runs: Run):
    """File size (top) and the claim's median time (bottom) per simulated minute."""
    fig, (size, claim) = new_figure(2, 1, tall=True, sharex=True)
    for run in runs:
        colour = _colour(run)
        size.plot(run.samples[TIME_MIN], run.samples[SIZE_MB], "-", color=colour, label=run.setup.label)
        style = "-" if run.setup.retention is None else "--"
        claim.plot(run.samples[TIME_MIN], run.samples[CLAIM_MS], style, color=colour, label=run.setup.label)
    size.set_ylabel(SIZE_MB)
    size.set_ylim(bottom=0)
    size.set_title(f"{runs[0].setup.rate} jobs/s for {runs[0].setup.minutes} simulated minutes")
    size.legend(loc="upper left", fontsize="small")
    claim.set_ylabel(CLAIM_MS)
    claim.set_ylim(bottom=0, top=max(0.2, 2 * max(float(r.samples[CLAIM_MS].max()) for r in runs)))
    claim.set_xlabel(TIME_MIN)
    return fig


# -- a big queue's first purge: the lock per batch size ------------------------------------


def copy_queue(source: Path, name: str, folder: Folder = None) -> Path:
    """A copy of a queue's file under a fresh scratch name: SQLite's backup, page for page
    (its free pages too, so the copy is as big), read on a connection of its own, so what is
    still in the write-ahead log is copied as well. Never a file copy from Python: POSIX
    locks belong to a process and a file, and closing any descriptor of the file drops every
    lock this process holds on it, SQLite's own included ("How To Corrupt An SQLite Database
    File", section 2.2), so a kernel still holding the queue would lose its locks and, beside
    another connection that closes, its committed pages. Do not bring back shutil.copyfile."""
    path = db_path(name, folder)
    uri = Path(source).absolute().as_uri() + "?mode=rw"  # an existing file only, never a new one
    with closing(sqlite3.connect(uri, uri=True)) as original, closing(sqlite3.connect(path)) as copy:
        original.backup(copy)
    return path


def _open_at_end(path: Path, run: Run) -> JobQueue:
    """The copy on a fake clock that reads the run's last second."""
    end = START + run.setup.minutes * 60
    return JobQueue(path, clock=FakeClock(end), lease_seconds=LEASE, max_attempts=1, wake=False)


def backlog_purges(
    run: Run,
    batches: tuple[int, ...] = BATCH_SIZES,
    retention: float = RETENTION,
    folder: Folder = None,
    repeats: int = REPEATS,
) -> pd.DataFrame:
    """Retention switched on for a queue that never had it: on a fresh copy of `run`'s
    file, one purge(retention, batch=...) of its whole backlog, `repeats` times per batch
    size. Per batch size: rows removed, windows (write transactions), and the medians over
    the repeats of the longest window's hold on the write lock, of the mean window and of
    the whole purge; and whether the live rows were kept every time. The purging
    connection runs no checkpoint of its own (see NO_AUTO_CHECKPOINT)."""
    _number("retention", retention, 0, 7 * 86_400)
    _whole("repeats", repeats, 1, 20)
    rows = []
    for batch in batches:
        _whole("batch", batch, 1, 100_000)
        longest, whole, kept = [], [], []
        for _ in range(repeats):
            with _open_at_end(copy_queue(run.path, f"backlog_{batch}", folder), run) as q:
                q.db.execute(NO_AUTO_CHECKPOINT).fetchall()
                before = _live(q)
                started = time.perf_counter()
                done = q.purge(retention, batch=batch)
                whole.append((time.perf_counter() - started) * 1000)
                longest.append(done.longest_hold_s * 1000)
                kept.append(_live(q) == before)
        rows.append(
            {
                "batch": batch,
                "removed": done.removed,
                "windows": done.batches,
                "longest hold (ms)": round(statistics.median(longest), 3),
                "mean window (ms)": round(statistics.median(whole) / max(1, done.batches), 3),
                "whole purge (ms)": round(statistics.median(whole), 1),
                "live rows kept": all(kept),
            }
        )
    return pd.DataFrame(rows).set_index("batch")


def plot_holds(table: pd.DataFrame):
    """By batch size: the longest window's hold on the write lock, the mean window (the
    whole purge over its windows) and the whole purge."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, ax = new_figure()
    batches = list(table.index)
    ax.plot(batches, table["whole purge (ms)"], "s--", color="#999999", label="whole purge (every window)")
    ax.plot(batches, table["longest hold (ms)"], "o-", color="#c44e52", label="longest window")
    ax.plot(batches, table["mean window (ms)"], "o-", color="#4c72b0", label="mean window")
    for batch, row in table.iterrows():
        where = (batch, row["mean window (ms)"])
        note = f"{row['windows']:,} windows"
        ax.annotate(note, where, xytext=(0, -14), textcoords="offset points", ha="center", fontsize="small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(batches, [f"{b:,}" for b in batches])
    ax.set_xlim(batches[0] / 2, batches[-1] * 2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    low = float(table["mean window (ms)"].min())
    ax.set_ylim(low / 4, float(table["whole purge (ms)"].max()) * 2)
    ax.set_xlabel("batch (ids per write transaction)")
    ax.set_ylabel("time (ms)")
    ax.set_title(
        f"first purge of {int(table['removed'].iloc[0]):,} done rows, one write transaction per window"
    )
    ax.legend(loc="lower right", fontsize="small")
    return fig


# -- where the freed pages go -------------------------------------------------------------


def space_steps(run: Run, retention: float = RETENTION, folder: Folder = None) -> pd.DataFrame:
    """On a copy of `run`'s file: its pages and its size on disk as it ran, after one
    purge (the pages go to the free list, the file stays as big), and after
    reclaim_space() (the free pages go back to the file system)."""
    rows = []
    with _open_at_end(copy_queue(run.path, "space", folder), run) as q:

        def step(what: str) -> None:
            space = q.space()
            rows.append(
                {
                    "step": what,
                    "pages": space["page_count"],
                    "free pages": space["freelist_count"],
                    "file on disk (bytes)": _disk_bytes(q),
                }
            )

        step("as it ran, no retention")
        removed = q.purge(retention).removed
        step(f"purge(older_than={retention:.0f}): {removed:,} rows")
        freed = q.reclaim_space()
        step(f"reclaim_space(): {freed:,} pages")
    return pd.DataFrame(rows).set_index("step")


def purge_plan(folder: Folder = None) -> list[str]:
    """SQLite's plan for the purge's DELETE, on a queue made with the package's schema."""
    params = {"after": 0, "batch": BATCH, "states": '["done"]', "before": START}
    with JobQueue(db_path("retention_plan", folder), wake=False) as q:
        return [row[3] for row in q.db.execute(EXPLAIN + sql.PURGE, params)]


# -- the rules on a small queue ------------------------------------------------------------

WALK_LINE = "job {id} {kind:<7} {state:<9} finished_at={finished}"
WALK_JOBS = "SELECT id, kind, state, finished_at FROM jobs ORDER BY id"
WALK_ARCHIVE = "SELECT id, kind, state, finished_at FROM jobs_archive ORDER BY id"


def _walk_rows(q: JobQueue, statement: str = WALK_JOBS) -> list[str]:
    rows = q.db.execute(statement).fetchall()
    return [
        WALK_LINE.format(
            id=r["id"],
            kind=r["kind"],
            state=r["state"],
            finished="-" if r["finished_at"] is None else f"{r['finished_at']:.0f}",
        )
        for r in rows
    ]


def walk(folder: Folder = None) -> dict[str, Any]:
    """Seven jobs on a fake clock, one purge of the defaults, one naming every finished
    state with archive=True, and one asking for a live state. Prints what each did and
    returns the ids left, the ids archived and the refusal."""
    clock = FakeClock(0.0)
    path = db_path("retention_walk", folder)
    with JobQueue(path, clock=clock, lease_seconds=7200, max_attempts=1, wake=False) as q:
        q.enqueue("email", {"n": 1})
        q.complete(q.claim("w1")[0])  # 1: done at t=0
        q.enqueue("email", {"n": 2})
        q.fail(q.claim("w1")[0], "ValueError: no such mailbox", retry=False)  # 2: dead at t=0
        q.cancel(q.enqueue("email", {"n": 3}))  # 3: cancelled at t=0
        q.enqueue("export", {"n": 4})
        q.claim("w1")  # 4: running, a two-hour lease
        q.enqueue("report", {"n": 5}, delay=7200)  # 5: queued, scheduled for t=7200
        clock.now = 3000.0
        q.enqueue("email", {"n": 6})
        q.complete(q.claim("w1")[0])  # 6: done at t=3000
        q.enqueue("email", {"n": 7})  # 7: queued, ready
        clock.now = 3700.0
        print("at t=3700, every job:")
        print("\n".join(_walk_rows(q)))
        first = q.purge(3600)
        print(f"\npurge(3600) -> removed={first.removed} archived={first.archived} windows={first.batches}")
        every = q.purge(3600, states=("done", "dead", "cancelled"), archive=True)
        print(
            'purge(3600, states=("done", "dead", "cancelled"), archive=True) -> '
            f"removed={every.removed} archived={every.archived} windows={every.batches}"
        )
        print("\nleft in jobs:")
        print("\n".join(_walk_rows(q)))
        print("in jobs_archive:")
        print("\n".join(_walk_rows(q, WALK_ARCHIVE)))
        try:
            q.purge(0, states=("queued",))
            refused = ""
        except InvalidArgument as exc:
            refused = str(exc)
        print(f"\npurge(0, states=('queued',)) -> InvalidArgument: {refused}")
        left = [r[0] for r in q.db.execute("SELECT id FROM jobs ORDER BY id")]
        archived = [r[0] for r in q.db.execute("SELECT id FROM jobs_archive ORDER BY id")]
    return {"left": left, "archived": archived, "refused": refused, "purges": (first, every)}


# -- the widget ------------------------------------------------------------------------------


def summary_line(run: Run, baseline: Run, backlog: pd.DataFrame) -> str:
    """One line on a run with retention beside the run without, and the backlog purge."""
    first = backlog.iloc[0]
    return (
        f"{run.setup.label}, {run.setup.minutes} min: file {run.end_bytes / 1e6:.2f} MB at the end "
        f"(without retention {baseline.end_bytes / 1e6:.2f} MB); longest purge window "
        f"{run.longest_hold_ms:.2f} ms; backlog purge of {int(first['removed']):,} rows: "
        f"{int(first['windows']):,} windows, longest {first['longest hold (ms)']:.2f} ms"
    )


def retention_panel(baseline: Run, initial: Run | None = None, folder: Folder = None):
    """Choose the retention period, the batch size and the run's length; Run simulates the
    queue with that retention (and, for a new length, without any), purges the no-retention
    file's backlog at that batch size, and redraws. Shows `initial` until then."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    retention = w.IntSlider(
        value=int(RETENTION),
        min=60,
        max=1800,
        step=60,
        description="retention (s)",
        style=style,
        continuous_update=False,
    )
    batch = w.Dropdown(options=[(f"{b:,}", b) for b in BATCH_SIZES], value=BATCH, description="batch size")
    lengths = sorted({MINUTES, 2 * MINUTES, 4 * MINUTES, baseline.setup.minutes})
    minutes = w.Dropdown(options=lengths, value=baseline.setup.minutes, description="minutes")
    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.HTML()
    table = w.HTML()
    picture = w.Image(format="png", layout=w.Layout(width="100%", max_width="640px"))
    progress = w.Output()  # the runs' progress bars
    kept = {"baseline": baseline}

    def show(run: Run, without: Run, note: str) -> None:
        table.value = html_table(compare(without, run).reset_index())
        picture.value = figure_png(plot_runs(without, run))
        status.value = note  # last, so the note never describes an older chart

    def on_click(_: Any) -> None:
        button.disabled = True
        progress.clear_output()
        try:
            setup = Setup(minutes=minutes.value, retention=float(retention.value), batch=batch.value)
            status.value = f"running {setup.label} for {setup.minutes} simulated minutes …"
            with progress:
                without = kept["baseline"]
                if without.setup.minutes != setup.minutes:
                    without = simulate(replace(setup, retention=None), "panel_no_retention", folder)
                    kept["baseline"] = without
                run = simulate(setup, "panel_retention", folder)
                backlog = backlog_purges(without, (setup.batch,), float(retention.value), folder)
            show(run, without, html.escape(summary_line(run, without, backlog)))
        except KeyboardInterrupt:
            status.value = "<b>interrupted</b>: choose the settings and press Run again"
        except Exception as exc:  # show it in the panel; a callback's traceback is easy to miss
            status.value = f"<b>failed:</b> {type(exc).__name__}: {html.escape(str(exc))}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    if initial is not None:
        show(initial, baseline, "<b>the runs above</b>; choose the settings and press Run")
    else:
        status.value = "<b>choose the settings and press Run</b>"
    box = w.VBox([w.HBox([retention, batch, minutes, button]), status, table, picture, progress])
    box.controls = {"retention": retention, "batch": batch, "minutes": minutes}
    box.button, box.status, box.table, box.picture = button, status, table, picture
    return box
