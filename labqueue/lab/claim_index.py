"""Notebook 08: what a claim costs when the table is full of finished jobs.

Seeds many 'done' rows into the tutorial's table (older than the queued ones, as in a
long-running queue), then times the learner's `JobQueue.claim` under three index setups:
none, a plain index on (visible_at, id), and the index text the notebook passes
(`indexes=`, the tutorial's `INDEXES` unless the learner tries another), reading the plan
of the claim and of the retire statement under each.

`every_statement_plan` and `all_queue_plans` read the production package's statements
(labqueue.drivers.sqlite.sql): its tests use them to check that no claim path scans the table.
"""

from __future__ import annotations

import csv
import re
import sqlite3
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..clock import FakeClock
from ..drivers.sqlite import sql
from ..errors import InvalidArgument
from ..tutorial import jobqueue as tutorial
from .assets import data_file, figure_png, new_figure
from .scratch import db_path
from .tables import html_table
from .walks import Folder

BASE = 1_000_000.0
N_QUEUED = 1_000
CHUNK = 20_000
TUTORIAL_CSV = "claim_index_tutorial.csv"

PLAIN_INDEX = "CREATE INDEX jobs_plain ON jobs (visible_at, id);"
# Seeding only: nothing else is open, and a lost seed is simply made again.
BULK_LOAD = "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;"
SEED_DONE = """
INSERT INTO jobs (state, attempts, visible_at, created_at, finished_at, kind, payload)
VALUES ('done', 1, ?1, ?1, ?1, 'email', '{}')
"""
SEED_QUEUED = "INSERT INTO jobs (visible_at, created_at, kind, payload) VALUES (?1, ?1, 'email', '{}')"
INDEXES_ON_JOBS = (
    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL"
)


@dataclass(frozen=True)
class Setup:
    label: str
    create: str | None  # the SQL that builds its indexes
    claims: int  # how many claims to time


SETUPS = (
    Setup("no index", None, 10),
    Setup("plain index on (visible_at, id)", PLAIN_INDEX, 10),
    Setup("partial indexes (INDEXES)", tutorial.INDEXES, 200),
)


def setups(indexes: str | None = None) -> tuple[Setup, ...]:
    """The three setups, the last one building `indexes` (the tutorial's INDEXES by default)."""
    if indexes is None:
        return SETUPS
    if not isinstance(indexes, str) or not indexes.strip():
        raise InvalidArgument(f"indexes must be the SQL text of CREATE INDEX statements, got {indexes!r}")
    return (*SETUPS[:2], replace(SETUPS[2], create=indexes))


def now_after(n_done: int, n_queued: int = N_QUEUED) -> float:
    """A time later than every visible_at the seed writes."""
    return BASE + n_done * 0.5 + n_queued + 10


def _count(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return value


def seed(
    path: Path, n_done: int, n_queued: int = N_QUEUED, *, table: str = tutorial.TABLE, progress: bool = True
) -> float:
    """Write `n_done` finished jobs, then `n_queued` ready ones, into `table` (the tutorial's)
    with no indexes. Returns the seconds it took. Bulk load only: synchronous=OFF."""
    n_done = _count("n_done", n_done, 0, 10_000_000)
    n_queued = _count("n_queued", n_queued, 1, 1_000_000)
    from tqdm.auto import tqdm

    started = time.perf_counter()
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.executescript(BULK_LOAD + table)
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
    params = dict.fromkeys(named, 1.0) if named else (1.0,) * positional_count(statement)
    return " | ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + statement, params))


def positional_count(statement: str) -> int:
    """How many values a statement's `?` parameters take, as SQLite numbers them: a plain
    `?` the next number, `?N` the number N (COMPLETE reuses ?1, the time)."""
    count = 0
    for digits in re.findall(r"\?(\d*)", statement):
        count = max(count, int(digits)) if digits else count + 1
    return count


def scans_table(plan_text: str) -> bool:
    """True when a plan reads the whole jobs table (a SCAN that no index narrows)."""
    return any(step.strip() == "SCAN jobs" for step in plan_text.split("|"))


# -- timing the learner's claim --------------------------------------------------------


@dataclass
class Measurement:
    setup: str
    claim_plan: str
    retire_plan: str
    claims_ms: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.claims_ms)


def measure_setup(path: Path, setup: Setup, now: float, queue_class: Any, statements: dict) -> Measurement:
    """Build the setup's indexes, read the plans of the claim and of the retire statement,
    then time `setup.claims` claims of one job on the queue class given, completing each
    job so that the next claim takes the next one. The indexes are dropped again after."""
    db = sqlite3.connect(str(path), isolation_level=None)
    before = {name for (name,) in db.execute(INDEXES_ON_JOBS)}
    try:
        db.executescript(setup.create or "")
        claim_plan, retire_plan = plan(db, statements["claim"]), plan(db, statements["retire"])
        q = queue_class(path, lease_seconds=30, clock=FakeClock(now), schema=None)
        timings = []
        try:
            for _ in range(setup.claims):
                started = time.perf_counter_ns()
                (job,) = q.claim("bench")
                timings.append((time.perf_counter_ns() - started) / 1e6)
                q.complete(job)
        finally:
            q.db.close()
        for (name,) in db.execute(INDEXES_ON_JOBS).fetchall():
            if name not in before:
                db.execute(f'DROP INDEX "{name}"')  # a name SQLite listed, not user input
    finally:
        db.close()
    return Measurement(setup.label, claim_plan, retire_plan, timings)


