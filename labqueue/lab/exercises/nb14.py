"""Notebook 14's exercise: write the WHERE clause of the purge.

``check_purge_where`` builds a small queue with the real package on a fake clock: 42
jobs in every state, some finished long ago and some a moment ago. It then walks the
table the way ``JobQueue.purge`` does, in windows of ``BATCH`` ids, one write
transaction each, running ``DELETE FROM jobs`` + your WHERE clause with the parameters
``:after`` (the window starts after this id), ``:batch`` (ids per window), ``:before``
(the cut-off: finished at or before it) and ``:states`` (a JSON array, ``["done"]``).

It passes when every done job that finished at or before the cut-off is gone, every other job
is still there, each DELETE removed rows from its own window only, and SQLite's plan for
your statement reads only that window (a search on the rowid bounded on both sides),
whatever the size of the table.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

from ...clock import FakeClock
from ...queue import JobQueue
from . import Verdict, not_yet, passed, starting_points

T0 = 100_000.0  # when the old jobs finished
RECENT = T0 + 3000  # when the recent ones finished, and "now"
BEFORE = T0 + 1000  # the cut-off
BATCH = 7  # ids per window: six windows over 42 jobs

# One letter per job, id 1 first: D done long ago (must go), B done at exactly the cut-off
# (must go too: "at or before"), d done a moment ago, X dead long ago, C cancelled long ago,
# R running, Q queued (scheduled for later). Every 7th id (the last of each window) is an
# old done job, except the newest.
FATES = "DDXDRQD" + "DdDCDQD" + "RDBXdDD" + "DQDDRDD" + "XDdDBCD" + "DDQRDdQ"
WHAT = {
    "D": "done long ago",
    "B": "done exactly at the cut-off",
    "d": "done a moment ago",
    "X": "dead",
    "C": "cancelled",
    "R": "running",
    "Q": "queued",
}

# The plan of a DELETE that reads one window of ids, bounded on both sides.
WINDOW_PLAN = "INTEGER PRIMARY KEY (rowid>? AND rowid<?)"
IDS = "SELECT id FROM jobs"
GO = "DB"  # the fates a purge at :before removes

STARTER = """
 WHERE id > :after AND id <= :after + :batch
"""
ANSWER = """
 WHERE id > :after AND id <= :after + :batch
   AND state = 'done'
   AND finished_at <= :before
"""


def prepare(path: Path) -> None:
    """The exercise's queue: one job per letter of FATES, made with the real queue."""
    clock = FakeClock(T0)
    later: list = []
    at_cutoff: list = []
    with JobQueue(path, clock=clock, lease_seconds=1e6, max_attempts=1, wake=False) as q:
        for n, fate in enumerate(FATES, 1):
            payload = {"n": n}
            if fate == "Q":
                q.enqueue("report", payload, delay=1e6)  # not ready: only the newest job is claimable
                continue
            job_id = q.enqueue("email", payload)
            if fate == "C":
                q.cancel(job_id)
                continue
            (job,) = q.claim("w1")
            assert job.id == job_id == n
            if fate == "D":
                q.complete(job)
            elif fate == "X":
                q.fail(job, "ValueError: no such mailbox", retry=False)
            elif fate == "B":
                at_cutoff.append(job)
            elif fate == "d":
                later.append(job)
        for when, jobs in ((BEFORE, at_cutoff), (RECENT, later)):
            clock.now = when
            for job in jobs:
                q.complete(job)


def _params(after: int) -> dict[str, object]:
    return {"after": after, "batch": BATCH, "before": BEFORE, "states": json.dumps(["done"])}


def _ids(db: sqlite3.Connection) -> set[int]:
    return {row[0] for row in db.execute(IDS)}


def _describe(job_id: int) -> str:
    return f"job {job_id} ({WHAT[FATES[job_id - 1]]})"


def _listed(ids: list[int]) -> str:
    return ", ".join(_describe(i) for i in ids)


def _why_kept(ids: list[int]) -> str:
    """What the clause lacks, from the jobs it removed that had to stay."""
    fates = {FATES[i - 1] for i in ids}
    reasons = []
    if fates & set("XC"):
        also = "" if fates & set("dRQ") else ", and a dead or cancelled job has a finished_at too"
        reasons.append(f"dead and cancelled jobs stay unless :states names them: test the state{also}")
    if "d" in fates:
        reasons.append("a job done a moment ago finished after the cut-off: test finished_at against :before")
    if fates & set("RQ"):
        reasons.append("a queued or running job has not finished at all")
    return "; ".join(reasons) + ". Only done jobs finished at or before :before may go"


