"""Notebook 04's exercises: the fence is one condition in a SQL statement.

1. ``check_unfenced_complete``: take the lease-token check out of the COMPLETE statement
   and watch the zombie's late completion be accepted while another worker holds the job.
2. ``check_fenced_fail``: a FAIL statement that finds the job by id alone; add the fence so
   that a stale worker's late failure changes nothing, and an honest failure still counts.

Each checker plays the notebook's timelines on a fake clock, on the learner's JobQueue
class when given one (the tutorial's otherwise), with the learner's statement (named
parameters, so removing a condition never breaks the parameter list) as the report under
test, and reports what happened. Once the statement passes, the same timelines run with
the class's own complete() or fail(): the fence in the learner's queue is checked too.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...clock import FakeClock
from ...tutorial.jobqueue import Job, JobQueue
from ..demo_handlers import LEDGER_TABLE, ledger_effect
from . import Verdict, not_yet, passed, starting_points

LEASE = 30.0

# -- the statements the learner starts from ----------------------------------------------

#: The UPDATE of the tutorial's complete() (notebook 02), as it is written there.
COMPLETE_START = """
UPDATE jobs
   SET state = 'done', finished_at = :now, lease_token = NULL
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""

COMPLETE_ANSWER = """
UPDATE jobs
   SET state = 'done', finished_at = :now, lease_token = NULL
 WHERE id = :id AND state = 'running'
"""

#: A failure recorded by id alone: back to queued for a retry, whoever reports it.
FAIL_START = """
UPDATE jobs
   SET state = 'queued', visible_at = :retry_at, last_error = :error, lease_token = NULL
 WHERE id = :id
"""

FAIL_ANSWER = """
UPDATE jobs
   SET state = 'queued', visible_at = :retry_at, last_error = :error, lease_token = NULL
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""


class StatementFailed(Exception):
    """The learner's statement did not run (a syntax error, an unknown column ...)."""


def _run(q: JobQueue, statement: str, params: dict[str, object]) -> int:
    """One write transaction running the learner's statement; the number of rows it changed."""
    try:
        with q._tx() as db:
            return db.execute(statement, params).rowcount
    except sqlite3.Error as exc:
        raise StatementFailed(f"{type(exc).__name__}: {exc}") from exc


def _complete_with(q: JobQueue, statement: str | None, job: Job) -> bool:
    """complete(job, effect) with `statement` as its UPDATE: the ledger row is written
    in the same transaction, only when the statement changed the row. With no statement,
    the queue's own complete()."""
    if statement is None:
        return bool(q.complete(job, effect=ledger_effect(job)))
    params = {"now": q.clock(), "id": job.id, "token": job.lease_token}
    try:
        with q._tx() as db:
            if db.execute(statement, params).rowcount < 1:
                return False
            ledger_effect(job)(db)
    except sqlite3.Error as exc:
        raise StatementFailed(f"{type(exc).__name__}: {exc}") from exc
    return True


def _fail_with(q: JobQueue, statement: str | None, job: Job, error: str = "TimeoutError") -> bool:
    """fail(job) with `statement` as its UPDATE (the queue's own fail() with no statement);
    True when it changed the row."""
    if statement is None:
        return q.fail(job, error) is not None
    params = {"now": q.clock(), "retry_at": q.clock(), "error": error, "id": job.id, "token": job.lease_token}
    return _run(q, statement, params) > 0


def _scene(
    folder: Path, name: str = "zombie", queue_class: type[JobQueue] | None = None
) -> tuple[JobQueue, FakeClock]:
    clock = FakeClock(0.0)
    path = folder / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):  # each timeline starts from an empty queue
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    q = (queue_class or JobQueue)(path, lease_seconds=LEASE, clock=clock, rng=lambda: 0.0)
    q.db.execute(LEDGER_TABLE)
    q.enqueue("email", {"to": "ada@example.com"})
    return q, clock


def _state(q: JobQueue) -> str:
    row = q.db.execute("SELECT state FROM jobs WHERE id = 1").fetchone()
    return "gone from the table" if row is None else row["state"]


