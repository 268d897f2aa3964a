"""Notebook 09's exercise: choose the ``synchronous`` level, and say what each level can lose.

``check_durability`` opens your queue (the tutorial's `JobQueue`, or the class you pass) at the
level you chose, reads back what SQLite set,
times small commits at each level on this disk (rounds taken in turn, compared by their medians,
so a burst of load elsewhere cannot make FULL look cheaper than NORMAL), and compares your predictions
with what SQLite's documentation promises (https://www.sqlite.org/pragma.html#pragma_synchronous):
"A transaction committed in WAL mode with synchronous=NORMAL might roll back following a
power loss or system crash. Transactions are durable across application crashes regardless
of the synchronous setting or journal mode."
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...tutorial import jobqueue as tutorial
from . import Verdict, not_yet, passed, starting_points

LEVELS = ("NORMAL", "FULL")
EVENTS = ("application crash", "power loss")
NOTHING = "nothing"
RECENT = "recent commits"
CHOICES = (NOTHING, RECENT)
COMMITS = 20  # per round and level
ROUNDS = 5
# FULL is reported as dearer only when its median commit is this much slower than NORMAL's;
# closer than that, a shared machine's noise could turn the comparison round.
NOISE = 1.25

#: What SQLite promises in WAL mode: (level, event) -> what may be lost.
TRUTH = {
    ("NORMAL", "application crash"): NOTHING,
    ("NORMAL", "power loss"): RECENT,
    ("FULL", "application crash"): NOTHING,
    ("FULL", "power loss"): NOTHING,
}
PRAGMA_VALUES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

LOST_START = {key: "?" for key in TRUTH}


def commit_seconds(
    level: str, folder: Path, commits: int = COMMITS, queue_class: Any = None
) -> tuple[str, float]:
    """Open a queue of `queue_class` (the tutorial's JobQueue by default) at `level`, read the
    level SQLite reports, and time `commits` enqueues, each its own write transaction.
    Returns (the level read back, seconds per commit)."""
    q = (queue_class or tutorial.JobQueue)(folder / f"sync_{level.lower()}.db", synchronous=level)
    try:
        reported = PRAGMA_VALUES.get(q.db.execute("PRAGMA synchronous").fetchone()[0], "?")
        started = time.perf_counter()
        for n in range(commits):
            q.enqueue("payment", {"n": n})
        return reported, (time.perf_counter() - started) / commits
    finally:
        q.db.close()


def commit_costs(folder: Path, queue_class: Any = None, rounds: int = ROUNDS) -> dict[str, tuple[str, float]]:
    """Each level's (level SQLite reported, median seconds per commit) over `rounds` rounds,
    the levels taken in turn within each round."""
    seen: dict[str, list[tuple[str, float]]] = {lv: [] for lv in LEVELS}
    for n in range(rounds):
        for lv in LEVELS:
            (folder / f"round{n}").mkdir(exist_ok=True)
            seen[lv].append(commit_seconds(lv, folder / f"round{n}", queue_class=queue_class))
    return {lv: (runs[0][0], statistics.median(s for _, s in runs)) for lv, runs in seen.items()}


def cost_line(normal: float, full: float, rounds: int = ROUNDS) -> str:
    """What the medians say about FULL's price on this disk, in words that do not flip with noise."""
    each = f"NORMAL {normal * 1000:.2f} ms, FULL {full * 1000:.2f} ms, medians of {rounds} rounds"
    if full > normal * NOISE:
        return f"on this disk a commit cost {full / normal:.1f} times as much with FULL ({each})"
    return (
        f"on this disk FULL and NORMAL were within noise of each other ({each}): its fsync returns at once, "
        "as a disk that caches writes does, while a physical disk's costs a real wait per commit"
    )


def check_durability(synchronous: object, lost: object, queue_class: Any = None) -> Verdict:
    """`synchronous`: the level for a queue whose jobs charge cards. `lost`: for each
    (level, event), "nothing" or "recent commits". `queue_class`: your JobQueue (the
    tutorial's by default). Passes when both match SQLite's promise and your queue runs at
    the level you chose."""
    if not isinstance(synchronous, str) or synchronous.upper() not in LEVELS:
        return not_yet(f"synchronous must be one of {', '.join(LEVELS)}, got {synchronous!r}")
    if not isinstance(lost, Mapping):
        return not_yet(f"lost must be a dict of (level, event) -> answer, got {type(lost).__name__}")
    level = synchronous.upper()
    with tempfile.TemporaryDirectory(prefix="nb09_") as scratch:
        timings = commit_costs(Path(scratch), queue_class=queue_class)
    reported = timings[level][0]
    cost = cost_line(timings["NORMAL"][1], timings["FULL"][1])
    seen = f"your queue opened with synchronous = {reported}; {cost}"
    unanswered = [key for key in TRUTH if lost.get(key) not in CHOICES]
    if unanswered:
        level_name, event = unanswered[0]
        return not_yet(
            f"{seen}. Answer every case with {NOTHING!r} or {RECENT!r}; "
            f"first unanswered: ({level_name!r}, {event!r}) is {lost.get(unanswered[0])!r}."
        )
    wrong = [key for key in TRUTH if lost[key] != TRUTH[key]]
    if wrong:
        level_name, event = wrong[0]
        return not_yet(
            f"{seen}. {len(wrong)} prediction(s) differ from SQLite's documentation, first ({level_name!r}, "
            f"{event!r}). Reread the quotation: which event can undo a commit, and at which level?"
        )
    if reported != level:
        return not_yet(
            f"{seen}: you asked for {level}, and SQLite runs at {reported}. Does your JobQueue pass "
            "`synchronous` to PRAGMA synchronous?"
        )
    if level != "FULL":
        return not_yet(
            f"{seen}. Your predictions are right, so look at them again: with NORMAL a power cut can roll "
            "back the last commits, and a completed payment job would run again. Which level rules that out?"
        )
    return passed(
        f"{seen}. FULL syncs the WAL on every commit, so a power cut loses nothing that was committed; "
        "you pay for it with one fsync per commit. An application crash never loses a commit at either level."
    )


CHECKERS = {"durability": check_durability}
STARTERS = {"durability": {"synchronous": "NORMAL", "lost": LOST_START}}
ANSWERS = {"durability": {"synchronous": "FULL", "lost": dict(TRUTH)}}
WRONG = {
    "durability": [
        # right level, but the belief that NORMAL survives a power cut
        {"synchronous": "FULL", "lost": {**TRUTH, ("NORMAL", "power loss"): NOTHING}},
        # right predictions, the faster level chosen anyway
        {"synchronous": "NORMAL", "lost": dict(TRUTH)},
        {"synchronous": "OFF", "lost": dict(TRUTH)},
    ],
}

starting_points(__name__)
