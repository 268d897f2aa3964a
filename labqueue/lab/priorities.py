"""Notebook 15: priorities, named queues, and fairness between queues.

- The claim's order (labqueue.drivers.sqlite.sql.CLAIM_ORDER) on a handful of jobs, on a fake clock.
- The claim's search plans in its three scopes, and its cost with many finished rows of
  mixed priorities and queues (seeded as notebook 08 seeds, timed on the real claim).
- Overload on a fake clock: arrivals of several queues and priorities from a seeded
  random generator, N simulated workers that each hold a job for a fixed service time,
  and the real queue underneath (JobQueue, its claim statements with queues=[...]). Under
  strict priorities every worker claims from all queues at once; under fair turns each
  follows its own labqueue.fairness.QueueTurns, as labqueue.worker.run does.
"""

from __future__ import annotations

import math
import random
import sqlite3
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..clock import FakeClock
from ..drivers.sqlite import sql
from ..errors import InvalidArgument
from ..fairness import QueueTurns, parse_queues
from ..queue import JobQueue
from .assets import figure_png, new_figure
from .claim_index import BULK_LOAD, CHUNK, plan
from .scratch import db_path
from .tables import html_table
from .walks import Folder

QUEUES = ("mail", "webhooks", "reports")
COLOURS = {"mail": "#4c72b0", "webhooks": "#dd8452", "reports": "#55a868"}
MODE_COLOURS = {"strict": "#c44e52", "fair": "#4c72b0"}
MODES = ("strict", "fair")


# -- the claim's order, on a fake clock ------------------------------------------------------

ORDER_LINE = "claim {n}: job {id}  priority {priority:>2}  queue {queue:<8}  ready since t={ready:g}"


def order_walk(folder: Folder = None) -> list[int]:
    """Six jobs on a fake clock, then one claim at a time across every queue: prints who is
    taken in which order and returns the ids. Jobs 1-3 keep the defaults (priority 0, queue
    'default'), so among them the tutorial's order holds: oldest visible_at first."""
    clock = FakeClock(0.0)
    with JobQueue(db_path("priorities_order", folder), clock=clock, wake=False) as q:
        q.enqueue("email", {"n": 1})  # t=0, the defaults
        clock.advance(1)
        q.enqueue("email", {"n": 2}, delay=3)  # ready at t=4
        q.enqueue("email", {"n": 3})  # ready at t=1
        clock.advance(1)
        q.enqueue("report", {"n": 4}, queue="reports", priority=5)  # t=2
        q.enqueue("email", {"n": 5}, queue="mail", priority=10)  # t=2
        q.enqueue("webhook", {"n": 6}, queue="webhooks", priority=5)  # t=2
        clock.now = 10.0
        before = {row.id: row for row in q.jobs()}
        order = []
        for n in range(1, 7):
            (job,) = q.claim("w1")
            row = before[job.id]
            print(
                ORDER_LINE.format(
                    n=n, id=job.id, priority=row.priority, queue=row.queue, ready=row.visible_at
                )
            )
            order.append(job.id)
    return order


def ready_indexes() -> str:
    """The two partial indexes a claim reads, as labqueue.drivers.sqlite.sql.INDEXES creates them."""
    parts = [part.strip() for part in sql.INDEXES.split(";")]
    return ";\n".join(p for p in parts if "ready ON" in p) + ";"


def subselect(statement: str) -> str:
    """The SELECT inside a claim's IN (...): the part that finds the jobs."""
    return statement[statement.index("(SELECT") + 1 : statement.rindex(")")]


SCOPE_LABELS = {
    "all": "every queue (queues=None)",
    "one": "one queue (queues=['mail'])",
    "some": "several queues (queues=['mail', 'reports'])",
}


def claim_plans(folder: Folder = None) -> pd.DataFrame:
    """The query plan of the claim's search in each of its three scopes, on the package's schema."""
    with JobQueue(db_path("priorities_plans", folder), wake=False) as q:
        rows = [(SCOPE_LABELS[s], plan(q.db, subselect(sql.CLAIM_IN[s]))) for s in SCOPE_LABELS]
    return pd.DataFrame(rows, columns=["claim from", "query plan"]).set_index("claim from")


