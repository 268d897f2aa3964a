"""Reading the benchmark's results back: the targets, the printed report, and the table
and plot notebook 09 shows."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from .contenders import DEFAULT

# In a checkout the results live beside the course's other figures, in data/; an
# installed package has no data/ folder, so they go to the working directory.
_DATA_FOLDER = Path(__file__).resolve().parents[2] / "data"
DATA_FILE = (_DATA_FOLDER if _DATA_FOLDER.is_dir() else Path.cwd()) / "bench_results.json"
TARGETS = {"worker_loop_ratio": 5.0, "huey_worker_ratio": 3.0, "empty_poll_ratio": 3.0, "claim_growth": 1.5}
LOG_TICKS = (100, 300, 1_000, 3_000, 10_000, 30_000, 100_000)


def round_ratios(runs: Sequence[dict[str, Any]], key: str, other: str, procs: int) -> list[float]:
    """key's jobs/s divided by other's, round by round, at `procs` processes."""
    speed = {(r["contender"], r["round"]): r["jobs_per_s"] for r in runs if r["procs"] == procs}
    return [
        value / speed[other, rnd]
        for (name, rnd), value in speed.items()
        if name == key and value and speed.get((other, rnd))
    ]


def paired_ratio(runs: Sequence[dict[str, Any]], key: str, other: str, procs: int) -> float | None:
    """The median over rounds of key's jobs/s divided by other's in the same round (a
    slow spell on the machine hits both drains of a round, so it cancels out)."""
    ratios = round_ratios(runs, key, other, procs)
    return round(statistics.median(ratios), 2) if ratios else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and whether it was met."""
    rows = []
    by_key = {(row["contender"], row["procs"]): row for row in results["summary"]}
    for (key, procs), row in sorted(by_key.items(), key=lambda item: item[0][1]):
        if key != DEFAULT or row["ratio_to_tutorial"] is None:
            continue
        if ("tutorial_code", procs) in by_key:  # the tutorial's code on its own table: the check
            rows.append(
                _target(
                    f"worker loop vs the tutorial's code, {procs} proc",
                    paired_ratio(results["runs"], DEFAULT, "tutorial_code", procs),
                    ">=",
                    TARGETS["worker_loop_ratio"],
                )
            )
        rows.append(
            _target(
                f"worker loop vs the tutorial's statements, {procs} proc",
                row["ratio_to_tutorial"],
                ">=",
                TARGETS["worker_loop_ratio"],
            )
        )
        if ("huey_worker", procs) in by_key:
            rows.append(
                _target(
                    f"worker loop vs huey's worker path, {procs} proc",
                    paired_ratio(results["runs"], DEFAULT, "huey_worker", procs),
                    ">=",
                    TARGETS["huey_worker_ratio"],
                )
            )
    poll = results["empty_poll"]
    rows.append(_target("empty claim: tutorial / labqueue", poll["ratio"], ">=", TARGETS["empty_poll_ratio"]))
    rows.append(
        {
            "target": "claim() answers while another connection holds the write lock",
            "value": poll["labqueue_claim_while_writer_holds_lock"],
            "goal": True,
            "met": poll["labqueue_claim_while_writer_holds_lock"] is True,
        }
    )
    latency = results["claim_latency"]
    sizes = latency["sizes"]
    rows.append(
        _target(
            f"claim with {sizes[-1]['finished']:,} vs {sizes[0]['finished']:,} finished",
            latency["growth"],
            "<=",
            TARGETS["claim_growth"],
        )
    )
    return rows


def _target(name: str, value: float | None, op: str, goal: float) -> dict[str, Any]:
    met = value is not None and (value >= goal if op == ">=" else value <= goal)
    return {"target": name, "value": value, "goal": f"{op} {goal}", "met": met}


