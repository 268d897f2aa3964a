"""Notebook 17's exercise: choose the claim's locking clause on PostgreSQL.

The learner fills in the clause that ends the claim's inner SELECT (nothing, FOR UPDATE,
FOR UPDATE NOWAIT, FOR SHARE SKIP LOCKED ...). The checker plays the two moments that
matter, with real connections to a real server. First, worker A has claimed job 1 and not
yet committed; worker B claims now. Second, worker C's claim has picked job 1 with the
clause (its SELECT ran, its UPDATE not yet); B claims now. Each time it watches B's
session in pg_stat_activity to see whether B waits for a row lock, then lets the other
transaction end, and reads what B got. B must take job 2 at once both times: a clause
whose lock another claim's SELECT can share (FOR SHARE, FOR KEY SHARE) passes the first
moment and fails the second, where B waits and two claims would deadlock.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any

from . import Verdict, not_yet, passed, starting_points

# Only a locking clause may go in: this is the learner's own SQL, but nothing else.
CLAUSE = re.compile(r"(FOR (UPDATE|NO KEY UPDATE|SHARE|KEY SHARE)( NOWAIT| SKIP LOCKED)?)?")
TABLE = """
CREATE TABLE jobs (id BIGINT PRIMARY KEY, state TEXT NOT NULL DEFAULT 'queued', worker TEXT);
INSERT INTO jobs (id) VALUES (1), (2), (3);
"""
# Notebook 01's atomic claim, in PostgreSQL's dialect, with the learner's clause ending its pick.
PICK = "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1{locking}"
CLAIM = """
UPDATE jobs SET state = 'running', worker = %(worker)s
 WHERE id IN ({pick})
RETURNING id
"""
WAITING = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(pid)s"
WAIT_LIMIT_SECONDS = 10.0


def pick_statement(locking: str) -> str:
    """The claim's inner SELECT, ended by this locking clause."""
    return PICK.format(locking=f" {locking.strip()}" if locking.strip() else "")


def claim_statement(locking: str) -> str:
    """The claim with this locking clause at the end of its inner SELECT."""
    return CLAIM.format(pick=pick_statement(locking))


