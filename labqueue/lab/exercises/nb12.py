"""Notebook 12's exercise: three queues, each with one rule broken. Which invariant breaks?

``mini_chaos(queue_class)`` plays a small end-to-end run on a fake clock, in this kernel:
four jobs (a credit job whose first attempt stalls past its lease, a poison job whose
worker dies on every attempt, a job that always fails, and a plain credit job), worked
until nothing is left to claim, then checks the run's invariants as notebook 12's chaos
run does. ``check_invariants`` asks you to predict, from the variants' source, which
invariant each one breaks, and runs them to see. The queue and its three variants are the
tutorial's (labqueue.tutorial.jobqueue, the queue Part 1 builds).
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...clock import FakeClock
from ...tutorial.jobqueue import RETIRE_EXHAUSTED, Job, JobQueue
from ..demo_handlers import LEDGER_TABLE, ledger_effect
from . import Verdict, not_yet, passed, starting_points

LEASE = 30.0
MAX_ATTEMPTS = 3
KINDS = {1: "slow", 2: "poison", 3: "bad", 4: "credit"}
BAD_ERROR = "ValueError: payload has no recipient"

INVARIANTS = (
    "nothing is left queued or running",
    "no job's effect was applied twice",
    "every dead job carries its reason",
    "no job was attempted more than max_attempts times",
)

# -- the broken variants ----------------------------------------------------------------------

COMPLETE_BY_ID = "UPDATE jobs SET state = 'done', finished_at = ?, lease_token = NULL WHERE id = ?"
FORGET_ERROR = "UPDATE jobs SET last_error = NULL WHERE id = ?"
CLAIM_QUEUED_ONLY = """
UPDATE jobs
   SET state = 'running', attempts = attempts + 1,
       visible_at = :lease_ends, lease_token = :token, worker = :worker
 WHERE id IN (SELECT id FROM jobs
               WHERE state = 'queued' AND visible_at <= :now
               ORDER BY visible_at, id
               LIMIT :limit)
RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at
"""


class QueueA(JobQueue):
    """fail() works as before, then wipes the error of a job it has just made dead."""

    def fail(self, job, error):
        state = super().fail(job, error)
        if state == "dead":
            self.db.execute(FORGET_ERROR, (job.id,))
        return state


class QueueB(JobQueue):
    """complete() finds the job by its id alone: no token, no state."""

    def complete(self, job, effect=None):
        with self._tx() as db:
            if db.execute(COMPLETE_BY_ID, (self.clock(), job.id)).rowcount != 1:
                return False
            if effect is not None:
                effect(db)
        return True


class QueueC(JobQueue):
    """claim() takes only queued jobs: a running job is never handed to another worker."""

    def claim(self, worker, *, limit=1):
        now = self.clock()
        lease = {"lease_ends": now + self.lease_seconds, "token": uuid.uuid4().hex, "worker": worker}
        params = {"now": now, "limit": limit, **lease}
        with self._tx() as db:
            db.execute(RETIRE_EXHAUSTED, {"now": now})
            rows = db.execute(CLAIM_QUEUED_ONLY, params).fetchall()
        jobs = (Job(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], r[6]) for r in rows)
        return sorted(jobs, key=lambda job: job.id)


VARIANTS: dict[str, type[JobQueue]] = {"A": QueueA, "B": QueueB, "C": QueueC}

# -- the mini chaos run -----------------------------------------------------------------------


@dataclass
class MiniRun:
    """What a mini chaos run left behind: each job's row, the ledger, and each invariant."""

    jobs: list[tuple[int, str, str, int, str | None]]  # id, kind, state, attempts, last_error
    ledger: list[tuple[int, int]]  # job id, attempt
    held: dict[str, bool]

    @property
    def broken(self) -> list[str]:
        return [name for name, ok in self.held.items() if not ok]

    def report(self) -> str:
        rows = [
            f"job {i} {kind:<6} {state:<7} attempts={n} last_error={err}"
            for i, kind, state, n, err in self.jobs
        ]
        rows.append(f"ledger rows (job, attempt): {self.ledger}")
        rows += [f"{'ok ' if ok else 'NO '} {name}" for name, ok in self.held.items()]
        return "\n".join(rows)