def report(results: dict[str, Any]) -> str:
    """The results as the text the command prints."""
    meta = results["meta"]
    sizes = meta["sizes"]
    lines = [
        f"labqueue bench: {sizes['jobs']:,} no-op jobs per drain, {sizes['rounds']} round(s), "
        f"SQLite {meta['sqlite']}, Python {meta['python']}, {meta['cpus']} CPUs, load {meta['load_average']}",
        f"durability: {meta['settings']}",
        *(["QUICK MODE: sizes for a smoke test; these figures measure nothing"] if meta.get("quick") else []),
        "",
        f"{'contender':<44}{'procs':>5}{'jobs/s':>10}{'× tutorial':>12}{'deliveries':>12}{'distinct':>10}"
        f"  finish",
    ]
    for row in sorted(results["summary"], key=lambda r: (r["procs"], -r["median_jobs_per_s"])):
        ratio = f"{row['ratio_to_tutorial']:.2f}" if row["ratio_to_tutorial"] is not None else "-"
        lines.append(
            f"{row['label']:<44}{row['procs']:>5}{row['median_jobs_per_s']:>10,.0f}{ratio:>12}"
            f"{row['deliveries']:>12,}{row['distinct']:>10,}  {row['finish']}"
            + (f"  DUPLICATES: {row['duplicates']}" if row["duplicates"] else "")
            + (f"  MISSED: {row['missed']}" if row["missed"] else "")
            + (f"  LEFT IN STORE: {row['left_in_store']}" if row.get("left_in_store") else "")
        )
    poll = results["empty_poll"]
    lines += [
        "",
        f"empty queue: the tutorial's claim {poll['tutorial_empty_claim_us']:.1f} µs, labqueue's claim() "
        f"{poll['labqueue_empty_claim_us']:.1f} µs ({poll['ratio']:.1f}×); while another connection "
        f"holds the write lock labqueue's {_answers(poll['labqueue_claim_while_writer_holds_lock'])}, "
        f"the tutorial's {_answers(poll['tutorial_claim_while_writer_holds_lock'])}",
    ]
    latency = results["claim_latency"]
    for size in latency["sizes"]:
        lines.append(
            f"claim with {size['finished']:>9,} finished jobs: labqueue's claim() {size['claim_ms']:.3f} ms, "
            f"the tutorial's {size['tutorial_claim_ms']:.3f} ms (median of {latency['claims'] // 2})"
        )
    lines += [
        "",
        "per job, one process, in this process (CPU time is the median over rounds):",
        f"{'':<44}{'CPU µs':>8}{'statements':>12}{'write tx':>10}{'WAL frames':>12}",
    ]
    for row in results.get("profile", []):
        lines.append(
            f"{row['label']:<44}{row['cpu_us_per_job']:>8.1f}{row['statements_per_job']:>12.2f}"
            f"{row['write_transactions_per_job']:>10.2f}{row['wal_frames_per_job']:>12.2f}"
        )
    lines += ["", "targets:"]
    for t in results["targets"]:
        lines.append(
            f"  {t['target']:<48} {t['value']!s:>6}  goal {t['goal']!s:<7} {'met' if t['met'] else 'MISSED'}"
        )
    return "\n".join(lines)


def _answers(ok: bool) -> str:
    return "answers" if ok else "is refused (busy)"


def load_results(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The saved results of a full run (data/bench_results.json unless told otherwise)."""
    path = Path(path) if path is not None else DATA_FILE
    if not path.is_file():
        raise InvalidArgument(f"no bench results at {path}; run python -m labqueue.bench first")
    return json.loads(path.read_text())


def summary_frame(results: dict[str, Any]) -> Any:
    """The summary as a pandas table, fastest first within each process count."""
    import pandas as pd

    columns = ["label", "procs", "median_jobs_per_s", "ratio_to_tutorial", "deliveries", "distinct", "finish"]
    frame = pd.DataFrame(results["summary"])[columns]
    return frame.sort_values(["procs", "median_jobs_per_s"], ascending=[True, False]).reset_index(drop=True)


def plot_comparison(results: dict[str, Any], ax: Any = None) -> Any:
    """Median jobs/s of every contender, 1 and N processes side by side, on a log axis,
    with whiskers from the slowest to the fastest round. Returns the matplotlib Figure;
    touches no global matplotlib state."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    summary = results["summary"]
    procs = sorted({row["procs"] for row in summary})
    labels: list[str] = []
    for row in sorted(summary, key=lambda r: -r["median_jobs_per_s"]):
        if row["label"] not in labels:
            labels.append(row["label"])
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    else:
        fig = ax.figure
    height = 0.8 / len(procs)
    by_key = {(row["label"], row["procs"]): row for row in summary}
    for i, p in enumerate(procs):
        ys = [labels.index(label) + (i - (len(procs) - 1) / 2) * height for label in labels]
        rows = [by_key.get((label, p), {}) for label in labels]
        values = [row.get("median_jobs_per_s", 0) for row in rows]
        # whiskers from the slowest to the fastest round, where the rounds are recorded
        low = [v - row.get("min_jobs_per_s", v) for v, row in zip(values, rows, strict=True)]
        high = [row.get("max_jobs_per_s", v) - v for v, row in zip(values, rows, strict=True)]
        ax.barh(
            ys,
            values,
            height=height,
            xerr=[low, high],
            error_kw={"elinewidth": 0.6, "capsize": 1.5},
            label=f"{p} process{'es' if p > 1 else ''}",
        )
        for y, label in zip(ys, labels, strict=True):
            row = by_key.get((label, p))
            if row and row["duplicates"]:
                ax.annotate(
                    f" {row['duplicates']} duplicate deliveries",
                    (row.get("max_jobs_per_s", row["median_jobs_per_s"]), y),
                    va="center",
                    fontsize=6,
                )
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(LOG_TICKS))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("no-op jobs/s (median, whiskers: range of rounds; log scale)", fontsize=8)
    ax.set_title("Draining the same queue: labqueue, its peers and bare SQLite", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.tick_params(axis="x", labelsize=7)
    return fig
