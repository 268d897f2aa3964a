"""Notebook 01's exercises: a claim is SQL, and its safety is one condition.

1. ``check_guarded_take``: keep "look first, then claim", but write the claiming UPDATE so
   that a worker who lost the race between its look and its write changes nothing
   (compare and swap).
2. ``check_one_statement``: a single-statement claim that forgot which rows are free;
   fix it so that it takes each job exactly once, with no look and no retry.

Each checker first replays, step by step in this process, the interleaving that breaks a
bad claim (so the verdict does not depend on luck), then races the learner's SQL with
real worker processes started from ``labqueue.lab.race`` (spawn-safe): 400 jobs, 4
processes, about a second. Statements use the named parameters ``:worker`` and ``:id``.
Each worker connects as notebook 01's ``race.py`` does (``labqueue.tutorial.race.connect``).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from ...tutorial.race import connect
from .. import race
from . import Verdict, not_yet, passed, starting_points

N_JOBS = 400
WORKERS = 4

#: The look both exercises start from: the oldest queued job's id (NULL when none is left).
LOOK = "SELECT MIN(id) FROM jobs WHERE state = 'queued'"

# -- exercise 1 ---------------------------------------------------------------------------

TAKE_START = """
UPDATE jobs SET claimed_by = :worker, state = 'running'
 WHERE id = :id
"""

TAKE_ANSWER = """
UPDATE jobs SET claimed_by = :worker, state = 'running'
 WHERE id = :id AND state = 'queued'
"""

# -- exercise 2 ---------------------------------------------------------------------------

ONE_START = """
UPDATE jobs SET claimed_by = :worker, state = 'running'
 WHERE id = (SELECT MIN(id) FROM jobs)
RETURNING id
"""

ONE_ANSWER = """
UPDATE jobs SET claimed_by = :worker, state = 'running'
 WHERE id = (SELECT MIN(id) FROM jobs WHERE state = 'queued')
RETURNING id
"""


def _is_sql(**statements: object) -> Verdict | None:
    for name, statement in statements.items():
        if not isinstance(statement, str) or not statement.strip():
            return not_yet(f"{name} must be a string of SQL, got {statement!r}")
    return None


def _table(folder: Path, n_jobs: int) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """A fresh race table and two workers' connections to it."""
    path = folder / "exercise.db"
    race.create_race_db(path, n_jobs)
    return connect(path), connect(path)


def _interleave_look_then_take(look: str, take: str) -> str | None:
    """Worker A looks; worker B looks and takes the same job; then A writes. Returns what
    went wrong, or None when A's late write changed nothing."""
    with tempfile.TemporaryDirectory(prefix="nb01_") as scratch:
        a, b = _table(Path(scratch), 3)
        try:
            (seen,) = a.execute(look).fetchone()
            got, _ = race.claim_with(b, "B", look, take)
            if got is None:
                return "worker B, alone, could not claim a job with your UPDATE: it changed no row"
            before = a.total_changes
            a.execute(take, {"worker": "A", "id": seen}).fetchall()
            if a.total_changes > before and got == seen:
                return (
                    f"worker A looked and saw job {seen} queued; worker B then claimed job {seen}; "
                    f"A's UPDATE still changed the row, so job {seen} went to both workers"
                )
        finally:
            a.close()
            b.close()
    return None


def _race(look: str | None, take: str) -> race.RaceResult:
    return race.race("yours", N_JOBS, WORKERS, statements=(look, take))


def _race_verdict(result: race.RaceResult, *, retries_allowed: bool, found: str) -> Verdict:
    numbers = (
        f"{result.workers} processes raced {result.jobs} jobs: {result.claims} claims, "
        f"{result.distinct} distinct jobs, {result.duplicates} duplicates, {result.wasted} wasted looks"
    )
    if result.duplicates:
        return not_yet(f"{numbers}. Some jobs went to two workers.")
    if result.distinct != result.jobs:
        return not_yet(f"{numbers}. Not every job was claimed: does your statement take queued rows?")
    if result.wasted and not retries_allowed:
        return not_yet(f"{numbers}. A single statement should never need to look again.")
    return passed(f"{found} {numbers}.")


