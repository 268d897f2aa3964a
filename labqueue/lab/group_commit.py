"""Notebook 09, group commit: how fast the worker loop drains at each batch size, and how
many jobs a crash makes run twice at each batch size.

The speed runs drain queues of no-op jobs in this process with ``labqueue.worker.run``,
batch sizes interleaved round by round. The crash runs start real worker processes
(``python -m labqueue.worker --handlers labqueue.lab.group_commit``) whose handler
appends each run to a side file with one unbuffered write, and kills its own process
(``os._exit``) on the first attempt of one chosen job; a second worker then finishes
the queue, and the side file says which jobs ran twice.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import worker
from ..errors import InvalidArgument
from ..handlers import Handler
from ..procs import DB_FROM_ENVIRONMENT, location_environment
from ..queue import Effect, Job, JobQueue
from .demo_handlers import LEDGER_TABLE, ledger_effect
from .scratch import db_path

SPEED_SIZES: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
SPEED_JOBS = 2_000
SPEED_ROUNDS = 5
CRASH_SIZES: tuple[int, ...] = (1, 5, 10, 50)
CRASH_TRIALS = 4
CRASH_LEASE = 0.3  # seconds: how long the crashed worker's batch waits for the second worker
CRASH_TIMEOUT = 60.0
KIND = "recorded"
COUNT_LEDGER = "SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id"
COUNT_NOT_DONE = "SELECT COUNT(*) FROM jobs WHERE state != 'done'"


def _noop(job: Job, q: JobQueue) -> None:
    """Nothing: the speed runs measure the queue's own cost."""


def recorded(job: Job, q: JobQueue) -> Effect:
    """Append this run's job id to the side file named in the payload, in one unbuffered
    write (outside any transaction, so it survives the crash), and on the first attempt
    of the job marked `crash` kill this process. The effect records the accepted
    completion in the ledger, inside the completing transaction."""
    fd = os.open(job.payload["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id}\n".encode())
    finally:
        os.close(fd)
    if job.payload.get("crash") and job.attempts == 1:
        os._exit(1)  # no except, no finally: the batch in hand is never reported
    return ledger_effect(job)


# A worker loads these with --handlers labqueue.lab.group_commit.
HANDLERS: dict[str, Handler] = {KIND: recorded}


def _sizes(sizes: Sequence[int]) -> list[int]:
    sizes = list(sizes)
    if not sizes or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in sizes):
        raise InvalidArgument(f"batch sizes must be whole numbers of at least 1, got {sizes!r}")
    return sizes


