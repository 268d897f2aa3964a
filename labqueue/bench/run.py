"""How labqueue compares: its worker loop against its peers and bare SQLite.

    python -m labqueue.bench [--quick] [--jobs N] [--rounds R] [--procs 1 4] [--out FILE]
    python -m labqueue.bench pg ...       PostgreSQL beside SQLite (labqueue.bench.pg)
    python -m labqueue.bench wakeup ...   pick-up latency on SQLite (labqueue.bench.wakeup)
    python -m labqueue.bench dashboard    the dashboard's pages on a million-job SQLite queue
    python -m labqueue.bench dashboard-load   a pool's drain rate with 16 tabs on the dashboard, and without
    python -m labqueue.bench keys         a drain over concurrency keys beside one without

Drains the same no-op workload through every contender in `contenders`, with
1 and with 4 worker processes, round-robin over several rounds (the order rotates
each round), so a burst of load on a shared machine hits every contender alike. It
prints medians and ratios to labqueue used tutorial-style, and counts deliveries
against distinct jobs: a queue that hands one job to two workers is reported.
It also measures the idle poll against the tutorial's empty claim, the claim with
10,000 against 1,000,000 finished jobs in the table, and where a job's time goes
(CPU, statements, write transactions and WAL frames per job; `profile`). Results are written as
JSON (data/bench_results.json by default); `report` prints and draws them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..demo.scratch import work_folder
from ..drivers.sqlite.sql import SCHEMA
from ..errors import InvalidArgument, QueueBusy
from ..procs import run_together
from ..queue import JobQueue
from .contenders import CONTENDERS, SAME, TutorialStatements, child
from .profile import profile
from .report import DATA_FILE, report, targets
from .tally import machine, race_rounds, tally

BASELINE = "tutorial_l1"
RUN_TIMEOUT_SECONDS = 600.0
START_TIMEOUT_SECONDS = 120.0


class Sizes:
    """How big one run of the bench is."""

    def __init__(
        self,
        jobs: int = 10_000,
        rounds: int = 5,
        procs: Sequence[int] = (1, 4),
        polls: int = 2_000,
        finished: Sequence[int] = (10_000, 1_000_000),
        queued: int = 1_000,
        claims: int = 200,
    ) -> None:
        for name, value in (("jobs", jobs), ("rounds", rounds), ("polls", polls), ("claims", claims)):
            _whole(name, value)
        for value in procs:
            _whole("procs", value)
        for value in finished:
            _whole("finished", value)
        if claims > queued:
            raise InvalidArgument(f"claims must not exceed the {queued} queued jobs, got {claims}")
        self.jobs, self.rounds, self.procs = jobs, rounds, tuple(procs)
        self.polls, self.finished, self.queued, self.claims = polls, tuple(finished), queued, claims

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


QUICK = dict(jobs=150, rounds=1, procs=(1, 2), polls=200, finished=(1_000, 5_000), queued=100, claims=20)


# -- throughput -------------------------------------------------------------------------


def race(key: str, jobs: int, procs: int, folder: Path) -> dict[str, Any]:
    """Load `jobs` into a fresh store, release `procs` spawned workers at once, and
    time the drain from the release to the last worker's end."""
    contender = CONTENDERS[key]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    contender.load(folder, jobs)
    args = [(key, str(folder), f"w{i}") for i in range(procs)]
    reports, start = run_together(
        child, args, key, start_timeout=START_TIMEOUT_SECONDS, result_timeout=RUN_TIMEOUT_SECONDS
    )
    seconds = max(r[2] for r in reports) - start
    seen = [n for r in reports for n in r[3]]
    left = contender.left(folder)  # the store itself, read back after the drain
    return {
        "contender": key,
        "procs": procs,
        **tally(seen, jobs, seconds, left),
        "per_process": sorted((len(r[3]) for r in reports), reverse=True),
    }


