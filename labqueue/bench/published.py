"""The benchmark figures the guide's benchmarks page (docs/package/benchmarks.md) publishes,
written from the data files the benchmarks save, never typed by hand.

    python -m labqueue.bench figures            run the benchmarks, save data/, rewrite the page
    python -m labqueue.bench figures --page     rewrite the page's figures from the saved data/ only

Each figure paragraph of the page sits between two markers,

    <!-- figures: bench -->  ...  <!-- /figures -->

and is the text `render(name, results)` makes from its data file, so a test can check that
every published figure is the saved run's (tests/test_published_figures.py), and a new run
rewrites them all at once. Each paragraph names its data file, the date, the CPUs and the
load of the run that made it: figures move with the machine's load, ratios within a run
much less.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .report import DATA_FILE, paired_ratio

DATA = DATA_FILE.parent
PAGE = DATA.parent / "docs" / "package" / "benchmarks.md"
FILES = {
    "bench": "bench_results.json",
    "bench_pg": "bench_pg.json",
    "bench_pg_peers": "bench_pg_peers.json",
    "bench_pg_peers_delay": "bench_pg_peers_delay.json",
    "wakeup": "bench_wakeup_worker.json",
}
# How each data file is made: the command `figures` runs (as `python -m ...`).
COMMANDS = {
    "bench": ["labqueue.bench"],
    "bench_pg": ["labqueue.bench", "pg"],
    "bench_pg_peers": ["labqueue.bench", "pg-peers"],
    "bench_pg_peers_delay": ["labqueue.bench", "pg-peers", "--delay-ms", "0.5"],  # after the socket's run
    "wakeup": [
        "labqueue.bench",
        "wakeup",
        "--real-worker",
        "--idle",
        "20",
        "--out",
        str(DATA / FILES["wakeup"]),
    ],
}
BLOCK = re.compile(r"(<!-- figures: (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(\n<!-- /figures -->)", re.DOTALL)


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(value: float) -> str:
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def _load(meta: dict[str, Any]) -> str:
    load = meta.get("load_average")
    return "load unknown" if not load else f"load {load[0]:.2f}"


def render_bench(results: dict[str, Any]) -> str:
    meta, runs = results["meta"], results["runs"]
    row = {(r["contender"], r["procs"]): r for r in results["summary"]}
    procs = sorted({p for (key, p) in row if key == "labqueue_b10"})
    sizes = meta["sizes"]

    def speeds(key: str) -> str:
        return " / ".join(_n(row[key, p]["median_jobs_per_s"]) for p in procs)

    def ratios(other: str) -> str:
        return " / ".join(_x(paired_ratio(runs, "labqueue_b10", other, p)) for p in procs)

    return (
        f"One run (`data/bench_results.json`, {meta['date'][:10]}, {meta['cpus']} CPUs, {_load(meta)}; "
        f"{sizes['jobs']:,} no-op jobs per drain, {sizes['rounds']} rounds, medians; a ratio is the "
        f"median of the rounds' paired ratios), with {' / '.join(map(str, procs))} worker process(es): "
        f"labqueue's worker loop at batch 10 drains {speeds('labqueue_b10')} jobs/s, "
        + (
            f"{ratios('tutorial_code')} the tutorial's code on its own table "
            f"({speeds('tutorial_code')} jobs/s: schema version 1, rows as sqlite3.Row, "
            "a frozen dataclass per job), "
            f"{ratios('tutorial_l1')} its statements alone on labqueue's current table "
            f"({speeds('tutorial_l1')} jobs/s), "
            if ("tutorial_code", procs[0]) in row
            else f"{ratios('tutorial_l1')} the tutorial's statements ({speeds('tutorial_l1')} jobs/s), "
        )
        + (
            f"{ratios('huey_worker')} huey's worker path (`dequeue()` + `execute()`: "
            f"{speeds('huey_worker')} jobs/s) and "
            if ("huey_worker", procs[0]) in row
            else "and "  # a run from before the bench raced huey's worker path
        )
        + f"{ratios('huey')} huey's storage calls alone ({speeds('huey')} jobs/s). "
        "huey deletes a job as it hands it out (no lease: a worker that dies mid-job loses it); "
        "labqueue leases it and fences its completion. Every contender ran in WAL with synchronous=NORMAL"
        + _heap_line(meta)
        + _flushes(results)
    )


def _heap_line(meta: dict[str, Any]) -> str:
    """Which processes kept their heap's top (labqueue.heap), as the run recorded it."""
    if meta.get("heap") == "every contender":
        return (
            ", in processes that all kept their heap's top as `labqueue worker` does (labqueue.heap; without "
            "it the tutorial's code ran at half speed here, glibc handing its heap back at every statement)."
        )
    return (
        "; labqueue's worker processes kept their heap's top as `labqueue worker` does (labqueue.heap), the "
        "others ran with their allocator's defaults."
    )