def two_claims(url: str, locking: str, *, first: str = "claimed") -> dict[str, Any]:
    """The other worker's transaction stays open while B claims. `first="claimed"`: A ran the
    whole claim; `first="picking"`: C's claim has run its SELECT only (A's slot in the
    result). Returns what the first and B got, whether B waited for a lock, and B's error if
    it raised one."""
    import psycopg
    from psycopg import sql as pg_sql

    from ...postgres import drop_schema

    schema = f"nb17_{uuid.uuid4().hex[:8]}"
    statement = claim_statement(locking)
    opening = statement if first == "claimed" else pick_statement(locking)
    outcome: dict[str, Any] = {"a": None, "b": None, "waited": False, "error": None}
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(pg_sql.SQL("CREATE SCHEMA {}").format(pg_sql.Identifier(schema)))
        options = f"-c search_path={schema} -c lock_timeout={int(WAIT_LIMIT_SECONDS * 1000)}"
        with (
            psycopg.connect(url, options=options) as a,
            psycopg.connect(url, options=options, autocommit=True) as b,
        ):
            with a.transaction():
                for part in filter(str.strip, TABLE.split(";")):
                    a.execute(part)
            claimed = a.execute(opening, {"worker": "A"})  # a transaction begins, and stays open
            outcome["a"] = [row[0] for row in claimed.fetchall()]

            def claim_b() -> None:
                try:
                    outcome["b"] = [row[0] for row in b.execute(statement, {"worker": "B"}).fetchall()]
                except psycopg.Error as exc:
                    outcome["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"

            thread = threading.Thread(target=claim_b, daemon=True)
            thread.start()
            with psycopg.connect(url, autocommit=True) as watcher:
                deadline = time.monotonic() + WAIT_LIMIT_SECONDS
                while thread.is_alive() and time.monotonic() < deadline:
                    row = watcher.execute(WAITING, {"pid": b.info.backend_pid}).fetchone()
                    if row is not None and row[0]:
                        outcome["waited"] = True
                        break
                    time.sleep(0.01)
            if first == "claimed":
                a.commit()  # A's claim is committed; B, if it waited, goes on now
            else:
                a.rollback()  # C gives way (had it written, the two would deadlock); B goes on
            thread.join(WAIT_LIMIT_SECONDS + 5)
    finally:
        drop_schema(url, schema)
    return outcome


def _not_a_clause(locking: str, clause: str) -> str:
    if clause in ("SKIP LOCKED", "NOWAIT"):
        return (
            f"{locking!r} is not a clause on its own: in PostgreSQL {clause} ends a locking clause, "
            "after FOR and the strength of the lock the SELECT takes. Which lock must a claim take on "
            "the row it picks?"
        )
    return (
        f"{locking!r} is not a locking clause: one is FOR and a lock strength (UPDATE, NO KEY UPDATE, SHARE "
        "or KEY SHARE), optionally followed by NOWAIT or SKIP LOCKED"
    )


def _shared(clause: str) -> str:
    strength = re.sub(r"^FOR | (NOWAIT|SKIP LOCKED)$", "", clause)
    if strength in ("SHARE", "KEY SHARE"):
        return (
            f"a {strength} lock is shared: another claim's SELECT takes it on the same row, so "
            "nothing is skipped"
        )
    return "C's lock did not keep B's SELECT off the row"


def check_locking_clause(locking: object, url: str | None = None) -> Verdict:
    """Passes when B, claiming while A holds job 1 in an open transaction, and again while C's
    claim has picked job 1 but not yet written it, gets another job at once: no duplicate, no
    wait, no error."""
    if not isinstance(locking, str):
        return not_yet(f"LOCKING must be a string such as '' or 'FOR UPDATE', got {locking!r}")
    clause = " ".join(locking.upper().split())
    if not CLAUSE.fullmatch(clause):
        return not_yet(_not_a_clause(locking, clause))
    try:
        if url is None:
            from ..postgres_lab import server_url

            url = server_url()
        got = two_claims(url, clause)
        picking = two_claims(url, clause, first="picking") if _first_passes(got) else None
    except Exception as exc:  # a checker reports, it never raises at the learner
        return not_yet(f"the experiment could not run: {type(exc).__name__}: {exc}")
    shown = clause or "(no locking clause)"
    if got["a"] != [1]:
        return not_yet(f"{shown}: A should have claimed job 1 but got {got['a']}")
    if got["b"] == [1]:
        return not_yet(
            f"{shown}: B waited for A's lock, then claimed job 1 as well: one job, two workers. The inner "
            "SELECT read job 1 as queued before A committed, and the UPDATE never looked again."
        )
    if got["error"]:
        return not_yet(
            f"{shown}: B gave up with {got['error']}. A worker must not fail because another holds a job."
        )
    if got["waited"]:
        return not_yet(
            f"{shown}: B got job {got['b']}, but only after waiting for A's transaction to end: with many "
            "workers each claim queues up behind the others'. Make B pass over a locked row."
        )
    if got["b"] != [2]:
        return not_yet(f"{shown}: B got {got['b']}, not job 2, the next free one")
    assert picking is not None
    if picking["waited"] or picking["b"] != [2] or picking["error"]:
        then = (
            "B's UPDATE then waited for C; had C gone on to write job 1, the two claims would deadlock"
            if picking["waited"]
            else f"B got {picking['b']}{' with ' + picking['error'] if picking['error'] else ''}"
        )
        return not_yet(
            f"{shown}: passes while A holds a claimed job, but not when two claims pick at the same moment. "
            "C's SELECT had picked job 1 and not yet written it; B's SELECT picked job 1 too "
            f"({_shared(clause)}). "
            f"{then}. The lock a claim's SELECT takes must keep every other claim's SELECT off the row."
        )
    same = (
        "as in PgJobQueue's claim" if clause == ANSWER else "PgJobQueue's claim takes FOR UPDATE SKIP LOCKED"
    )
    return passed(
        f"{shown}: B passed over the job A had claimed, and over the job C's claim had just picked, and took "
        f"job 2 at once both times. One statement, no duplicate, no waiting: {same}."
    )


def _first_passes(got: dict[str, Any]) -> bool:
    return got["a"] == [1] and got["b"] == [2] and not got["waited"] and not got["error"]


ANSWER = "FOR UPDATE SKIP LOCKED"
CHECKERS = {"locking_clause": check_locking_clause}
#: The starting point in the notebook: notebook 01's atomic claim as it is, no locking clause.
STARTERS = {"locking_clause": {"locking": ""}}
#: The worked answer.
ANSWERS = {"locking_clause": {"locking": ANSWER}}
#: Wrong versions: a claim that waits for the other worker, one that errors instead, one whose
#: shared lock lets two claims pick the same row, and an option with no clause to end.
WRONG = {
    "locking_clause": [
        {"locking": "FOR UPDATE"},
        {"locking": "FOR UPDATE NOWAIT"},
        {"locking": "FOR SHARE SKIP LOCKED"},
        {"locking": "SKIP LOCKED"},
    ]
}

starting_points(__name__)