def throughput(
    sizes: Sizes,
    keys: Sequence[str],
    folder: Path,
    progress: Callable[[str], None] = lambda line: None,
) -> list[dict[str, Any]]:
    """Every contender at every process count, round-robin: round r starts the order r
    places further on, so no contender always runs first or last."""

    def one(key: str, procs: int) -> dict[str, Any]:
        return race(key, sizes.jobs, procs, folder / key)

    return race_rounds(sizes.rounds, sizes.procs, keys, one, progress)


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median jobs/s per contender and process count, and the median of its paired
    per-round ratios to the tutorial's statements (each round's drain against the
    baseline's drain of the same round, so a slow spell on the machine cancels out)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["contender"], run["procs"]), []).append(run)
    base = {(r["procs"], r["round"]): r["jobs_per_s"] for r in runs if r["contender"] == BASELINE}
    rows = []
    for (key, procs), group in groups.items():
        speeds = [r["jobs_per_s"] or 0.0 for r in group]
        ratios = [
            (r["jobs_per_s"] or 0.0) / base[procs, r["round"]] for r in group if base.get((procs, r["round"]))
        ]
        rows.append(
            {
                "contender": key,
                "label": CONTENDERS[key].label,
                "procs": procs,
                "rounds": len(group),
                "median_jobs_per_s": round(statistics.median(speeds), 1),
                "min_jobs_per_s": round(min(speeds), 1),
                "max_jobs_per_s": round(max(speeds), 1),
                "ratio_to_tutorial": round(statistics.median(ratios), 2) if ratios else None,
                "ratio_rounds": [round(x, 2) for x in ratios],
                "deliveries": sum(r["deliveries"] for r in group),
                "distinct": sum(r["distinct"] for r in group),
                "duplicates": sum(r["deliveries"] - r["distinct"] for r in group),
                "missed": sum(r["missed"] for r in group),
                "left_in_store": sum(r.get("left_in_store", 0) for r in group),
                "finish": CONTENDERS[key].acked,
                "settings": CONTENDERS[key].settings,
            }
        )
    return rows


# -- the idle poll ------------------------------------------------------------------------


