"""Notebook 08: what a claim costs when the table is full of finished jobs.

Seeds many 'done' rows (older than the queued ones, as in a long-running queue),
then times the real JobQueue.claim under three index setups, and reads the query
plan of every statement in labqueue.sql.
"""

from __future__ import annotations

import contextlib
import csv
import re
import sqlite3
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import sql
from ..clock import FakeClock
from ..errors import InvalidArgument
from ..queue import Job, JobQueue
from .assets import DPI, FIGSIZE, data_file, figure_png
from .scratch import db_path
from .walks import Folder

BASE = 1_000_000.0
N_QUEUED = 1_000
CHUNK = 20_000
TUTORIAL_CSV = "claim_index_tutorial.csv"

PLAIN_INDEX = "CREATE INDEX jobs_plain ON jobs (visible_at, id)"
# Seeding only: nothing else is open, and a lost seed is simply made again.
BULK_LOAD = "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;"
SEED_DONE = """
INSERT INTO jobs (state, attempts, visible_at, created_at, finished_at, kind, payload)
VALUES ('done', 1, ?1, ?1, ?1, 'email', '{}')
"""
SEED_QUEUED = "INSERT INTO jobs (visible_at, created_at, kind, payload) VALUES (?1, ?1, 'email', '{}')"


@dataclass(frozen=True)
class Setup:
    label: str
    create: str | None  # the SQL that builds its indexes
    claims: int  # how many claims to time


SETUPS = (
    Setup("no index", None, 10),
    Setup("plain index on (visible_at, id)", PLAIN_INDEX, 10),
    Setup("partial indexes (labqueue.sql)", sql.INDEXES, 200),
)


def now_after(n_done: int, n_queued: int = N_QUEUED) -> float:
    """A time later than every visible_at the seed writes."""
    return BASE + n_done * 0.5 + n_queued + 10


