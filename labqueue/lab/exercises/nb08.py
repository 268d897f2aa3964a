"""Notebook 08's exercises: a partial index only helps when SQLite can prove it may use it.

1. ``check_plain_index``: take the WHERE clause off ``jobs_ready`` and see that the claim's
   plan still names the index, while SQLite now does many times the work per claim.
2. ``check_count_queued``: count the queued jobs with a query whose WHERE implies
   ``jobs_ready``'s, so that SQLite answers it without reading the finished rows.

The first checker seeds a table of finished jobs and counts the virtual-machine
instructions SQLite runs for the claim's search (a progress handler counts them): unlike
a time, that count is the same on every machine and every run, so the verdict is too.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from ...tutorial import jobqueue as tutorial
from ..claim_index import now_after, plan, scans_table, seed
from . import Verdict, not_yet, passed, starting_points

N_DONE = 20_000
N_QUEUED = 50
CLAIMS = 20
STEP = 1  # the progress handler is called every STEP instructions

#: The claim's search: the sub-select inside CLAIM that finds the oldest ready job.
CLAIM_SEARCH = (
    "SELECT id FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?"
    " ORDER BY visible_at, id LIMIT 1"
)

#: jobs_ready as notebook 02 writes it in INDEXES (labqueue.tutorial.jobqueue).
READY_INDEX = """
CREATE INDEX jobs_ready ON jobs (visible_at, id)
    WHERE state IN ('queued', 'running')
"""

READY_INDEX_ANSWER = """
CREATE INDEX jobs_ready ON jobs (visible_at, id)
"""

OTHER_INDEXES = """
CREATE INDEX jobs_exhausted ON jobs (visible_at) WHERE state = 'running' AND attempts >= max_attempts;
CREATE INDEX jobs_dead ON jobs (id) WHERE state = 'dead';
"""

COUNT_QUEUED_START = "SELECT COUNT(*) FROM jobs WHERE state = 'queued'"
COUNT_QUEUED_ANSWER = "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running') AND state = 'queued'"


def _is_sql(statement: object, what: str) -> Verdict | None:
    if not isinstance(statement, str) or not statement.strip():
        return not_yet(f"{what} must be a string of SQL, got {statement!r}")
    return None


def instructions(db: sqlite3.Connection, query: str, params: tuple = ()) -> int:
    """How many virtual-machine instructions SQLite runs for one run of `query` (to the
    nearest STEP): the work it does, the same on every machine."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0  # 0: carry on

    db.set_progress_handler(tick, STEP)
    try:
        db.execute(query, params).fetchall()
    finally:
        db.set_progress_handler(None, STEP)
    return count[0] * STEP