def empty_poll(sizes: Sizes, folder: Path) -> dict[str, Any]:
    """On an empty queue: labqueue's claim() (it looks with a read before it locks)
    against the tutorial's claim (a write transaction every time), interleaved over the
    rounds; and whether each one still answers while another connection holds the write
    lock."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "empty.db"
    _remove_db(path)
    tutorial_us, claim_us = [], []
    with JobQueue(path) as q:
        tutorial = TutorialStatements(path)
        try:
            for _ in range(sizes.rounds):
                tutorial_us.append(_mean_us(lambda: tutorial.claim("idle"), sizes.polls))
                claim_us.append(_mean_us(lambda: q.claim("idle"), sizes.polls))
        finally:
            tutorial.close()
    during = _while_locked(path)
    slow, fast = statistics.median(tutorial_us), statistics.median(claim_us)
    return {
        "tutorial_empty_claim_us": round(slow, 2),
        "labqueue_empty_claim_us": round(fast, 2),
        "ratio": round(slow / fast, 2),
        "tutorial_empty_claim_us_rounds": [round(x, 2) for x in tutorial_us],
        "labqueue_empty_claim_us_rounds": [round(x, 2) for x in claim_us],
        **during,
    }


def _mean_us(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def _while_locked(path: Path) -> dict[str, Any]:
    """Another connection takes the write lock and inserts a job (not yet visible to
    anyone else); both empty claims run with no busy wait; the writer commits after."""
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    q = JobQueue(path, timeout=0)
    tutorial = TutorialStatements(path)
    tutorial.db.execute("PRAGMA busy_timeout = 0")
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('noop', '{}', 0, 0)")
        try:
            claim_ok = q.claim("idle") == []
        except QueueBusy:
            claim_ok = False
        try:
            tutorial.claim("idle")
            tutorial_ok = True
        except sqlite3.OperationalError:
            tutorial_ok = False
        writer.execute("COMMIT")
        return {
            "labqueue_claim_while_writer_holds_lock": claim_ok,
            "tutorial_claim_while_writer_holds_lock": tutorial_ok,
            "writer_committed": True,
        }
    finally:
        tutorial.close()
        q.close()
        writer.close()


# -- the claim against a big table -------------------------------------------------------------


def claim_latency(sizes: Sizes, folder: Path, progress: Callable[[str], None] = lambda line: None) -> dict:
    """Median claim time with `finished` done rows in the table, for each size:
    labqueue's claim() and the tutorial's claim statement, each followed by an (untimed)
    completion, as the tutorial's step 8 measures it. The tables are built first
    (indexes before rows, as a long-lived queue has them) and the sizes then take
    turns claim by claim, so a burst of load on the machine hits every size alike."""
    folder.mkdir(parents=True, exist_ok=True)
    paths, queues, tutorials = [], [], []
    try:
        for finished in sizes.finished:
            path = folder / f"finished_{finished}.db"
            _remove_db(path)
            started = time.perf_counter()
            now = _seed(path, finished, sizes.queued)
            progress(f"seeded {finished:,} finished jobs in {time.perf_counter() - started:.1f} s")
            paths.append(path)
            queues.append(JobQueue(path, clock=FakeClock(now), lease_seconds=30, schema=None))
            tutorials.append(TutorialStatements(path))
        fast: list[list[float]] = [[] for _ in queues]
        tutorial: list[list[float]] = [[] for _ in queues]
        for i in range(sizes.claims):
            for q, t, fast_ms, tutorial_ms in zip(queues, tutorials, fast, tutorial, strict=True):
                start = time.perf_counter()
                if i % 2 == 0:
                    (job,) = q.claim("bench")
                    fast_ms.append((time.perf_counter() - start) * 1e3)
                    q.complete(job)
                else:
                    ((job_id, token, _),) = t.claim("bench")
                    tutorial_ms.append((time.perf_counter() - start) * 1e3)
                    t.complete(job_id, token)
        rows = [
            {
                "finished": finished,
                "claim_ms": round(statistics.median(fast_ms), 4),
                "tutorial_claim_ms": round(statistics.median(tutorial_ms), 4),
                "file_mb": round(path.stat().st_size / 1e6, 1),
            }
            for finished, fast_ms, tutorial_ms, path in zip(
                sizes.finished, fast, tutorial, paths, strict=True
            )
        ]
    finally:
        for q in queues:
            q.close()
        for t in tutorials:
            t.close()
        for path in paths:
            _remove_db(path)
    small, big = rows[0], rows[-1]
    return {
        "queued": sizes.queued,
        "claims": sizes.claims,
        "sizes": rows,
        "growth": round(big["claim_ms"] / small["claim_ms"], 2),
        "tutorial_growth": round(big["tutorial_claim_ms"] / small["tutorial_claim_ms"], 2),
    }


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _seed(path: Path, finished: int, queued: int) -> float:
    """`finished` done rows, older than `queued` ready ones, as a long-lived queue has.
    Returns a time later than every visible_at in the table."""
    base = 1_000_000.0
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = OFF")  # bulk load only
    db.executescript(SCHEMA)  # indexes first: the queue opens on a table as it would find it
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO jobs (kind, payload, state, attempts, visible_at, created_at, finished_at) "
        "VALUES ('noop', '{}', 'done', 1, ?1, ?1, ?1)",
        ((base + i * 0.5,) for i in range(finished)),
    )
    top = base + finished * 0.5
    db.executemany(
        "INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('noop', '{}', ?1, ?1)",
        ((top + i,) for i in range(queued)),
    )
    db.execute("COMMIT")
    db.close()
    return top + queued + 10


# -- the whole run -------------------------------------------------------------------------------


def run_bench(
    sizes: Sizes | None = None,
    keys: Sequence[str] | None = None,
    folder: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    *,
    quick: bool = False,
) -> dict[str, Any]:
    """Run everything once and return the results as one JSON-ready dict."""
    sizes = sizes or Sizes()
    keys = list(keys or CONTENDERS)
    unknown = [k for k in keys if k not in CONTENDERS]
    if unknown or BASELINE not in keys:
        raise InvalidArgument(
            f"contenders must include {BASELINE!r} and come from {', '.join(CONTENDERS)}, got {keys!r}"
        )
    folder = folder or work_folder() / "bench"
    started = time.time()
    runs = throughput(sizes, keys, folder, progress)
    progress("idle poll ...")
    poll = empty_poll(sizes, folder)
    progress("claim with a big table ...")
    latency = claim_latency(sizes, folder, progress)
    progress("profile ...")
    where = profile(sizes.jobs, sizes.rounds, folder / "profile")
    summary = summarize(runs)
    results = {
        "meta": {
            "what": "no-op jobs drained by each queue; medians over rounds; made by python -m labqueue.bench",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - started, 1),
            "settings": SAME + " for every contender (see each row's settings)",
            "heap": "every contender",  # each race process keeps its heap's top (contenders.child)
            "sqlite": sqlite3.sqlite_version,
            **machine(),
            "sizes": sizes.as_dict(),
            "baseline": BASELINE,
            "quick": quick,
        },
        "summary": summary,
        "empty_poll": poll,
        "claim_latency": latency,
        "profile": where,
        "runs": runs,
    }
    results["targets"] = targets(results)
    return results


def _whole(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")


# -- command line ----------------------------------------------------------------------------------


# The module each peer library is imported as; labqueue's own loops need nothing extra.
PEER_MODULES = {
    "huey": "huey",
    "huey_worker": "huey",
    "litequeue": "litequeue",
    "persist_queue": "persistqueue",
}


def missing_peers(keys: Sequence[str]) -> list[str]:
    """The contenders in `keys` whose library cannot be imported here."""
    return [k for k in keys if k in PEER_MODULES and importlib.util.find_spec(PEER_MODULES[k]) is None]


# The bench's other parts, each with a command line of its own: `labqueue bench pg ...`.
PARTS = {
    "pg": "labqueue.bench.pg",
    "pg-peers": "labqueue.bench.pg_peers",
    "pg-waits": "labqueue.bench.pg_waits",
    "wakeup": "labqueue.bench.wakeup",
    "dashboard": "labqueue.bench.dashboard",
    "dashboard-load": "labqueue.bench.dashboard_load",
    "keys": "labqueue.bench.keys",
    "figures": "labqueue.bench.published",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in PARTS:
        return importlib.import_module(PARTS[argv[0]]).main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.bench",
        description=__doc__.split("\n\n")[0],
        epilog="Other parts: " + ", ".join(f"`{key}` ({module})" for key, module in PARTS.items()),
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    parser.add_argument("--jobs", type=int, help=f"jobs per drain (default {Sizes().jobs})")
    parser.add_argument("--rounds", type=int, help=f"rounds (default {Sizes().rounds})")
    parser.add_argument("--procs", type=int, nargs="+", help="process counts (default 1 4)")
    parser.add_argument(
        "--only", nargs="+", choices=list(CONTENDERS), help=f"race only these (always with {BASELINE!r})"
    )
    parser.add_argument("--out", help=f"where to write the JSON (default {DATA_FILE}; --quick: nowhere)")
    args = parser.parse_args(argv)
    settings: dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("jobs", "rounds", "procs"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    try:
        sizes = Sizes(**settings)
    except InvalidArgument as exc:
        parser.error(str(exc))
    keys = list(CONTENDERS) if not args.only else list(dict.fromkeys([BASELINE, *args.only]))
    missing = missing_peers(keys)
    if missing:
        parser.error(
            f"{', '.join(dict.fromkeys(PEER_MODULES[k] for k in missing))} not installed (for"
            f" {', '.join(missing)}): `python tasks.py bench` installs the peers, "
            'or `pip install -e ".[bench]"`; --only races a subset'
        )
    results = run_bench(
        sizes, keys, progress=lambda line: print(line, file=sys.stderr, flush=True), quick=args.quick
    )
    print(report(results))
    out = Path(args.out) if args.out else (None if args.quick else DATA_FILE)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"\nwritten to {out}")
    return 0