def _flushes(results: dict[str, Any]) -> str:
    """Why the ratios to the tutorial move between runs: what each loop gives the disk to flush."""
    frames = {r["contender"]: r["wal_frames_per_job"] for r in results.get("profile", [])}
    if not {"tutorial_l1", "labqueue_b10"} <= frames.keys():
        return ""  # a run from before the bench profiled both
    return (
        f" The tutorial's statements write {frames['tutorial_l1']:.2f} WAL frames (pages) per job, "
        f"labqueue's loop {frames['labqueue_b10']:.2f} (the profile in the same file); each checkpoint "
        "flushes them to disk, so the tutorial's figure, and every ratio to it, moves between runs with how "
        "fast the disk flushes."
    )


def render_bench_pg(results: dict[str, Any]) -> str:
    meta, summary = results["meta"], results["summary"]
    latency = {row["mode"]: row for row in results["latency"]}
    sizes = meta["sizes"]
    procs = " / ".join(str(r["procs"]) for r in summary)
    duplicates = sum(r["duplicates"] for r in summary)
    durability = (
        " PostgreSQL flushed its log at every commit (fsync and synchronous_commit on), SQLite in WAL"
        " with synchronous=NORMAL does not: not the same promise on a power cut."
        if "durability" in meta
        else ""
    )
    return (
        f"One run (`data/bench_pg.json`, {meta['date'][:10]}, {meta['cpus']} CPUs, {_load(meta)}; "
        f"{sizes['jobs']:,} jobs per drain, {sizes['rounds']} rounds, medians): SQLite "
        f"{' / '.join(_n(r['sqlite_jobs_per_s']) for r in summary)} jobs/s with {procs} workers, "
        f"PostgreSQL {' / '.join(_n(r['postgres_jobs_per_s']) for r in summary)}, PostgreSQL/SQLite "
        f"{' / '.join(_x(r['ratio_pg_to_sqlite']) for r in summary)}, {duplicates} duplicates; pick-up "
        f"median {_ms(latency['listen']['median_ms'])} ms with LISTEN/NOTIFY against "
        f"{_ms(latency['poll_50ms']['median_ms'])} ms polling every 50 ms.{durability}"
    )


class _PeerFigures:
    """A pg-peers run's rows by (contender, workers), and each contender's figures over the
    run's worker counts, "a / b"."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.row = {(r["contender"], r["procs"]): r for r in results["summary"]}
        self.procs = sorted({p for (key, p) in self.row if key == "labqueue"})

    def speeds(self, key: str) -> str:
        return " / ".join(_n(self.row[key, p]["median_jobs_per_s"]) for p in self.procs)

    def ratios(self, key: str) -> str:
        return " / ".join(_x(self.row[key, p]["labqueue_ratio"]) for p in self.procs)


def render_bench_pg_peers(results: dict[str, Any]) -> str:
    meta = results["meta"]
    figures = _PeerFigures(results)
    row, procs, speeds, ratios = figures.row, figures.procs, figures.speeds, figures.ratios
    sizes = meta["sizes"]

    def spread(key: str) -> str:
        ranges = [sorted(row[key, p].get("labqueue_ratio_rounds") or [0.0]) for p in procs]
        return " / ".join(f"{r[0]:.2f}-{r[-1]:.2f}x" for r in ranges)

    # A run from before the bench raced procrastinate has no figure for it.
    procrastinate = ("procrastinate", procs[0]) in row
    return (
        f"One run (`data/bench_pg_peers.json`, {meta['date'][:10]}, {meta['cpus']} CPUs, {_load(meta)}; "
        f"{sizes['jobs']:,} jobs per drain, {sizes['rounds']} rounds, medians; each drain timed until the "
        f"store held every job as finished; PostgreSQL {meta['postgresql']} with fsync and "
        f"synchronous_commit on), with {' / '.join(map(str, procs))} worker process(es): labqueue's "
        f"worker loop drains {speeds('labqueue')} jobs/s"
        + _without_function(row, procs, speeds, ratios)
        + f", pgqueuer {meta['pgqueuer']} "
        f"{speeds('pgqueuer')} (labqueue {ratios('pgqueuer')} it: the median of paired rounds that ranged "
        f"{spread('pgqueuer')}), "
        + (
            f"procrastinate {meta.get('procrastinate')}'s worker, which fetches one job at a time, "
            f"{speeds('procrastinate')} (labqueue {ratios('procrastinate')} it, paired rounds "
            f"{spread('procrastinate')}), "
            if procrastinate
            else ""
        )
        + "and a bare SKIP "
        f"LOCKED loop that marks ten jobs done as it takes them {speeds('bare')} (labqueue "
        f"{ratios('bare')} that bound). pgqueuer's completion is logged in batches and not fenced by a "
        + (
            "token, nor is procrastinate's, where a dead worker's job stays 'doing' until a periodic "
            "task of the application's retries stalled jobs; "
            if procrastinate
            else "token; "
        )
        + "the bare loop has no lease at all, so a worker that dies loses what it took."
        + _targets(results)
    )


def _without_function(
    row: dict[tuple[str, int], Any],
    procs: list[int],
    speeds: Callable[[str], str],
    ratios: Callable[[str], str],
) -> str:
    """The same loop with PostgreSQL's settle function off, in a run that raced it."""
    if ("labqueue_tx", procs[0]) not in row:
        return ""
    return (
        f" ({speeds('labqueue_tx')} with its settle function switched off, five round trips a batch "
        f"instead of one: {ratios('labqueue_tx')} as fast with it)"
    )


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _targets(results: dict[str, Any]) -> str:
    """The run's targets, each met or missed by how much, and each distinct reason for a
    miss once, lettered (a run from before they were written down has none)."""
    found = [t for t in results.get("targets", []) if "missed_by" in t]
    if not found:
        return ""
    reasons: list[str] = []
    said = []
    for t in found:
        if t["met"]:
            said.append(f"{t['target']} {t['goal']}: {t['value']:.2f}x, met")
            continue
        if t["why"] not in reasons:
            reasons.append(t["why"])
        letter = LETTERS[reasons.index(t["why"])]
        value = f"{t['value']:.2f}x, missed by {t['missed_by']:.2f}"
        said.append(f"{t['target']} {t['goal']}: {value} ({letter})")
    why = " ".join(f"({LETTERS[n]}) {reason}." for n, reason in enumerate(reasons))
    return " Targets: " + "; ".join(said) + "." + (f" {why}" if why else "")