def mini_chaos(queue_class: type[JobQueue] = JobQueue, folder: Path | None = None) -> MiniRun:
    """Four jobs, one worker per claim, a fake clock that jumps past each lease between
    rounds. A stalled first attempt reports late, once another worker has taken its job over."""
    with tempfile.TemporaryDirectory(prefix="nb12_") as scratch:
        clock = FakeClock(0.0)
        path = Path(folder or scratch) / f"mini_{queue_class.__name__}.db"
        q = queue_class(path, lease_seconds=LEASE, max_attempts=MAX_ATTEMPTS, clock=clock, rng=lambda: 0.0)
        try:
            q.db.execute(LEDGER_TABLE)
            for job_id in sorted(KINDS):
                q.enqueue(KINDS[job_id], {})
            stalled: dict[int, Job] = {}
            for round_no in range(12):
                for job in q.claim(f"w{round_no}", limit=len(KINDS)):
                    kind = KINDS[job.id]
                    if kind == "slow" and job.attempts == 1:
                        stalled[job.id] = job  # stalls past its lease; reports later
                    elif kind == "poison":
                        pass  # os._exit(1): the worker dies, nobody reports
                    elif kind == "bad":
                        q.fail(job, BAD_ERROR)
                    else:
                        if job.id in stalled:  # the stalled first attempt wakes up and reports
                            late = stalled.pop(job.id)
                            q.complete(late, effect=ledger_effect(late))
                        q.complete(job, effect=ledger_effect(job))
                clock.advance(LEASE + 1)
            jobs = [
                tuple(r)
                for r in q.db.execute("SELECT id, kind, state, attempts, last_error FROM jobs ORDER BY id")
            ]
            ledger = [tuple(r) for r in q.db.execute("SELECT job_id, attempt FROM ledger ORDER BY rowid")]
        finally:
            q.db.close()
    effects = [job_id for job_id, _ in ledger]
    held = {
        INVARIANTS[0]: all(state in ("done", "dead") for _, _, state, _, _ in jobs),
        INVARIANTS[1]: len(effects) == len(set(effects)),
        INVARIANTS[2]: all(err for _, _, state, _, err in jobs if state == "dead"),
        INVARIANTS[3]: all(n <= MAX_ATTEMPTS for _, _, _, n, _ in jobs),
    }
    return MiniRun(jobs, ledger, held)


# -- the exercise -------------------------------------------------------------------------------

# Why a variant's run keeps the invariant a learner named (variant, its number): what the
# variant leaves working, never which invariant it breaks.
KEPT = {
    ("A", 1): "A still makes the job dead, which finishes it; nothing is left running",
    ("A", 2): "A changes fail(), not complete(): the token still refuses a second completion",
    ("A", 4): "A's claim still counts attempts and retires a job at max_attempts",
    ("B", 1): "an unfenced complete() still finishes every job it is called on",
    ("B", 3): "B changes complete(), not fail(): a dead job keeps its error",
    ("B", 4): "B's claim still counts attempts and retires a job at max_attempts",
    ("C", 2): "C never hands a running job to a second worker, so no two holders can both complete it",
    ("C", 3): "C's failures go through fail() as before, error and all",
    (
        "C",
        4,
    ): "C never takes a job back from a worker, so no job is attempted too often: too seldom, if anything",
}


def check_invariants(answers: object) -> Verdict:
    """`answers` maps each variant ("A", "B", "C") to the number (1 to 4) of the invariant
    in INVARIANTS that its mini chaos run breaks. Runs the real queue and each variant."""
    if not isinstance(answers, Mapping) or set(answers) != set(VARIANTS):
        return not_yet(f"answers must be a dict with the keys {sorted(VARIANTS)}, got {answers!r}")
    choices = range(1, len(INVARIANTS) + 1)
    unanswered = [v for v in VARIANTS if answers[v] not in choices]
    if unanswered:
        return not_yet(f"answer each variant with an invariant's number from 1 to {len(INVARIANTS)}; "
                       f"{unanswered[0]} is {answers[unanswered[0]]!r}")  # fmt: skip
    reference = mini_chaos(JobQueue)
    if reference.broken:  # the real queue must keep every invariant, or the run itself is wrong
        return not_yet(
            f"the real queue broke {reference.broken}: the mini run is not working\n{reference.report()}"
        )
    wrong: dict[str, str] = {}
    for name, variant in VARIANTS.items():
        said = INVARIANTS[answers[name] - 1]
        if said not in mini_chaos(variant).broken:
            why = KEPT.get((name, answers[name]))
            wrong[name] = f"{name}: its run kept '{said}'" + (f" ({why})" if why else "")
    if wrong:
        first = next(iter(wrong))
        return not_yet(
            f"{len(wrong)} of {len(VARIANTS)} not yet: {'; '.join(wrong.values())}. Read the source of "
            f"{' and '.join(wrong)} again, or run print(nb12.mini_chaos(nb12.VARIANTS[{first!r}]).report()) "
            "to see its run."
        )
    return passed(
        "each variant breaks exactly the invariant you named, and the real queue keeps all four. "
        "A dead job without its reason leaves a person nothing to act on; a complete() without the token "
        "lets a zombie's effect land beside the new holder's; and without reclaiming running jobs whose "
        "lease ran out, a crashed worker's job is never finished."
    )


CHECKERS = {"invariants": check_invariants}
STARTERS = {"invariants": {"answers": {"A": None, "B": None, "C": None}}}
ANSWERS = {"invariants": {"answers": {"A": 3, "B": 2, "C": 1}}}
# Every wrong answer: each variant given each invariant it keeps, the others right.
WRONG = {
    "invariants": [
        {"answers": {**ANSWERS["invariants"]["answers"], variant: number}} for variant, number in sorted(KEPT)
    ],
}

starting_points(__name__)