def _count(name: str, value: object, low: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise InvalidArgument(f"{name} must be a whole number of at least {low}, got {value!r}")
    return value


# -- speed -------------------------------------------------------------------------------


def drain_once(batch: int, n_jobs: int, folder: str | os.PathLike[str] | None = None) -> float:
    """Drain a fresh queue of n_jobs no-op jobs with one in-process worker.run at this
    batch size; returns jobs per second (the run's wall time, queue opening included)."""
    path = db_path(f"gc_speed_{batch}", folder)
    with JobQueue(path) as q:
        q.enqueue_many("noop", ({} for _ in range(n_jobs)))
    start = time.perf_counter()
    handled = worker.run(str(path), "w", 30.0, None, handlers={"noop": _noop}, batch=batch, max_jobs=n_jobs)
    seconds = time.perf_counter() - start
    with JobQueue(path) as q:
        left = q.db.execute(COUNT_NOT_DONE).fetchone()[0]
    if handled != n_jobs or left:
        raise RuntimeError(f"batch {batch}: handled {handled} of {n_jobs}, {left} not done")
    return n_jobs / seconds


def measure_speed(
    sizes: Sequence[int] = SPEED_SIZES,
    n_jobs: int = SPEED_JOBS,
    rounds: int = SPEED_ROUNDS,
    folder: str | os.PathLike[str] | None = None,
) -> Any:
    """jobs/s for every batch size, rounds interleaved (each round visits every size), as
    a DataFrame with one row per drain: round, batch, jobs, jobs_per_s."""
    import pandas as pd
    from tqdm.auto import tqdm

    sizes = _sizes(sizes)
    n_jobs, rounds = _count("n_jobs", n_jobs), _count("rounds", rounds)
    rows = []
    with tqdm(total=len(sizes) * rounds, desc="drains", leave=False) as bar:
        for r in range(rounds):
            for b in sizes if r % 2 == 0 else reversed(sizes):
                rate = drain_once(b, n_jobs, folder)
                rows.append({"round": r + 1, "batch": b, "jobs": n_jobs, "jobs_per_s": rate})
                bar.update()
    return pd.DataFrame(rows)


def speed_summary(runs: Any) -> Any:
    """Median, lowest and highest jobs/s per batch size, and the median relative to batch 1."""
    table = runs.groupby("batch")["jobs_per_s"].agg(["median", "min", "max"]).round(0)
    table.columns = ["median_jobs_per_s", "min_jobs_per_s", "max_jobs_per_s"]
    if 1 in table.index:
        table["x_batch_1"] = (table["median_jobs_per_s"] / table.loc[1, "median_jobs_per_s"]).round(2)
    return table


def paired_ratio(runs: Any, fast: int = 10, slow: int = 1) -> float:
    """The median over rounds of (jobs/s at batch `fast`) / (jobs/s at batch `slow`),
    each ratio taken within one round, so the two drains ran side by side."""
    wide = runs.pivot(index="round", columns="batch", values="jobs_per_s")
    return float((wide[fast] / wide[slow]).median())


# -- re-runs after a crash ---------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """One crash: the batch size, the job that killed the first worker, and what ran."""

    batch: int
    jobs: int
    crash_job: int
    runs: dict[int, int]  # job id -> how many times its handler ran
    completions: dict[int, int]  # job id -> accepted completions (ledger rows)
    first_exit: int  # the first worker's exit status (1: it crashed)

    @property
    def reruns(self) -> int:
        """Jobs whose handler ran more than once."""
        return sum(1 for n in self.runs.values() if n > 1)

    @property
    def done_once(self) -> bool:
        """Every job ran and was completed exactly once."""
        ids = set(range(1, self.jobs + 1))
        return set(self.runs) == ids and self.completions == {i: 1 for i in ids}


def crash_command(path: Path, batch: int, lease: float) -> list[str]:
    """The first worker: `python -m labqueue.worker` with this module's handler, leaving
    at the first empty look (it should crash long before). Run it with
    location_environment(path): like every worker labqueue starts, it reads its queue's
    location from LABQUEUE_DB (DB is '-')."""
    return [
        sys.executable,
        "-m",
        "labqueue.worker",
        "--handlers",
        __name__,
        "--batch",
        str(batch),
        "--log-level",
        "ERROR",
        "--",
        DB_FROM_ENVIRONMENT,
        "crasher",
        str(lease),
        "0",
    ]


def _prepare(path: Path, batch: int, crash_job: int) -> tuple[int, Path]:
    """A fresh queue of three batches and two jobs, the crash marked on crash_job."""
    log = path.with_suffix(".runs")
    log.unlink(missing_ok=True)
    n_jobs = 3 * batch + 2
    with JobQueue(path) as q:
        q.db.execute(LEDGER_TABLE)
        for i in range(1, n_jobs + 1):
            q.enqueue(KIND, {"log": str(log), "crash": i == crash_job})
    return n_jobs, log


def crash_trials(
    sizes: Sequence[int] = CRASH_SIZES,
    trials: int = CRASH_TRIALS,
    *,
    lease: float = CRASH_LEASE,
    seed: int = 9,
    folder: str | os.PathLike[str] | None = None,
) -> list[Trial]:
    """For each batch size, `trials` crashes at a random job of the second batch.

    All first workers start together, each on its own queue, and each kills itself at
    its chosen job. After one lease, a second worker (worker.run in this process, with
    the same handler) finishes each queue; it stops once it has handled every job that
    was not done. The side file counts each handler run, the ledger each completion."""
    from tqdm.auto import tqdm

    sizes = _sizes(sizes)
    trials = _count("trials", trials)
    rng = random.Random(seed)
    plan = []
    for b in sizes:
        for t in range(trials):
            crash_job = b + rng.randint(1, b)  # a job of the second batch (ids b+1 .. 2b)
            path = db_path(f"gc_crash_{b}_{t}", folder)
            n_jobs, log = _prepare(path, b, crash_job)
            plan.append((b, crash_job, path, n_jobs, log))
    procs = [
        subprocess.Popen(
            crash_command(path, b, lease),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=location_environment(path),
        )
        for b, _, path, _, _ in plan
    ]
    try:
        exits = [p.wait(timeout=CRASH_TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = []
    for (b, crash_job, path, n_jobs, log), code in tqdm(
        list(zip(plan, exits, strict=True)), desc="second workers", leave=False
    ):
        with JobQueue(path) as q:
            left = q.db.execute(COUNT_NOT_DONE).fetchone()[0]
        worker.run(str(path), "finisher", lease, None, handlers=HANDLERS, batch=b, max_jobs=left)
        with JobQueue(path) as q:
            completions = dict(q.db.execute(COUNT_LEDGER).fetchall())
        runs = Counter(int(line) for line in log.read_text().split())
        results.append(Trial(b, n_jobs, crash_job, dict(runs), completions, code))
    return results


def crash_frame(trials: Sequence[Trial]) -> Any:
    """One row per trial: batch, the job that crashed (and its place in its batch), re-runs."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "batch": t.batch,
                "crash_job": t.crash_job,
                "place_in_batch": t.crash_job - t.batch,
                "reruns": t.reruns,
                "done_once": t.done_once,
            }
            for t in trials
        ]
    )


def crash_summary(trials: Sequence[Trial]) -> Any:
    """Mean and most re-runs per batch size, beside the bound (the batch size)."""
    frame = crash_frame(trials)
    table = frame.groupby("batch")["reruns"].agg(["count", "mean", "max"])
    table.columns = ["trials", "mean_reruns", "max_reruns"]
    table["bound"] = table.index
    return table


# -- the figure --------------------------------------------------------------------------


def plot(speed_runs: Any, trials: Sequence[Trial]) -> Any:
    """Two panels: median jobs/s against batch size (whiskers: lowest to highest round), and
    re-runs after a crash against batch size (mean, most, and the bound y = batch)."""
    from .assets import new_figure

    fig, (left, right) = new_figure(1, 2)
    speed = speed_summary(speed_runs)
    xs = list(speed.index)
    med = speed["median_jobs_per_s"]
    left.errorbar(
        xs,
        med,
        yerr=[med - speed["min_jobs_per_s"], speed["max_jobs_per_s"] - med],
        marker="o",
        capsize=2,
    )
    left.set_xscale("log")
    left.set_xticks(xs, [str(x) for x in xs])
    left.set_ylim(bottom=0)
    left.set_xlabel("batch size (jobs per transaction)")
    left.set_ylabel("jobs/s (one worker)")
    left.set_title("drain rate", fontsize=9)

    crashes = crash_summary(trials)
    bs = list(crashes.index)
    right.plot(bs, bs, color="grey", linestyle="--", label="bound: y = batch")
    right.plot(bs, crashes["max_reruns"], marker="v", linestyle="none", label="most")
    right.plot(bs, crashes["mean_reruns"], marker="o", label="mean")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xticks(bs, [str(b) for b in bs])
    right.set_yticks(bs, [str(b) for b in bs])
    right.minorticks_off()
    right.set_xlabel("batch size (jobs per transaction)")
    right.set_ylabel("jobs run twice per crash")
    right.set_title("re-runs after one crash", fontsize=9)
    right.legend(fontsize=7)
    return fig


def cost_per_job(results: dict[str, Any]) -> Any:
    """The benchmark's per-job profile (one process) as a table: CPU time, SQL statements,
    write transactions and WAL frames per job, for labqueue's loop at each batch size and
    the tutorial's statements."""
    import pandas as pd

    rows = [r for r in results.get("profile", []) if r["contender"].startswith(("labqueue_", "tutorial_"))]
    columns = [
        "label",
        "cpu_us_per_job",
        "statements_per_job",
        "write_transactions_per_job",
        "wal_frames_per_job",
    ]
    return pd.DataFrame(rows, columns=columns).set_index("label")