def render_bench_pg_peers_delay(results: dict[str, Any]) -> str:
    meta = results["meta"]
    figures = _PeerFigures(results)
    row, procs, speeds, ratios = figures.row, figures.procs, figures.speeds, figures.ratios
    trips = meta["round_trip_ms"]

    return (
        f"The same race with the workers reaching the server through a proxy that holds each byte "
        f"{meta['delay_ms_each_way']:g} ms each way (a round trip {trips['through the proxy']:.2f} ms "
        f"against {trips['direct']:.2f} ms direct; `data/bench_pg_peers_delay.json`, {meta['date'][:10]}, "
        f"{meta['sizes']['jobs']:,} jobs per drain, {meta['sizes']['rounds']} rounds), with "
        f"{' / '.join(map(str, procs))} worker process(es): labqueue {speeds('labqueue')} jobs/s"
        + _without_function(row, procs, speeds, ratios)
        + ", pgqueuer "
        f"{speeds('pgqueuer')} (labqueue {ratios('pgqueuer')} it), procrastinate {speeds('procrastinate')}, "
        f"the bare loop {speeds('bare')} (labqueue {ratios('bare')} it)." + _targets(results)
    )


def render_wakeup(results: dict[str, Any]) -> str:
    modes = {row["mode"]: row for row in results["modes"]}
    sizes, machine = results["sizes"], results["machine"]

    def median(mode: str) -> str:
        return _ms(modes[mode]["median_ms"])

    return (
        f"One run ({sizes['jobs']} jobs, {sizes['idle_seconds']:g} s idle, {machine['cpus']} CPUs, "
        f"load {machine['load_1min_after']:.2f} after, `data/bench_wakeup_worker.json`): median pick-up "
        f"{median('wakeup')} ms with hints, {median('poll_50ms')} ms polling every 50 ms, "
        f"{median('poll_1s')} ms polling every second; idle CPU "
        f"{modes['wakeup']['idle_cpu_ms_per_s']:.1f} ms/s against "
        f"{modes['poll_50ms']['idle_cpu_ms_per_s']:.1f} ms/s for the 50 ms poller."
    )


RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "bench": render_bench,
    "bench_pg": render_bench_pg,
    "bench_pg_peers": render_bench_pg_peers,
    "bench_pg_peers_delay": render_bench_pg_peers_delay,
    "wakeup": render_wakeup,
}


def render(name: str, data: Path = DATA) -> str:
    """The paragraph `name` as its saved data file says it, wrapped at 100 columns."""
    text = RENDER[name](json.loads((data / FILES[name]).read_text()))
    return _wrap(text)


def _wrap(text: str, width: int = 100) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def blocks(text: str) -> dict[str, str]:
    """The figure paragraphs `text` holds, by name."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(text)}


def rewrite(page: Path = PAGE, data: Path = DATA) -> list[str]:
    """Rewrite every figure paragraph of `page` from `data`; the names that changed."""
    text = page.read_text()
    changed: list[str] = []

    def fresh(match: re.Match[str]) -> str:
        body = render(match["name"], data)
        if body != match["body"]:
            changed.append(match["name"])
        return f"{match.group(1)}{body}{match.group(4)}"

    new = BLOCK.sub(fresh, text)
    if new != text:
        page.write_text(new)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench figures",
        description=f"Run the benchmarks whose figures {PAGE.relative_to(DATA.parent)} publishes, save "
        "them in data/, and rewrite its figure paragraphs from them.",
    )
    parser.add_argument(
        "--page", "--readme", action="store_true", help="only rewrite the page from the saved data/"
    )
    args = parser.parse_args(argv)
    if not args.page:
        for name, command in COMMANDS.items():
            print(f"== {name}: python -m {' '.join(command)}", flush=True)
            subprocess.run([sys.executable, "-m", *command], check=True)
    changed = rewrite()
    said = ", ".join(changed) if changed else "no"
    print(f"{PAGE.relative_to(DATA.parent)}: {said} figure paragraph(s) rewritten")
    return 0