def sorts_in_memory(plan_text: str) -> bool:
    """True when a plan sorts the rows itself (a temporary B-tree) instead of reading an index in order."""
    return "TEMP B-TREE" in plan_text


# -- the claim's cost with many finished rows ------------------------------------------------

N_QUEUED = 1_000
CLAIMS = 100  # timed claims per scope
SMALL = 1_000
DEFAULT_DONE = 100_000
SIZES = (10_000, DEFAULT_DONE, 300_000, 1_000_000)
BASE = 1_000_000.0
PRIORITY_CYCLE = (0, 5, 10)

SEED_ROW = """
INSERT INTO jobs (state, attempts, visible_at, created_at, finished_at, kind, payload, priority, queue)
VALUES (?1, ?2, ?3, ?3, CASE WHEN ?1 = 'done' THEN ?3 END, 'email', '{}', ?4, ?5)
"""

SCOPES: dict[str, list[str] | None] = {"all": None, "one": ["mail"], "some": ["mail", "reports"]}


def _whole(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return value


def seed(path: Path, n_done: int, n_queued: int = N_QUEUED, *, progress: bool = False) -> float:
    """`n_done` finished jobs and then `n_queued` ready ones, their priorities cycling through
    0, 5, 10 and their queues through QUEUES, then the package's indexes. Bulk load only
    (synchronous=OFF). Returns the seconds it took."""
    n_done = _whole("n_done", n_done, 0, 10_000_000)
    n_queued = _whole("n_queued", n_queued, 1, 1_000_000)
    from tqdm.auto import tqdm

    started = time.perf_counter()

    def rows(first: int, last: int, state: str, offset: float):
        for k in range(first, last):
            yield (
                state,
                1 if state == "done" else 0,
                offset + k / 2,
                PRIORITY_CYCLE[k % 3],
                QUEUES[(k // 3) % len(QUEUES)],
            )

    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.executescript(BULK_LOAD + sql.TABLE)
        db.execute("BEGIN")
        with tqdm(total=n_done + n_queued, desc="seeding jobs", unit="row", disable=not progress) as bar:
            for first in range(0, n_done, CHUNK):
                last = min(first + CHUNK, n_done)
                db.executemany(SEED_ROW, rows(first, last, "done", BASE))
                bar.update(last - first)
            db.executemany(SEED_ROW, rows(0, n_queued, "queued", BASE + n_done / 2))
            bar.update(n_queued)
        db.execute("COMMIT")
        db.executescript(sql.INDEXES)
    finally:
        db.close()
    return time.perf_counter() - started


def instructions(db: sqlite3.Connection, query: str, params: Mapping[str, object]) -> int:
    """The virtual-machine instructions SQLite runs for one run of `query`: the work it does,
    the same on every machine and every run (unlike a time)."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    db.set_progress_handler(tick, 1)
    try:
        db.execute(query, dict(params)).fetchall()
    finally:
        db.set_progress_handler(None, 1)
    return count[0]


def _scope_params(queues: list[str] | None) -> dict[str, object]:
    if queues is None:
        return {}
    if len(queues) == 1:
        return {"queue": queues[0]}
    import json

    return {"queues": json.dumps(queues)}


def measure_claims(
    n_done: int, *, claims: int = CLAIMS, folder: Folder = None, progress: bool = True
) -> pd.DataFrame:
    """Seed `n_done` finished rows (and N_QUEUED ready ones), then per scope: the claim search's
    instructions and plan, and the median time of `claims` real JobQueue.claim calls (each job
    completed, so the next claim takes the next one). One row per scope."""
    claims = _whole("claims", claims, 1, 300)
    path = db_path("priorities_claims", folder)
    seeded = seed(path, n_done, max(N_QUEUED, 3 * (claims + 1)), progress=progress)
    now = BASE + n_done + 10 * N_QUEUED
    from tqdm.auto import tqdm

    rows = []
    with (
        JobQueue(path, lease_seconds=30, clock=FakeClock(now), schema=None, wake=False) as q,
        tqdm(total=claims * len(SCOPES), desc="timing claims", unit="claim", disable=not progress) as bar,
    ):
        for scope, queues in SCOPES.items():
            search = subselect(sql.CLAIM_IN[scope])
            params = {"now": now, "limit": 1, **_scope_params(queues)}
            steps = instructions(q.db, search, params)
            (warm,) = q.claim("bench", queues=queues)  # untimed: the first claim reads the pages in
            q.complete(warm)
            timings = []
            for _ in range(claims):
                before = time.perf_counter_ns()
                (job,) = q.claim("bench", queues=queues)
                timings.append((time.perf_counter_ns() - before) / 1e6)
                q.complete(job)
                bar.update()
            rows.append(
                {
                    "finished rows": n_done,
                    "claim from": SCOPE_LABELS[scope],
                    "median claim (ms)": round(statistics.median(timings), 3),
                    "search instructions": steps,
                    "query plan": plan(q.db, search),
                }
            )
    table = pd.DataFrame(rows)
    table.attrs["seeded_s"] = seeded
    return table


def latency_table(
    sizes: Iterable[int] = (SMALL, DEFAULT_DONE), *, folder: Folder = None, progress: bool = True
):
    """measure_claims at each size, stacked: one row per (size, scope)."""
    return pd.concat([measure_claims(n, folder=folder, progress=progress) for n in sizes], ignore_index=True)


def plot_latency(table: pd.DataFrame):
    """Median claim time per scope, one bar per table size."""
    fig, ax = new_figure()
    sizes = sorted(table["finished rows"].unique())
    scopes = list(dict.fromkeys(table["claim from"]))
    width = 0.8 / len(sizes)
    shades = ["#bbbbbb", "#4c72b0", "#dd8452", "#55a868"]
    for i, size in enumerate(sizes):
        part = table[table["finished rows"] == size].set_index("claim from").reindex(scopes)
        xs = [k + (i - (len(sizes) - 1) / 2) * width for k in range(len(scopes))]
        bars = ax.bar(
            xs, part["median claim (ms)"], width, color=shades[i % 4], label=f"{size:,} finished rows"
        )
        ax.bar_label(bars, fmt="%.3f", fontsize="small")
    ax.set_xticks(range(len(scopes)), [s.replace(" (", "\n(") for s in scopes], fontsize="small")
    ax.set_ylabel("median claim (ms)")
    ax.set_ylim(0, table["median claim (ms)"].max() * 1.5)
    ax.legend(loc="upper left", fontsize="small", ncol=len(sizes))
    ax.set_title("One claim, highest priority first, as finished rows pile up")
    return fig


def latency_panel(initial: pd.DataFrame | None = None, folder: Folder = None, sizes: Sequence[int] = SIZES):
    """Choose how many finished rows to seed and press the button: the claim is timed in its
    three scopes at that size, beside SMALL. A million rows take five to ten seconds."""
    import ipywidgets as widgets

    size = widgets.Dropdown(
        options=[(f"{n:,} finished rows", n) for n in sizes], value=DEFAULT_DONE, description="table"
    )
    button = widgets.Button(
        description="seed and time claims", button_style="primary", layout=widgets.Layout(width="auto")
    )
    status = widgets.HTML()
    progress = widgets.Output()
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))
    small = initial[initial["finished rows"] == SMALL] if initial is not None else None

    def show(results: pd.DataFrame, note: str) -> None:
        table.value = html_table(results.drop(columns=["query plan"]))
        picture.value = figure_png(plot_latency(results))
        status.value = note

    def on_click(_button: object = None) -> None:
        nonlocal small
        button.disabled = True
        status.value = f"seeding {size.value:,} finished rows and timing claims …"
        progress.clear_output()
        try:
            with progress:
                if small is None:
                    small = measure_claims(SMALL, folder=folder)
                measured = measure_claims(size.value, folder=folder)
            show(
                pd.concat([small, measured], ignore_index=True),
                f"<b>{size.value:,} finished rows</b> (seeded in {measured.attrs['seeded_s']:.1f} s)",
            )
        except KeyboardInterrupt:
            status.value = "<b>interrupted</b>; choose a size and press the button to measure again"
        finally:
            button.disabled = False

    button.on_click(on_click)
    if initial is not None:
        show(initial, "<b>the run above</b>; choose a size and press the button to measure again")
    else:
        status.value = "<b>choose a size and press the button</b>"
    return widgets.VBox([widgets.HBox([size, button]), status, table, picture, progress])


# -- overload on a fake clock ------------------------------------------------------------------


@dataclass(frozen=True)
class Arrivals:
    """Jobs of one queue and priority arriving at `rate` per second (a Poisson stream)."""

    queue: str
    priority: int
    rate: float


#: Named mixes of arrivals (jobs/s). The capacity is workers / service time: 4 jobs/s by default.
MIXES: dict[str, tuple[Arrivals, ...]] = {
    "webhook flood": (
        Arrivals("mail", 10, 0.5),
        Arrivals("mail", 0, 1.5),
        Arrivals("webhooks", 5, 4.0),
        Arrivals("reports", 0, 1.0),
    ),
    "steady (under capacity)": (
        Arrivals("mail", 10, 0.5),
        Arrivals("mail", 0, 1.0),
        Arrivals("webhooks", 5, 1.0),
        Arrivals("reports", 0, 0.5),
    ),
    "everyone floods": (
        Arrivals("mail", 10, 1.0),
        Arrivals("mail", 0, 2.0),
        Arrivals("webhooks", 5, 4.0),
        Arrivals("reports", 0, 3.0),
    ),
}
DEFAULT_MIX = "webhook flood"
WORKERS = 4
SERVICE_S = 1.0
DURATION_S = 120.0
TICK_S = 0.1
DEFAULT_QUEUES = "mail,webhooks,reports"  # `labqueue worker --queues` syntax: equal weights


@dataclass
class SimResult:
    mode: str  # "strict" or "fair"
    mix: tuple[Arrivals, ...]
    workers: int
    service_s: float
    duration_s: float
    weights: dict[str, int]
    jobs: pd.DataFrame  # one row per job: id, queue, priority, arrived_s, claimed_s, done_s, wait_s, waiting
    progress: pd.DataFrame = field(repr=False)  # completions per queue, cumulative, per second

    @property
    def capacity(self) -> float:
        return self.workers / self.service_s

    def completions(self) -> dict[str, int]:
        done = self.jobs.dropna(subset=["done_s"])
        return {queue: int((done["queue"] == queue).sum()) for queue in self.queues}

    @property
    def queues(self) -> list[str]:
        return list(dict.fromkeys(a.queue for a in self.mix))

    def shares(self) -> dict[str, float]:
        done = self.completions()
        total = sum(done.values()) or 1
        return {queue: n / total for queue, n in done.items()}

    def arrival_rates(self) -> dict[str, float]:
        """Jobs per second that arrived in each queue during the run (as drawn, not as set)."""
        counts = self.jobs["queue"].value_counts()
        return {queue: int(counts.get(queue, 0)) / self.duration_s for queue in self.queues}

    def guaranteed_rates(self) -> dict[str, float]:
        """What fair turns promise each queue (labqueue.fairness): its weight's share of the
        workers' capacity, or all it asks for when it asks for less."""
        total = sum(self.weights[q] for q in self.queues)
        arrived = self.arrival_rates()
        return {q: min(arrived[q], self.capacity * self.weights[q] / total) for q in self.queues}


def arrivals(mix: Sequence[Arrivals], duration_s: float, seed: int) -> list[tuple[float, str, int]]:
    """Every arrival in [0, duration_s): (time, queue, priority), sorted by time. Each stream
    draws its gaps from its own generator, so changing one rate leaves the others' times alone."""
    found = []
    for index, stream in enumerate(mix):
        if stream.rate <= 0:
            continue
        rng = random.Random(seed * 1000 + index)
        t = rng.expovariate(stream.rate)
        while t < duration_s:
            found.append((t, stream.queue, stream.priority))
            t += rng.expovariate(stream.rate)
    return sorted(found)


def _check_mix(mix: object) -> tuple[Arrivals, ...]:
    if isinstance(mix, str):
        if mix not in MIXES:
            raise InvalidArgument(f"mix must be one of {', '.join(map(repr, MIXES))}, got {mix!r}")
        return MIXES[mix]
    streams = tuple(mix)  # type: ignore[arg-type]
    if not streams or not all(isinstance(a, Arrivals) for a in streams):
        raise InvalidArgument(f"mix must name one of MIXES or be a list of Arrivals, got {mix!r}")
    return streams


def simulate(
    mix: str | Sequence[Arrivals] = DEFAULT_MIX,
    *,
    fair: bool,
    workers: int = WORKERS,
    service_s: float = SERVICE_S,
    duration_s: float = DURATION_S,
    queues: str = DEFAULT_QUEUES,
    seed: int = 14,
    folder: Folder = None,
) -> SimResult:
    """Run the mix for `duration_s` simulated seconds on a fake clock, in ticks of TICK_S.
    Each tick: the jobs that arrived since the last tick are enqueued (the clock set to each
    arrival's time), every worker whose job is finished completes it, and every idle worker
    claims one job. Strict (fair=False): the claim reads every queue in `queues` at once,
    highest priority first. Fair: each worker takes turns between the queues (QueueTurns
    with the weights of `queues`, written as `labqueue worker --queues`, e.g. "mail:2,reports"),
    and claims from the first queue in its turn order that has a job ready."""
    streams = _check_mix(mix)
    workers = _whole("workers", workers, 1, 64)
    if not isinstance(fair, bool):
        raise InvalidArgument(f"fair must be True or False, got {fair!r}")
    if not isinstance(service_s, (int, float)) or not TICK_S <= service_s <= 60:
        raise InvalidArgument(f"service_s must be from {TICK_S} to 60 seconds, got {service_s!r}")
    if not isinstance(duration_s, (int, float)) or not 1 <= duration_s <= 3600:
        raise InvalidArgument(f"duration_s must be from 1 to 3600 seconds, got {duration_s!r}")
    names, weights = parse_queues(queues)
    missing = sorted({a.queue for a in streams} - set(names))
    if missing:
        raise InvalidArgument(
            f"queues {queues!r} leaves out {', '.join(missing)}, which the mix sends jobs to"
        )
    weights = {name: weights.get(name, 1) for name in names}
    mode = "fair" if fair else "strict"

    clock = FakeClock(0.0)
    coming = arrivals(streams, duration_s, seed)
    service_ticks = max(1, round(service_s / TICK_S))
    n_ticks = round(duration_s / TICK_S)
    records: dict[int, dict] = {}
    holding: list[tuple[object, int] | None] = [None] * workers  # (job, tick it finishes)
    turns = [QueueTurns(names, weights) for _ in range(workers)] if fair else None
    progress_rows = []
    done_so_far = dict.fromkeys(names, 0)
    path = db_path(f"priorities_sim_{mode}", folder)
    with JobQueue(path, clock=clock, lease_seconds=3600, synchronous="OFF", wake=False) as q:
        next_arrival = 0
        for tick in range(n_ticks + 1):
            now = tick * TICK_S
            while next_arrival < len(coming) and coming[next_arrival][0] <= now:
                t, queue, priority = coming[next_arrival]
                clock.now = t
                job_id = q.enqueue("sim", {}, priority=priority, queue=queue)
                records[job_id] = {"id": job_id, "queue": queue, "priority": priority, "arrived_s": t}
                next_arrival += 1
            clock.now = now
            for w in range(workers):
                held = holding[w]
                if held is not None and held[1] <= tick:
                    job, _ = held
                    q.complete(job)  # type: ignore[arg-type]
                    record = records[job.id]  # type: ignore[attr-defined]
                    record["done_s"] = now
                    done_so_far[record["queue"]] += 1
                    holding[w] = None
                if holding[w] is None and tick < n_ticks:
                    scopes = [[name] for name in turns[w].order()] if turns else [names]
                    for scope in scopes:
                        jobs = q.claim(f"w{w}", queues=scope)
                        if jobs:
                            (job,) = jobs
                            records[job.id]["claimed_s"] = now
                            holding[w] = (job, tick + service_ticks)
                            break
            if tick % round(1 / TICK_S) == 0:
                progress_rows.append({"t_s": now, **done_so_far})
    jobs = pd.DataFrame(
        list(records.values()), columns=["id", "queue", "priority", "arrived_s", "claimed_s", "done_s"]
    )
    jobs["waiting"] = jobs["claimed_s"].isna()
    jobs["wait_s"] = jobs["claimed_s"].fillna(duration_s) - jobs["arrived_s"]
    return SimResult(
        mode,
        streams,
        workers,
        float(service_s),
        float(duration_s),
        weights,
        jobs,
        pd.DataFrame(progress_rows),
    )


def compare(
    mix: str | Sequence[Arrivals] = DEFAULT_MIX, *, folder: Folder = None, **settings: object
) -> dict[str, SimResult]:
    """The same arrivals under strict priorities and under fair turns."""
    return {mode: simulate(mix, fair=mode == "fair", folder=folder, **settings) for mode in MODES}  # type: ignore[arg-type]


def p95(values: pd.Series) -> float:
    return float(values.quantile(0.95)) if len(values) else math.nan


def wait_table(runs: Mapping[str, SimResult], by: str = "priority") -> pd.DataFrame:
    """Per priority (or per queue, or per ["queue", "priority"]) and mode: jobs arrived, claimed,
    still waiting at the end, and the median and 95th percentile wait. A job still waiting
    counts with the time it has waited so far (a lower bound on its wait)."""
    keys = [by] if isinstance(by, str) else list(by)
    frames = []
    for mode, run in runs.items():
        grouped = run.jobs.groupby(keys)
        frame = pd.DataFrame(
            {
                "arrived": grouped.size(),
                "claimed": grouped["claimed_s"].count(),
                "still waiting": grouped["waiting"].sum().astype(int),
                "median wait (s)": grouped["wait_s"].median().round(1),
                "p95 wait (s)": grouped["wait_s"].apply(p95).round(1),
            }
        )
        frame["mode"] = mode
        frames.append(frame.reset_index())
    table = pd.concat(frames, ignore_index=True).set_index(["mode", *keys])
    if keys == ["priority"]:
        table = table.sort_index(level=["mode", "priority"], ascending=[False, False])
    return table


def completions_table(runs: Mapping[str, SimResult]) -> pd.DataFrame:
    """Per mode and queue: jobs completed, as a rate and as a share of all completions, beside
    the rate jobs arrived at and the rate fair turns guarantee (the weight's share of the
    capacity, or the arrival rate if lower)."""
    rows = []
    for mode, run in runs.items():
        done, shares = run.completions(), run.shares()
        arrived, guaranteed = run.arrival_rates(), run.guaranteed_rates()
        for queue in run.queues:
            rows.append(
                {
                    "mode": mode,
                    "queue": queue,
                    "completed": done[queue],
                    "share of completions": round(shares[queue], 3),
                    "arrived (jobs/s)": round(arrived[queue], 2),
                    "completed (jobs/s)": round(done[queue] / run.duration_s, 2),
                    "fair turns guarantee (jobs/s)": round(guaranteed[queue], 2),
                }
            )
    return pd.DataFrame(rows).set_index(["mode", "queue"])


def _bars(ax, runs: Mapping[str, SimResult], by: str, order: list) -> None:
    width = 0.38
    for i, (mode, run) in enumerate(runs.items()):
        grouped = run.jobs.groupby(by)["wait_s"]
        med = [grouped.median().get(k, math.nan) for k in order]
        top = [p95(run.jobs.loc[run.jobs[by] == k, "wait_s"]) for k in order]
        xs = [k + (i - 0.5) * width for k in range(len(order))]
        ax.bar(xs, med, width, color=MODE_COLOURS[mode], label=f"{mode}: median")
        ax.scatter(xs, top, marker="_", s=160, color="black", zorder=3, label="p95" if i == 1 else None)
    ax.set_xticks(range(len(order)), [str(k) for k in order])


def plot_waits(runs: Mapping[str, SimResult]):
    """Waiting time by priority (left) and by queue (right), strict beside fair: bars are
    medians, black ticks the 95th percentile."""
    fig, (left, right) = new_figure(1, 2, sharey=True)
    any_run = next(iter(runs.values()))
    priorities = sorted(any_run.jobs["priority"].unique(), reverse=True)
    _bars(left, runs, "priority", priorities)
    _bars(right, runs, "queue", any_run.queues)
    left.set_xlabel("priority (claimed highest first)")
    right.set_xlabel("queue")
    left.set_ylabel("wait before a claim (s)")
    left.legend(loc="upper left", fontsize="x-small")
    fig.suptitle(
        f"{any_run.workers} workers, {any_run.service_s:g} s per job, {any_run.duration_s:g} s of arrivals",
        fontsize="medium",
    )
    return fig


def plot_progress(runs: Mapping[str, SimResult]):
    """Jobs completed per queue over time, strict (left) and fair (right): a flat line is a
    queue that is starved."""
    fig, axes = new_figure(1, len(runs), sharey=True)
    axes = [axes] if len(runs) == 1 else list(axes)
    for ax, (mode, run) in zip(axes, runs.items(), strict=True):
        for queue in run.queues:
            ax.plot(run.progress["t_s"], run.progress[queue], color=COLOURS.get(queue), label=queue)
        ax.set_title(
            mode if mode == "strict" else f"fair ({', '.join(f'{q}:{w}' for q, w in run.weights.items())})",
            fontsize="medium",
        )
        ax.set_xlabel("simulated time (s)")
    axes[0].set_ylabel("jobs completed")
    axes[0].legend(loc="upper left", fontsize="small")
    return fig


def medians_by_priority(run: SimResult, queue: str | None = None) -> dict[int, float]:
    """Median wait per priority (highest first), within one queue or across all of them."""
    jobs = run.jobs if queue is None else run.jobs[run.jobs["queue"] == queue]
    medians = jobs.groupby("priority")["wait_s"].median()
    return {int(p): float(medians[p]) for p in sorted(medians.index, reverse=True)}


def fairness_panel(initial: Mapping[str, SimResult] | None = None, folder: Folder = None):
    """Choose the mix of arrivals, the number of workers and strict or fair claims (with the
    weights of the fair turns), then press the button: the simulation runs again and the
    plots and table follow."""
    import ipywidgets as widgets

    style = {"description_width": "initial"}
    mix = widgets.Dropdown(options=list(MIXES), value=DEFAULT_MIX, description="arrivals", style=style)
    workers = widgets.IntSlider(
        value=WORKERS, min=1, max=12, description="workers", style=style, continuous_update=False
    )
    mode = widgets.Dropdown(
        options=[("strict priorities", "strict"), ("fair turns", "fair")], value="fair", description="claims"
    )
    queues = widgets.Text(value=DEFAULT_QUEUES, description="turns (queue:weight)", style=style)
    button = widgets.Button(description="simulate", button_style="primary")
    status = widgets.HTML()
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))
    waits = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))

    def describe(run: SimResult) -> str:
        demand = sum(a.rate for a in run.mix)
        return (
            f"<b>{run.mode}</b>: {demand:g} jobs/s arrive, {run.workers} workers serve "
            f"{run.capacity:g} jobs/s; completed per queue: "
            + ", ".join(f"{q} {n}" for q, n in run.completions().items())
        )

    def show(runs: Mapping[str, SimResult], note: str) -> None:
        table.value = html_table(wait_table(runs, by=["queue", "priority"]).reset_index())
        picture.value = figure_png(plot_progress(runs))
        waits.value = figure_png(plot_waits(runs))
        status.value = note

    def on_click(_button: object = None) -> None:
        button.disabled = True
        status.value = "simulating …"
        try:
            run = simulate(
                mix.value,
                fair=mode.value == "fair",
                workers=workers.value,
                queues=queues.value,
                folder=folder,
            )
            show({run.mode: run}, describe(run))
        except InvalidArgument as exc:
            status.value = f"<b>not run</b>: {exc}"
        except KeyboardInterrupt:
            status.value = "<b>interrupted</b>; press the button to simulate again"
        finally:
            button.disabled = False

    button.on_click(on_click)
    if initial is not None:
        show(initial, "<b>the runs above</b>, strict and fair; choose and press <i>simulate</i> to run one")
    else:
        status.value = "<b>choose and press <i>simulate</i></b>"
    controls = widgets.VBox([widgets.HBox([mix, workers]), widgets.HBox([mode, queues, button])])
    return widgets.VBox([controls, status, picture, waits, table])