def check_guarded_take(take: object, look: str = LOOK) -> Verdict:
    """Passes when look-then-`take` hands no job to two workers: first in a replayed
    interleaving (A looks, B claims, A writes), then in a real race of processes."""
    bad = _is_sql(take=take, look=look)
    if bad is not None:
        return bad
    try:
        problem = _interleave_look_then_take(look, take)
    except sqlite3.Error as exc:
        return not_yet(f"your statement did not run: {type(exc).__name__}: {exc}")
    except (TypeError, ValueError):
        return not_yet("the look must return one column, the id (NULL when nothing is queued)")
    if problem is not None:
        return not_yet(problem + ". Make the UPDATE change the row only while it is still queued.")
    result = _race(look, take)
    return _race_verdict(
        result,
        retries_allowed=True,
        found="A late write now changes nothing: the loser looks again (compare and swap).",
    )


def check_one_statement(claim: object) -> Verdict:
    """Passes when the single statement `claim` (parameter :worker, RETURNING id) claims
    jobs 1, 2, 3 and then nothing, for one worker alone, and hands no job to two of the
    racing processes."""
    bad = _is_sql(claim=claim)
    if bad is not None:
        return bad
    try:
        with tempfile.TemporaryDirectory(prefix="nb01_") as scratch:
            db, other = _table(Path(scratch), 3)
            try:
                alone = [race.claim_with(db, "w0", None, claim)[0] for _ in range(4)]
            finally:
                db.close()
                other.close()
    except sqlite3.Error as exc:
        if ":id" in claim:
            return not_yet("a one-statement claim is given no :id: its sub-select picks the row itself")
        return not_yet(f"your statement did not run: {type(exc).__name__}: {exc}")
    except IndexError:
        return not_yet("your statement returned a row without a column: end it with RETURNING id")
    if alone[0] is None:
        if "returning" not in claim.lower():
            return not_yet(
                "one worker alone claimed nothing from 3 queued jobs: does it end with RETURNING id?"
            )
        return not_yet(
            "one worker alone claimed nothing from 3 queued jobs: your sub-select finds no row. "
            "In which state is a job that nobody holds?"
        )
    if alone != [1, 2, 3, None]:
        return not_yet(_alone_problem(alone))
    return _race_verdict(
        _race(None, claim),
        retries_allowed=False,
        found="One statement picks and takes the job under SQLite's single write lock.",
    )


def _alone_problem(alone: list[int | None]) -> str:
    """What one worker's four claims from 3 queued jobs say about the statement."""
    got = f"one worker alone, claiming four times from 3 queued jobs, got {alone} instead of [1, 2, 3, None]"
    taken = [job for job in alone if job is not None]
    if len(taken) != len(set(taken)):
        return f"{got}: it took a job it had already claimed; the statement must pick only a job still queued"
    if sorted(taken) == [1, 2, 3]:
        return f"{got}: each job once, but not the oldest first; a queue hands out its oldest queued job"
    return f"{got}: it found nothing while jobs were still queued; which rows does your sub-select pick?"


CHECKERS = {"guarded_take": check_guarded_take, "one_statement": check_one_statement}
STARTERS = {"guarded_take": {"take": TAKE_START}, "one_statement": {"claim": ONE_START}}
ANSWERS = {"guarded_take": {"take": TAKE_ANSWER}, "one_statement": {"claim": ONE_ANSWER}}
WRONG = {
    "guarded_take": [
        # guards on the wrong state: a queued row never matches, so nothing is ever claimed
        {"take": TAKE_ANSWER.replace("state = 'queued'", "state = 'running'")},
        # not SQL at all
        {"take": "UPDATE jobs SET claimed_by = :worker WHERE id = :id AND"},
    ],
    "one_statement": [
        # the right row, but no RETURNING: the worker never learns which job it took
        {"claim": ONE_ANSWER.replace("RETURNING id", "")},
        # the look and the write split again: a claim that is two statements is not one
        {"claim": TAKE_ANSWER},
        # only queued rows, but the newest first
        {"claim": ONE_ANSWER.replace("MIN(id)", "MAX(id)")},
        # the newest row, queued or not: the same job again and again
        {"claim": ONE_START.replace("MIN(id)", "MAX(id)")},
        # a row that is not queued
        {"claim": ONE_ANSWER.replace("state = 'queued'", "state = 'running'")},
    ],
}

starting_points(__name__)