def _in_scratch(play: Callable[[Path], Verdict]) -> Verdict:
    """Run one check in a scratch folder; a statement that does not run is a NOT YET."""
    try:
        with tempfile.TemporaryDirectory(prefix="nb04_") as scratch:
            return play(Path(scratch))
    except StatementFailed as exc:
        return not_yet(f"your statement did not run: {exc}")
    except (sqlite3.Error, AttributeError) as exc:  # the statement ran, but left no job to go on with
        return not_yet(f"after your statement the timeline could not go on ({type(exc).__name__}: {exc})")


def _is_sql(statement: object) -> Verdict | None:
    if not isinstance(statement, str) or not statement.strip():
        return not_yet(f"the statement must be a string of SQL, got {statement!r}")
    return None


# -- exercise 1: break the fence ----------------------------------------------------------


def _late_completion(
    folder: Path, statement: str | None, queue_class: type[JobQueue] | None
) -> tuple[bool, bool, list[int], str]:
    """worker-a claims at t=0 and stalls; worker-b takes over at t=31 and is still working
    when worker-a completes late at t=40; worker-b completes at t=45. Returns whether each
    completion was accepted, the attempts the ledger recorded, and the job's state."""
    q, clock = _scene(folder, "late_complete", queue_class)
    with contextlib.closing(q.db):
        (a,) = q.claim("worker-a")
        clock.now = LEASE + 1
        (b,) = q.claim("worker-b")
        clock.now = 40.0
        late = _complete_with(q, statement, a)
        clock.now = 45.0
        current = _complete_with(q, statement, b)
        ledger = [r[0] for r in q.db.execute("SELECT attempt FROM ledger ORDER BY rowid")]
        return late, current, ledger, _state(q)


def check_unfenced_complete(statement: object, queue_class: type[JobQueue] | None = None) -> Verdict:
    """The timeline of _late_completion, both completions made with `statement`, on
    `queue_class` (the notebook passes the learner's JobQueue). Passes when worker-a's late
    completion is accepted (the fence is gone), and the class's own complete() refuses it."""
    bad = _is_sql(statement)
    if bad is not None:
        return bad

    def play(folder: Path) -> Verdict:
        late, current, ledger, state = _late_completion(folder, statement, queue_class)
        said = (
            f"worker-a's late complete() at t=40 was {'accepted' if late else 'refused'}, "
            f"worker-b's at t=45 was {'accepted' if current else 'refused'}; "
            f"ledger rows from attempts {ledger}, job {state}"
        )
        if not late and not current:
            return not_yet(f"{said}. Nobody can complete the job now: keep `id = :id` in the WHERE clause.")
        if state != "done":
            return not_yet(f"{said}. The statement must still set the job done.")
        if not late:
            return not_yet(
                f"{said}. That is the fence at work: worker-a's token is stale. Remove the token "
                "condition from the WHERE clause and see what the fence prevents."
            )
        if _late_completion(folder, None, queue_class)[0]:
            return not_yet(
                f"{said}: the fence is gone from your statement. But your JobQueue's own complete() "
                "accepted worker-a's late completion too: put `lease_token = :token` back in its "
                "WHERE clause (notebook 02's cell) and run that cell."
            )
        if current:
            return passed(
                f"{said}. Without the fence the stale worker's result counted and the effect landed twice."
            )
        return passed(
            f"{said}. Without the fence the zombie's late result won: worker-b, which held the lease, "
            "was refused, and the ledger records attempt 1's effect."
        )

    return _in_scratch(play)


# -- exercise 2: fence the failure -------------------------------------------------------


def check_fenced_fail(statement: object, queue_class: type[JobQueue] | None = None) -> Verdict:
    """Three timelines with `statement` as the failure report, on `queue_class` (the
    notebook passes the learner's JobQueue): an honest failure must schedule a retry; a
    stale failure after worker-b finished, and one while worker-b is still working, must
    change nothing. Then the same three with the class's own fail()."""
    bad = _is_sql(statement)
    if bad is not None:
        return bad
    timelines = (_honest_failure, _late_after_done, _late_while_running)

    def play(folder: Path) -> Verdict:
        for timeline in timelines:
            problem = timeline(folder, statement, queue_class)
            if problem:
                return not_yet(problem)
        for timeline in timelines:
            problem = timeline(folder, None, queue_class)
            if problem:
                return not_yet(f"your statement is fenced, but your JobQueue's own fail() is not: {problem}")
        return passed(
            "an honest failure is retried, and worker-a's stale failure changed nothing, whether "
            "worker-b had finished or was still working: the handler ran twice, never three times."
        )

    return _in_scratch(play)