def _why_gone(ids: list[int]) -> str:
    """What the clause leaves out, from the jobs it should have removed."""
    reasons = []
    if any(FATES[i - 1] == "B" for i in ids):
        reasons.append(
            "a job that finished at exactly :before is as old as the cut-off allows, and your age test "
            "leaves that moment out"
        )
    if any(i % BATCH == 0 for i in ids):
        reasons.append(
            f"the last id of each window (ids {BATCH}, {2 * BATCH}, ...) was never deleted: together the "
            "windows (:after, :after + :batch] must cover every id"
        )
    return "; ".join(reasons) or "every done job finished by :before must go"


def _walk(db: sqlite3.Connection, statement: str) -> Verdict | None:
    """Run the statement window by window, one write transaction each, as purge() does."""
    for after in range(0, len(FATES), BATCH):
        db.execute("BEGIN IMMEDIATE")
        try:
            before = _ids(db)
            db.execute(statement, _params(after))
            removed = before - _ids(db)
        finally:
            db.execute("COMMIT")
        outside = sorted(i for i in removed if not after < i <= after + BATCH)
        if outside:
            return not_yet(
                f"the window after id {after} (ids {after + 1} to {after + BATCH}) also removed "
                f"{', '.join(_describe(i) for i in outside)}: each DELETE must stay inside its window"
            )
    return None


def check_purge_where(where: object) -> Verdict:
    """Runs "DELETE FROM jobs" + `where` window by window over the prepared queue. Passes
    when exactly the done jobs finished at or before :before are gone, each DELETE removed rows
    of its own window only, and its plan is a search on the rowid bounded on both sides."""
    if not isinstance(where, str) or "where" not in where.lower():
        return not_yet(f"write a WHERE clause as a string, starting with WHERE; got {where!r}")
    statement = "DELETE FROM jobs\n" + where.strip()
    with tempfile.TemporaryDirectory(prefix="nb14_") as scratch:
        path = Path(scratch) / "purge.db"
        prepare(path)
        db = sqlite3.connect(str(path), isolation_level=None)
        try:
            try:
                plan = " | ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + statement, _params(0)))
            except (sqlite3.Error, ValueError) as exc:
                return not_yet(f"SQLite cannot run {statement!r}: {type(exc).__name__}: {exc}")
            if WINDOW_PLAN not in plan:
                return not_yet(
                    f"SQLite's plan for your DELETE is {plan!r}: it reads more than one window of ids "
                    "while holding the write lock. Bound id on both sides with :after and :batch."
                )
            try:
                outside = _walk(db, statement)
            except sqlite3.Error as exc:
                return not_yet(f"SQLite refused your DELETE: {type(exc).__name__}: {exc}")
            if outside is not None:
                return outside
            left = _ids(db)
        finally:
            db.close()
    everyone = set(range(1, len(FATES) + 1))
    wrongly = sorted(i for i in everyone - left if FATES[i - 1] not in GO)
    if wrongly:
        return not_yet(f"your purge removed {_listed(wrongly)}: {_why_kept(wrongly)}")
    missed = sorted(i for i in left if FATES[i - 1] in GO)
    if missed:
        return not_yet(
            f"{_listed(missed)} {'is' if len(missed) == 1 else 'are'} still there: {_why_gone(missed)}"
        )
    gone = sum(FATES.count(fate) for fate in GO)
    return passed(
        f"the {gone} done jobs that finished at or before the cut-off are gone and the other "
        f"{len(FATES) - gone} jobs are all still there (dead, cancelled, running, queued and recently done); "
        f"each of the {-(-len(FATES) // BATCH)} DELETEs read only its own {BATCH} ids ({plan})."
    )


CHECKERS = {"purge_where": check_purge_where}
STARTERS = {"purge_where": {"where": STARTER}}
ANSWERS = {"purge_where": {"where": ANSWER}}
WRONG = {
    "purge_where": [
        # the right rows, but one statement over the whole table: the lock for as long as it takes
        {"where": "WHERE state = 'done' AND finished_at <= :before"},
        # forgets the state: dead and cancelled jobs go too
        {"where": "WHERE id > :after AND id <= :after + :batch AND finished_at <= :before"},
        # off by one: the last id of every window is never looked at
        {"where": "WHERE id > :after AND id < :after + :batch AND state = 'done' AND finished_at <= :before"},
        # forgets the age: jobs done a moment ago go too
        {"where": "WHERE id > :after AND id <= :after + :batch AND state = 'done'"},
        # a strict cut-off: a job finished at exactly :before stays
        {"where": "WHERE id > :after AND id <= :after + :batch AND state = 'done' AND finished_at < :before"},
        {"where": "WHERE id > :after"},
    ]
}

starting_points(__name__)