def measure(
    n_done: int,
    *,
    indexes: str | None = None,
    queue_class: Any = None,
    folder: Folder = None,
    progress: bool = True,
    claims: Iterable[int] | None = None,
) -> tuple[list[Measurement], float]:
    """Seed the tutorial's table once, then measure each setup in turn (the last builds
    `indexes`, the tutorial's INDEXES by default) on `queue_class` (the tutorial's JobQueue
    by default). `claims` overrides how many claims each setup times. Returns the
    measurements and the seconds the seeding took."""
    chosen = list(setups(indexes))
    if claims is not None:
        chosen = [
            replace(s, claims=_count("claims", n, 1, 100_000)) for s, n in zip(chosen, claims, strict=True)
        ]
    queue_class = queue_class or tutorial.JobQueue
    statements = {"claim": tutorial.CLAIM, "retire": tutorial.RETIRE_EXHAUSTED}
    needed = sum(s.claims for s in chosen)
    n_queued = max(N_QUEUED, needed)
    path = db_path("claim_index", folder)
    seeded = seed(path, n_done, n_queued, progress=progress)
    from tqdm.auto import tqdm

    results = []
    for setup in tqdm(chosen, desc="timing claims", unit="setup", disable=not progress):
        results.append(measure_setup(path, setup, now_after(n_done, n_queued), queue_class, statements))
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
    """The tutorial's published medians (1,000,000 done rows), from data/, in SETUPS' order."""
    with (path or data_file(TUTORIAL_CSV)).open(newline="") as f:
        rows = [line for line in f if not line.startswith("#")]
    return pd.DataFrame(list(csv.DictReader(rows))).astype({"median_claim_ms": float}).set_index("setup")


def _ms_label(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.2g}"


def plot_latency(table: pd.DataFrame, tutorial_run: pd.DataFrame | None = None):
    """Median claim latency per setup on a log scale, this run beside the tutorial's
    (matched by position: no index, plain index, partial indexes)."""
    fig, ax = new_figure()
    xs = list(range(len(table)))
    width = 0.38 if tutorial_run is not None else 0.6
    n_done = table.attrs.get("n_done")
    ours_label = f"this run ({n_done:,} done rows)" if n_done else "this run"
    shift = width / 2 if tutorial_run is not None else 0.0
    bars = ax.bar(
        [x - shift for x in xs], table["median claim (ms)"], width, label=ours_label, color="#4c72b0"
    )
    ax.bar_label(bars, fmt=_ms_label, fontsize="small")
    if tutorial_run is not None:
        theirs = list(tutorial_run["median_claim_ms"])[: len(xs)]
        bars = ax.bar(
            [x + shift for x in xs[: len(theirs)]],
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
    return fig


# -- the widget --------------------------------------------------------------------


DEFAULT_DONE = 100_000  # a gap of a hundred times or more, seeded and timed in about three seconds
TUTORIAL_DONE = 1_000_000
SIZES = (10_000, DEFAULT_DONE, 300_000, TUTORIAL_DONE)


def claim_index_panel(
    initial: pd.DataFrame | None = None,
    folder: Folder = None,
    sizes: Iterable[int] = SIZES,
    *,
    indexes: str | None = None,
    queue_class: Any = None,
):
    """Choose how many done rows to seed and press the button: seeds, times the claims of
    `queue_class` under the three setups (the last with `indexes`), and redraws. The
    tutorial's million rows take up to half a minute."""
    import ipywidgets as widgets

    sizes = list(sizes)
    default = DEFAULT_DONE if DEFAULT_DONE in sizes else sizes[0]
    options = [(f"{n:,} done rows", n) for n in sizes]
    size = widgets.Dropdown(options=options, value=default, description="table")
    button = widgets.Button(
        description="seed and measure", button_style="primary", layout=widgets.Layout(width="auto")
    )
    status = widgets.HTML()
    progress = widgets.Output()  # the seeding and timing progress bars appear here
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))
    published = tutorial_figures()

    def show(results: pd.DataFrame, note: str) -> None:
        table.value = html_table(results.drop(columns=["claim plan", "retire plan"]).reset_index())
        picture.value = figure_png(plot_latency(results, published))
        status.value = note  # last, so the note never describes an older chart

    def on_click(_button: object = None) -> None:
        button.disabled = True
        status.value = f"seeding {size.value:,} done rows and timing claims …"
        progress.clear_output()
        try:
            with progress:
                measured, seeded = measure(
                    size.value, indexes=indexes, queue_class=queue_class, folder=folder
                )
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


# -- the production package's statements (its tests) ------------------------------------


def queue_statements() -> dict[str, str]:
    """Every statement in labqueue.drivers.sqlite.sql that the production queue runs (not the schema
    itself), the claim's scopes included: CLAIM_IN["one"] is named CLAIM_IN[one]."""
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


def every_statement_plan(db: sqlite3.Connection) -> dict[str, str]:
    """The plan of every statement in labqueue.drivers.sqlite.sql, by constant name."""
    return {name: plan(db, text) or "(no plan: a plain INSERT)" for name, text in queue_statements().items()}


def all_queue_plans(folder: Folder = None) -> dict[str, str]:
    """every_statement_plan on a production queue (labqueue.JobQueue) with its own schema."""
    from ..queue import JobQueue

    with JobQueue(db_path("claim_index_all_plans", folder)) as q:
        return every_statement_plan(q.db)