def _handler_runs(q: JobQueue) -> int | str:
    row = q.db.execute("SELECT attempts FROM jobs WHERE id = 1").fetchone()
    return "an unknown number of" if row is None else row["attempts"]


Queue = type[JobQueue] | None


def _honest_failure(folder: Path, statement: str | None, queue_class: Queue = None) -> str | None:
    q, clock = _scene(folder, "honest", queue_class)
    with contextlib.closing(q.db):
        (a,) = q.claim("worker-a")
        clock.now = 5.0
        changed = _fail_with(q, statement, a)
        state = _state(q)
        if not changed or state != "queued":
            return (
                f"worker-a holds the job and fails it honestly at t=5, but the failure left it "
                f"{state} ({'changed' if changed else 'changed no row'}): a real failure must "
                "still be recorded and retried."
            )
    return None


def _late_after_done(folder: Path, statement: str | None, queue_class: Queue = None) -> str | None:
    q, clock = _scene(folder, "after_done", queue_class)
    with contextlib.closing(q.db):
        (a,) = q.claim("worker-a")
        clock.now = LEASE + 1
        (b,) = q.claim("worker-b")
        q.complete(b)
        clock.now = 40.0
        _fail_with(q, statement, a)
        again = q.claim("worker-c")
        if again:
            return (
                f"worker-b finished the job at t=31, worker-a failed it late at t=40, and worker-c "
                f"claimed it again: the handler ran {_handler_runs(q)} times. The late failure "
                "must change nothing."
            )
    return None


def _late_while_running(folder: Path, statement: str | None, queue_class: Queue = None) -> str | None:
    q, clock = _scene(folder, "while_running", queue_class)
    with contextlib.closing(q.db):
        (a,) = q.claim("worker-a")
        clock.now = LEASE + 1
        (b,) = q.claim("worker-b")
        clock.now = 40.0
        _fail_with(q, statement, a)
        clock.now = 45.0
        accepted = q.complete(b)
        again = q.claim("worker-c")
        if again or not accepted:
            return (
                "the tutorial's timeline passes, but not this one: worker-b still holds the job "
                f"when worker-a fails it late at t=40; worker-b's complete() at t=45 was "
                f"{'accepted' if accepted else 'refused'} and the handler ran {_handler_runs(q)} "
                "times. Checking the state is not enough: whose claim is it?"
            )
    return None


CHECKERS = {"unfenced_complete": check_unfenced_complete, "fenced_fail": check_fenced_fail}
STARTERS = {"unfenced_complete": {"statement": COMPLETE_START}, "fenced_fail": {"statement": FAIL_START}}
ANSWERS = {"unfenced_complete": {"statement": COMPLETE_ANSWER}, "fenced_fail": {"statement": FAIL_ANSWER}}
WRONG = {
    "unfenced_complete": [
        # the state check removed instead of the token: the fence still holds
        {"statement": COMPLETE_START.replace(" AND state = 'running'", "")},
        # a statement that can never match: nobody completes the job
        {"statement": COMPLETE_START.replace("WHERE id = :id", "WHERE 0 AND id = :id")},
        {"statement": "UPDATE jobs SET state = 'finished' WHERE id = :id"},  # breaks the state CHECK
    ],
    "fenced_fail": [
        # only the state checked: fine after worker-b finished, not while it is still working
        {"statement": FAIL_START.replace("WHERE id = :id", "WHERE id = :id AND state = 'running'")},
        # a fence nothing passes: the honest failure is lost too
        {"statement": FAIL_START.replace("WHERE id = :id", "WHERE id = :id AND lease_token = 'x'")},
    ],
}

starting_points(__name__)