def _count(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return value


def seed(path: Path, n_done: int, n_queued: int = N_QUEUED, *, progress: bool = True) -> float:
    """Write `n_done` finished jobs, then `n_queued` ready ones, with no indexes.
    Returns the seconds it took. Bulk load only: synchronous=OFF."""
    n_done = _count("n_done", n_done, 0, 10_000_000)
    n_queued = _count("n_queued", n_queued, 1, 1_000_000)
    from tqdm.auto import tqdm

    started = time.perf_counter()
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.executescript(BULK_LOAD + sql.TABLE)
        db.execute("BEGIN")
        with tqdm(total=n_done + n_queued, desc="seeding jobs", unit="row", disable=not progress) as bar:
            # Finished jobs first, half a second apart, so they all sort before the queued ones.
            for first in range(0, n_done, CHUNK):
                last = min(first + CHUNK, n_done)
                db.executemany(SEED_DONE, ((BASE + k / 2,) for k in range(first, last)))
                bar.update(last - first)
            ready_from = BASE + n_done / 2
            db.executemany(SEED_QUEUED, ((ready_from + k,) for k in range(n_queued)))
            bar.update(n_queued)
        db.execute("COMMIT")
    finally:
        db.close()
    return time.perf_counter() - started


# -- query plans ---------------------------------------------------------------------


def plan(db: sqlite3.Connection, statement: str) -> str:
    """EXPLAIN QUERY PLAN's detail lines, joined with ' | '. The statement is not run;
    every parameter is bound to 1.0, which no plan depends on."""
    named = re.findall(r":(\w+)", statement)
    params: dict[str, float] | tuple[float, ...]
    params = dict.fromkeys(named, 1.0) if named else (1.0,) * statement.count("?")
    return " | ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + statement, params))


def queue_statements() -> dict[str, str]:
    """Every statement in labqueue.sql that the queue runs (not the schema itself), the
    claim's scopes included: CLAIM_IN["one"] is named CLAIM_IN[one]."""
    verbs = ("SELECT", "INSERT", "UPDATE", "DELETE")
    found: dict[str, str] = {}
    for name, value in vars(sql).items():
        if not name.isupper() or name.startswith("_"):  # _CLAIM...: the templates of the scopes
            continue
        texts = {f"{name}[{k}]": v for k, v in value.items()} if isinstance(value, dict) else {name: value}
        for label, text in texts.items():
            if isinstance(text, str) and text.strip().upper().startswith(verbs):
                found[label] = text
    return found


EXTRA_QUERIES = {
    "count done": "SELECT COUNT(*) FROM jobs WHERE state = 'done'",
    "count dead": "SELECT COUNT(*) FROM jobs WHERE state = 'dead'",
}


# The statements the course has shown, under the names the notebooks use: (what it is,
# its constant in labqueue.sql). The package has a few more (the worker loop's combined
# claim, its read-only probe, ...): every_statement_plan() covers those, and a test checks them.
TAUGHT = (
    ("claim sub-select (02)", "CLAIM"),
    ("retire exhausted (07)", "RETIRE_EXHAUSTED"),
    ("complete (02, 04)", "COMPLETE"),
    ("fail (04, 07)", "FAIL"),
    ("heartbeat (06)", "HEARTBEAT"),
    ("requeue_dead (10)", "REQUEUE_DEAD"),
    ("stats: queued and running (10)", "STATS_LIVE"),
    ("stats: ready now, oldest (10)", "STATS_READY"),
    ("stats: dead (10)", "STATS_DEAD"),
)


def _plan_or_note(db: sqlite3.Connection, text: str) -> str:
    return plan(db, text) or "(no plan: a plain INSERT)"


def plans_table(db: sqlite3.Connection) -> pd.DataFrame:
    """The plan of each statement the course has shown (named as the notebooks name it,
    with its constant in labqueue.sql), and of the two counts the notebook compares."""
    rows = []
    for label, name in TAUGHT:
        text = getattr(sql, name)
        rows.append((label, name, _plan_or_note(db, _subselect(text) if name == "CLAIM" else text)))
    rows += [(label, "", _plan_or_note(db, text)) for label, text in EXTRA_QUERIES.items()]
    return pd.DataFrame(rows, columns=["statement", "in labqueue.sql", "query plan"]).set_index("statement")


def every_statement_plan(db: sqlite3.Connection) -> dict[str, str]:
    """The plan of every statement in labqueue.sql, taught or not, by constant name."""
    return {name: _plan_or_note(db, text) for name, text in queue_statements().items()}


def scans_table(plan_text: str) -> bool:
    """True when a plan reads the whole jobs table (a SCAN that no index narrows)."""
    return any(step.strip() == "SCAN jobs" for step in plan_text.split("|"))


# -- timing the claim ------------------------------------------------------------------


@dataclass
class Measurement:
    setup: str
    claim_plan: str
    retire_plan: str
    claims_ms: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.claims_ms)


def _timed_claim(q: JobQueue) -> tuple[Job, float]:
    """One claim of one job, and how long it took in milliseconds."""
    before = time.perf_counter_ns()
    claimed = q.claim("bench")
    took_ms = (time.perf_counter_ns() - before) / 1e6
    (job,) = claimed
    return job, took_ms


def _subselect(statement: str) -> str:
    """The SELECT inside CLAIM's IN (...): the part that finds the job."""
    return statement[statement.index("(SELECT") + 1 : statement.rindex(")")]


def measure(
    n_done: int, *, folder: Folder = None, progress: bool = True, setups: Iterable[Setup] = SETUPS
) -> tuple[list[Measurement], float]:
    """Seed once, then for each setup build its indexes, read the plans of the claim's
    search and of the retire statement, and time `setup.claims` real claims (each
    completed, so the next claim takes the next job). Returns the measurements and
    the seconds the seeding took."""
    setups = list(setups)
    needed = sum(s.claims for s in setups)
    path = db_path("claim_index", folder)
    seeded = seed(path, n_done, max(N_QUEUED, needed), progress=progress)
    now = now_after(n_done, max(N_QUEUED, needed))
    results = []
    from tqdm.auto import tqdm

    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        with tqdm(total=needed, desc="timing claims", unit="claim", disable=not progress) as bar:
            for setup in setups:
                if setup.create:
                    db.executescript(setup.create)
                claim_plan = plan(db, _subselect(sql.CLAIM))
                retire_plan = plan(db, sql.RETIRE_EXHAUSTED)
                timings = []
                with JobQueue(path, lease_seconds=30, clock=FakeClock(now), schema=None) as q:
                    for _ in range(setup.claims):
                        job, took_ms = _timed_claim(q)
                        timings.append(took_ms)
                        q.complete(job)  # so the next claim times a fresh job, not an empty queue
                        bar.update()
                results.append(Measurement(setup.label, claim_plan, retire_plan, timings))
                if setup.create == PLAIN_INDEX:
                    db.execute("DROP INDEX jobs_plain")
    finally:
        db.close()
    return results, seeded