def _claim_cost(db: sqlite3.Connection, now: float) -> tuple[int, float]:
    """The claim search's instructions, and its median time in ms over CLAIMS runs."""
    steps = instructions(db, CLAIM_SEARCH, (now,))
    times = []
    for _ in range(CLAIMS):
        started = time.perf_counter()
        db.execute(CLAIM_SEARCH, (now,)).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return steps, sorted(times)[len(times) // 2]


def _seeded(folder: Path, name: str, create_index: str) -> sqlite3.Connection:
    path = folder / f"{name}.db"
    seed(path, N_DONE, N_QUEUED, progress=False)
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.executescript(create_index.strip().rstrip(";") + ";\n" + OTHER_INDEXES)
    except BaseException:
        db.close()
        raise
    return db


def _learners_indexes(db: sqlite3.Connection) -> list[tuple[str, bool]]:
    """(name, is it partial) for every index on jobs other than jobs_exhausted and jobs_dead."""
    rows = db.execute("SELECT name, partial, origin FROM pragma_index_list('jobs')").fetchall()
    return [
        (n, bool(p)) for n, p, origin in rows if origin == "c" and n not in ("jobs_exhausted", "jobs_dead")
    ]


# -- exercise 1: drop the WHERE -------------------------------------------------------------


def check_plain_index(create_index: object) -> Verdict:
    """Seeds N_DONE finished and N_QUEUED queued jobs in the tutorial's table, builds
    `create_index` (with its two other partial indexes), and measures the claim's search
    against the same table with the tutorial's jobs_ready. Passes when the index is plain (no WHERE), the
    claim's plan uses it, and the claim does at least 20 times the work."""
    bad = _is_sql(create_index, "create_index")
    if bad is not None:
        return bad
    now = now_after(N_DONE, N_QUEUED)
    with tempfile.TemporaryDirectory(prefix="nb08_") as scratch:
        folder = Path(scratch)
        try:
            mine = _seeded(folder, "mine", create_index)
        except sqlite3.Error as exc:
            return not_yet(f"your CREATE INDEX did not run: {type(exc).__name__}: {exc}")
        try:
            indexes = _learners_indexes(mine)
            claim_plan = plan(mine, CLAIM_SEARCH)
            my_steps, my_ms = _claim_cost(mine, now)
        finally:
            mine.close()
        reference = _seeded(folder, "partial", READY_INDEX)
        try:
            ref_steps, ref_ms = _claim_cost(reference, now)
        finally:
            reference.close()
    seen = (
        f"claim plan: {claim_plan}; {my_steps:,} SQLite instructions and {my_ms:.3f} ms per claim, "
        f"against {ref_steps:,} and {ref_ms:.3f} ms with the partial jobs_ready ({N_DONE:,} done rows)"
    )
    if not indexes:
        return not_yet(f"no index of yours was created on jobs. {seen}")
    names = ", ".join(name for name, _ in indexes)
    if all(partial for _, partial in indexes):
        return not_yet(
            f"{names} still has a WHERE clause, so it is still partial. {seen}. Delete the WHERE line."
        )
    if not any(name in claim_plan for name, _ in indexes):
        return not_yet(
            f"the claim does not use {names}: {seen}. Keep the columns (visible_at, id), in that order, "
            "so the index can serve the claim's ORDER BY."
        )
    ratio = my_steps / max(ref_steps, 1)
    if ratio < 20:
        return not_yet(f"{seen}: only {ratio:.0f}x the work. Is the index really plain?")
    return passed(
        f"{seen}. The plan still says SEARCH ... USING INDEX, yet the claim does {ratio:,.0f}x the work: "
        "the plain index starts at the oldest visible_at, which belongs to finished jobs, and SQLite "
        "reads the table row behind every one of them to reject it."
    )


# -- exercise 2: a query SQLite can prove ------------------------------------------------------


def _small_queue(path: Path) -> sqlite3.Connection:
    """200 done, 3 queued, 2 running, 1 dead: the true queued count is 3."""
    db = sqlite3.connect(str(path), isolation_level=None)
    db.executescript(tutorial.SCHEMA)
    insert = (
        "INSERT INTO jobs (kind, payload, state, attempts, visible_at, created_at)"
        " VALUES ('t', '{}', ?, 1, ?, ?)"
    )
    states = ["done"] * 200 + ["queued"] * 3 + ["running"] * 2 + ["dead"]
    db.executemany(insert, ((state, float(i), float(i)) for i, state in enumerate(states)))
    return db


def check_count_queued(query: object) -> Verdict:
    """Runs `query` on a queue with 200 done, 3 queued, 2 running and 1 dead job, and reads
    its plan. Passes when it counts 3 and its plan does not scan the whole table."""
    bad = _is_sql(query, "query")
    if bad is not None:
        return bad
    with tempfile.TemporaryDirectory(prefix="nb08_") as scratch:
        db = _small_queue(Path(scratch) / "count.db")
        try:
            query_plan = plan(db, query)
            rows = db.execute(query).fetchall()
        except (sqlite3.Error, ValueError) as exc:
            return not_yet(f"your query did not run: {type(exc).__name__}: {exc}")
        finally:
            db.close()
    got = rows[0][0] if len(rows) == 1 and len(rows[0]) == 1 else rows
    seen = f"it returned {got!r} (the queue has 3 queued jobs); plan: {query_plan}"
    if scans_table(query_plan):
        return not_yet(
            f"{seen}. SCAN jobs reads every row, the finished ones too: SQLite could not prove that your "
            "WHERE implies jobs_ready's. Repeat the index's term, word for word, joined with AND."
        )
    if got != 3:
        return not_yet(
            f"{seen}. The plan is right, the count is not: add a term that keeps only queued jobs."
        )
    return passed(
        f"{seen}. The term state IN ('queued', 'running') appears in your WHERE exactly as in the index's, "
        "so SQLite may answer from jobs_ready; the extra term then picks the queued rows out of it."
    )


CHECKERS = {"plain_index": check_plain_index, "count_queued": check_count_queued}
STARTERS = {
    "plain_index": {"create_index": READY_INDEX},
    "count_queued": {"query": COUNT_QUEUED_START},
}
ANSWERS = {
    "plain_index": {"create_index": READY_INDEX_ANSWER},
    "count_queued": {"query": COUNT_QUEUED_ANSWER},
}
WRONG = {
    "plain_index": [
        # plain, but on the wrong columns: the claim cannot use it
        {"create_index": "CREATE INDEX jobs_ready ON jobs (id)"},
        {"create_index": "CREATE INDEX jobs_ready ON jobs (visible_at, id) WHERE"},  # does not parse
    ],
    "count_queued": [
        # the same values in another order: not the index's term, so SQLite scans
        {"query": "SELECT COUNT(*) FROM jobs WHERE state IN ('running', 'queued') AND state = 'queued'"},
        # uses the index but counts the running jobs too
        {"query": "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')"},
    ],
}

starting_points(__name__)
