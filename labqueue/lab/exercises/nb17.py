"""Notebook 17's exercise: choose the claim's locking clause on PostgreSQL.

The learner fills in the clause that ends the claim's inner SELECT (nothing, FOR UPDATE,
FOR UPDATE NOWAIT, FOR UPDATE SKIP LOCKED ...). The checker plays the moment that
matters, with two real connections to a real server: worker A has claimed job 1 and not
yet committed; worker B claims now. It watches B's session in pg_stat_activity to see
whether B waits for A's row lock, then lets A commit, and reads what B got.
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
# Notebook 01's atomic claim, in PostgreSQL's dialect, with the learner's clause.
CLAIM = """
UPDATE jobs SET state = 'running', worker = %(worker)s
 WHERE id IN (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1{locking})
RETURNING id
"""
WAITING = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(pid)s"
WAIT_LIMIT_SECONDS = 10.0


def claim_statement(locking: str) -> str:
    """The claim with this locking clause at the end of its inner SELECT."""
    return CLAIM.format(locking=f" {locking.strip()}" if locking.strip() else "")


def two_claims(url: str, locking: str) -> dict[str, Any]:
    """A claims and holds its transaction open; B claims. Returns what A and B got,
    whether B waited for A's lock, and B's error if it raised one."""
    import psycopg
    from psycopg import sql as pg_sql

    from ...postgres import drop_schema

    schema = f"nb17_{uuid.uuid4().hex[:8]}"
    statement = claim_statement(locking)
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
            claimed = a.execute(statement, {"worker": "A"})  # a transaction begins, and stays open
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
            a.commit()  # A's claim is committed; B, if it waited, goes on now
            thread.join(WAIT_LIMIT_SECONDS + 5)
    finally:
        drop_schema(url, schema)
    return outcome


def check_locking_clause(locking: object, url: str | None = None) -> Verdict:
    """Passes when B, claiming while A holds job 1 in an open transaction, gets another
    job at once: no duplicate, no wait for A, no error."""
    if not isinstance(locking, str):
        return not_yet(f"LOCKING must be a string such as '' or 'FOR UPDATE', got {locking!r}")
    clause = " ".join(locking.upper().split())
    if not CLAUSE.fullmatch(clause):
        return not_yet(
            f"{locking!r} is not a locking clause: try '', 'FOR UPDATE', 'FOR UPDATE NOWAIT' or "
            "'FOR UPDATE SKIP LOCKED'"
        )
    try:
        if url is None:
            from ..postgres_lab import server_url

            url = server_url()
        got = two_claims(url, clause)
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
    return passed(
        f"{shown}: B passed over A's locked job 1 and claimed job 2 at once. One statement, no duplicate, "
        "no waiting: SKIP LOCKED, as in PgJobQueue's claim."
    )


CHECKERS = {"locking_clause": check_locking_clause}
#: The starting point in the notebook: notebook 01's atomic claim as it is, no locking clause.
STARTERS = {"locking_clause": {"locking": ""}}
#: The worked answer.
ANSWERS = {"locking_clause": {"locking": "FOR UPDATE SKIP LOCKED"}}
#: Wrong versions: a claim that waits for the other worker, and one that errors instead.
WRONG = {"locking_clause": [{"locking": "FOR UPDATE"}, {"locking": "FOR UPDATE NOWAIT"}]}

starting_points(__name__)