def results_table(results: list[Measurement], n_done: int) -> pd.DataFrame:
    fastest = min(r.median_ms for r in results)
    rows = [
        {
            "setup": r.setup,
            "claims timed": len(r.claims_ms),
            "median claim (ms)": round(r.median_ms, 3),
            "× the fastest": round(r.median_ms / fastest, 1),
            "claim plan": r.claim_plan,
            "retire plan": r.retire_plan,
        }
        for r in results
    ]
    table = pd.DataFrame(rows).set_index("setup")
    table.attrs["n_done"] = n_done
    return table


def tutorial_figures(path: Path | None = None) -> pd.DataFrame:
    """The tutorial's published medians (1,000,000 done rows), from data/."""
    with (path or data_file(TUTORIAL_CSV)).open(newline="") as f:
        rows = [line for line in f if not line.startswith("#")]
    return pd.DataFrame(list(csv.DictReader(rows))).astype({"median_claim_ms": float}).set_index("setup")


def _ms_label(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.2g}"


def plot_latency(table: pd.DataFrame, tutorial: pd.DataFrame | None = None):
    """Median claim latency per setup on a log scale, this run beside the tutorial's."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    n = len(table)
    width = 0.38 if tutorial is not None else 0.6
    xs = list(range(n))
    n_done = table.attrs.get("n_done")
    ours_label = f"this run ({n_done:,} done rows)" if n_done else "this run"
    bars = ax.bar(
        [x - width / 2 if tutorial is not None else x for x in xs],
        table["median claim (ms)"],
        width,
        label=ours_label,
        color="#4c72b0",
    )
    ax.bar_label(bars, fmt=_ms_label, fontsize="small")
    if tutorial is not None:
        theirs = [tutorial["median_claim_ms"].get(label, float("nan")) for label in table.index]
        bars = ax.bar(
            [x + width / 2 for x in xs],
            theirs,
            width,
            label="tutorial (1,000,000 done rows)",
            color="#bbbbbb",
        )
        ax.bar_label(bars, fmt=_ms_label, fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("median claim (ms, log scale)")
    ax.set_xticks(xs, [label.replace(" (", "\n(").replace(" on ", "\non ") for label in table.index])
    ax.set_ylim(top=ax.get_ylim()[1] * 30)
    ax.legend(loc="upper left", ncol=2, fontsize="small")
    plt.close(fig)
    return fig


# -- two more facts from the same step -----------------------------------------------


MARK_UP_TO = "UPDATE jobs SET worker = 'first' WHERE id <= ? RETURNING id"
PROBE_WRITE = "UPDATE jobs SET worker = 'second' WHERE id = ?"


def returning_holds_the_lock(folder: Folder = None, busy_timeout: float = 0.2) -> list[tuple[str, bool]]:
    """In autocommit mode a statement's implicit transaction lasts until the statement
    is done, and a RETURNING statement is not done while rows remain unread: until
    then it keeps the write lock. Returns (situation, could a second connection write)
    for three situations."""
    path = db_path("claim_index_returning", folder)
    with (
        JobQueue(path) as q,
        contextlib.closing(sqlite3.connect(str(path), isolation_level=None, timeout=busy_timeout)) as other,
    ):
        q.enqueue_many("t", [{}] * 5)

        def other_can_write() -> bool:
            try:
                other.execute(PROBE_WRITE, (5,))
            except sqlite3.OperationalError:  # "database is locked" after busy_timeout
                return False
            return True

        three_rows = q.db.execute(MARK_UP_TO, (3,))
        three_rows.fetchone()
        partly_read = other_can_write()
        three_rows.fetchall()
        drained = other_can_write()
        q.db.execute(MARK_UP_TO, (1,)).fetchone()
        single = other_can_write()
    return [
        ("after fetchone() on a 3-row RETURNING", partly_read),
        ("after fetchall() on the same cursor", drained),
        ("after fetchone() on a 1-row RETURNING", single),
    ]


def retire_plan_with_ready_index_only(folder: Folder = None) -> str:
    """The retire statement's plan when jobs_ready is the only index: the reason jobs_exhausted exists."""
    (ready_index,) = [text for text in sql.INDEXES.split(";") if "jobs_ready" in text]
    ready_only = sql.TABLE + ready_index + ";"
    with JobQueue(db_path("claim_index_ready_only", folder), schema=ready_only) as q:
        return plan(q.db, sql.RETIRE_EXHAUSTED)


