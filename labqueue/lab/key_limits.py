"""Notebook 15's concurrency keys: real worker processes on one customer's flood and two quiet
customers, without a limit and with at most two running jobs per customer.

Each job is the demo kind `keyed`: it works for a moment and records, in the completing
transaction, when its run started and ended (labqueue.demo.handlers.RUNS_TABLE). The runs
read back give the chart of running jobs per customer over time, and the check's figures.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..demo.handlers import DEMO_HANDLERS, RUNS_TABLE, most_at_once
from ..demo.scratch import db_path
from ..pool import WorkerPool
from ..queue import JobQueue
from .assets import new_figure

# Jobs per customer, in the order they arrive: acme's flood first, then the two quiet ones.
CUSTOMERS: dict[str, int] = {"acme": 40, "globex": 8, "initech": 8}
COLOURS = {"acme": "tab:red", "globex": "tab:blue", "initech": "tab:green"}
WORKERS = 4
WORK_S = 0.1  # each job's run
LIMIT = 2
TIMEOUT_S = 90.0


def fill(path: Any, limit: int | None) -> None:
    """The customers' jobs in a fresh queue at `path`, keyed by customer when `limit` is given."""
    with JobQueue(path) as q:
        q.db.execute(RUNS_TABLE)
        for customer, count in CUSTOMERS.items():
            rule = {"concurrency_key": customer, "concurrency_limit": limit} if limit else {}
            for n in range(count):
                q.enqueue("keyed", {"key": customer, "n": n, "seconds": WORK_S}, **rule)


def run(limit: int | None, *, workers: int = WORKERS) -> Any:
    """Drain the customers' jobs with `workers` real worker processes; the runs as a table
    (customer, started_s, ended_s, seconds from the first start), in order of start."""
    import pandas as pd

    path = db_path(f"key_limits_{limit or 'none'}")
    fill(path, limit)
    with WorkerPool(path, workers, lease_seconds=30, idle_exit=0.5, handlers=[DEMO_HANDLERS]) as pool:
        pool.fill()
        deadline = time.monotonic() + TIMEOUT_S
        while pool.alive() and time.monotonic() < deadline:
            pool.check()
            time.sleep(0.05)
        if pool.alive():
            raise RuntimeError(f"the workers did not drain {sum(CUSTOMERS.values())} jobs in {TIMEOUT_S:g} s")
    with JobQueue(path) as q:
        rows = q.db.execute("SELECT run_key, started, ended FROM runs ORDER BY started").fetchall()
    runs = pd.DataFrame(rows, columns=["customer", "started_s", "ended_s"])
    start = runs["started_s"].min()
    runs[["started_s", "ended_s"]] -= start
    return runs


def running(runs: Any, step: float = 0.01) -> Any:
    """Running jobs per customer at each `step` seconds of the drain (a column per customer)."""
    import numpy as np
    import pandas as pd

    moments = np.arange(0.0, float(runs["ended_s"].max()) + step, step)
    counts = {
        customer: [int(((group["started_s"] <= t) & (group["ended_s"] > t)).sum()) for t in moments]
        for customer, group in runs.groupby("customer", sort=False)
    }
    return pd.DataFrame(counts, index=pd.Index(moments.round(3), name="t_s"))


def summary(results: Mapping[str, Any]) -> Any:
    """Per run and customer: the most jobs it had running at once, and when its first job
    started and its last ended (seconds from the drain's first start)."""
    import pandas as pd

    rows = []
    for name, runs in results.items():
        most = most_at_once(list(runs[["customer", "started_s", "ended_s"]].itertuples(index=False)))
        for customer, group in runs.groupby("customer", sort=False):
            rows.append(
                {
                    "run": name,
                    "customer": customer,
                    "jobs": len(group),
                    "most at once": most[customer],
                    "first start (s)": round(float(group["started_s"].min()), 2),
                    "last end (s)": round(float(group["ended_s"].max()), 2),
                }
            )
    return pd.DataFrame(rows).set_index(["run", "customer"])


def plot(results: Mapping[str, Any]):
    """Running jobs per customer over time, one panel per run: without a limit acme's flood
    takes every worker; with one, the quiet customers run beside it."""
    fig, axes = new_figure(1, len(results), sharey=True)
    axes = [axes] if len(results) == 1 else list(axes)
    for ax, (name, runs) in zip(axes, results.items(), strict=True):
        table = running(runs)
        for customer in table.columns:
            ax.step(table.index, table[customer], where="post", color=COLOURS.get(customer), label=customer)
        if "limit" in name:
            ax.axhline(LIMIT, color="grey", linestyle=":", linewidth=1)
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("time since the first start (s)")
    axes[0].set_ylabel("running jobs")
    axes[0].set_yticks(range(WORKERS + 1))
    axes[0].legend(loc="upper right", fontsize="x-small")
    fig.suptitle(
        f"{WORKERS} workers, {WORK_S:g} s per job, acme's {CUSTOMERS['acme']} jobs first", fontsize="medium"
    )
    return fig
