"""Notebook 13's exercise: the look before the lock.

Your queue's claim() opens a write transaction every time it is called, even on an empty
queue. labqueue's claim first asks, with a read, whether anything is claimable at all, and
takes the write lock only when something is. The learner writes that read: a SELECT that
answers 1 when some job is claimable at `:now` and 0 otherwise. The checker runs it on a
read-only connection against scenes of one job each, two of them due at exactly `:now`
(the claim compares with `<=`, so a job due now is claimable).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from ...clock import FakeClock
from ...tutorial.jobqueue import JobQueue
from . import Verdict, not_yet, passed, starting_points

NOW = 1040.0
# Each scene holds one job, set up as its description says; True where a claim at t=1040 takes it.
SCENES = {
    "a queued job, ready since 1000": ("queued", 1000.0, True),
    "a queued job due at exactly 1040": ("queued", NOW, True),
    "a queued job delayed until 1140": ("queued", 1140.0, False),
    "a running job leased until 1050": ("running", 1050.0, False),
    "a running job whose lease ended at 1030": ("running", 1030.0, True),
    "a running job whose lease ends at exactly 1040": ("running", NOW, True),
    "a done job": ("done", 1000.0, False),
    "a dead job": ("dead", 1000.0, False),
}
ANSWER = "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= :now)"


# The scenes due at exactly :now, which a strict `<` leaves out.
AT_NOW = {scene for scene, (_, visible_at, _) in SCENES.items() if visible_at == NOW}


def _scene(folder: Path, state: str, visible_at: float) -> Path:
    path = folder / f"{state}-{visible_at:.0f}.db"
    q = JobQueue(path, clock=FakeClock(1000.0))
    q.enqueue("email", {})
    q.db.execute("UPDATE jobs SET state = ?, visible_at = ?", (state, visible_at))
    q.db.close()
    return path


def check_ready_query(ready_query: object) -> Verdict:
    """Passes when `ready_query`, run read-only at t=1040, answers 1 exactly for the scenes a
    claim would take a job from, and 0 for the others."""
    if not isinstance(ready_query, str) or not ready_query.strip():
        return not_yet(f"ready_query must be a SELECT in a string, got {ready_query!r}")
    wrong = []
    with tempfile.TemporaryDirectory(prefix="nb13_") as scratch:
        for scene, (state, visible_at, claimable) in SCENES.items():
            path = _scene(Path(scratch), state, visible_at)
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = db.execute(ready_query, {"now": NOW}).fetchone()
            except sqlite3.Error as exc:
                return not_yet(f"your query did not run as a read: {type(exc).__name__}: {exc}")
            finally:
                db.close()
            answer = row[0] if row else None
            if answer not in (0, 1) or bool(answer) != claimable:
                takes = "it" if claimable else "nothing"
                wrong.append((scene, f"{scene}: it answered {answer!r}, a claim would take {takes}"))
    if wrong and {scene for scene, _ in wrong} == AT_NOW:
        return not_yet(
            f"{' and '.join(sorted(AT_NOW))}: your query answered 0, but a claim at 1040 takes either. "
            "A job whose visible_at is exactly :now is due: your comparison leaves the moment itself out."
        )
    if wrong:
        return not_yet("; ".join(what for _, what in wrong))
    return passed(
        f"your read tells all {len(SCENES)} scenes apart as the claim does, the jobs due at exactly :now "
        "included, with no write lock."
    )


CHECKERS = {"ready_query": check_ready_query}
STARTERS = {"ready_query": {"ready_query": "SELECT COUNT(*) > 0 FROM jobs"}}
ANSWERS = {"ready_query": {"ready_query": ANSWER}}
WRONG = {
    "ready_query": [
        {"ready_query": "SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND visible_at <= :now)"},
        {"ready_query": "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('queued', 'running'))"},
        {"ready_query": "SELECT COUNT(*) FROM jobs WHERE visible_at <= :now"},
        {
            "ready_query": "SELECT EXISTS (SELECT 1 FROM jobs"
            " WHERE state IN ('queued', 'running') AND visible_at < :now)"
        },
        {"ready_query": "UPDATE jobs SET worker = 'x' RETURNING 1"},
    ]
}

starting_points(__name__)