def empty_claim_seconds(claims: int = 2000, folder: Folder = None) -> float:
    """The mean cost of a claim that finds nothing, on an empty queue."""
    claims = _count("claims", claims, 1, 1_000_000)
    with JobQueue(db_path("claim_index_empty", folder)) as q:
        started = time.perf_counter()
        for _ in range(claims):
            q.claim("idle")
        return (time.perf_counter() - started) / claims


# -- the widget --------------------------------------------------------------------


DEFAULT_DONE = 300_000  # enough for a >100x gap with margin, seeded and timed in a few seconds
SIZES = (10_000, 100_000, DEFAULT_DONE, 1_000_000)


def claim_index_panel(
    initial: pd.DataFrame | None = None, folder: Folder = None, sizes: Iterable[int] = SIZES
):
    """Choose how many done rows to seed and press the button: seeds, times the claims
    under the three setups, and redraws. The tutorial's million rows take up to half a minute."""
    import ipywidgets as widgets

    sizes = list(sizes)
    default = DEFAULT_DONE if DEFAULT_DONE in sizes else sizes[0]
    options = [(f"{n:,} done rows", n) for n in sizes]
    size = widgets.Dropdown(options=options, value=default, description="table")
    button = widgets.Button(description="seed and measure", button_style="primary")
    status = widgets.HTML()
    progress = widgets.Output()  # the seeding and timing progress bars appear here
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))
    tutorial = tutorial_figures()

    def show(results: pd.DataFrame, note: str) -> None:
        table.value = (
            results.drop(columns=["claim plan", "retire plan"]).reset_index().to_html(index=False, border=0)
        )
        picture.value = figure_png(plot_latency(results, tutorial))
        status.value = note  # last, so the note never describes an older chart

    def on_click(_button: object = None) -> None:
        button.disabled = True
        status.value = f"seeding {size.value:,} done rows and timing claims …"
        progress.clear_output()
        try:
            with progress:
                measured, seeded = measure(size.value, folder=folder)
            show(
                results_table(measured, size.value),
                f"<b>{size.value:,} done rows</b> (seeded in {seeded:.1f} s)",
            )
        except KeyboardInterrupt:  # the kernel was interrupted: say so, keep the last chart
            status.value = "<b>interrupted</b>; choose a size and press the button to measure again"
        finally:
            button.disabled = False

    button.on_click(on_click)
    if initial is not None:
        show(initial, "<b>the run above</b>; choose a size and press the button to measure again")
    else:
        status.value = "<b>choose a size and press the button</b>"
    return widgets.VBox([widgets.HBox([size, button]), status, table, picture, progress])


def queue_plans(folder: Folder = None) -> pd.DataFrame:
    """The plans on a queue built with the package's own schema (table and partial indexes)."""
    with JobQueue(db_path("claim_index_plans", folder)) as q:
        return plans_table(q.db)


def all_queue_plans(folder: Folder = None) -> dict[str, str]:
    """every_statement_plan on a queue built with the package's own schema."""
    with JobQueue(db_path("claim_index_all_plans", folder)) as q:
        return every_statement_plan(q.db)
