"""Notebook 15's exercises.

1. ``check_claim_order``: write the claim's ORDER BY. The checker puts it into the claim
   statement in place of labqueue.drivers.sqlite.sql.CLAIM_ORDER and claims, one job at a time, from a
   small queue on a fake clock (priorities, a delayed job, a retried job, ties), comparing
   the order with the package's; then it reads the plan: the order must come from the
   index jobs_ready, not from sorting every ready row.
2. ``check_weights``: choose the weights of the fair turns, written as ``labqueue worker
   --queues`` takes them, so that under a flood in every queue reports gets at least 40 %
   of the completions, mail at least 30 % and webhooks at least 15 %. The checker runs
   notebook 15's simulation with them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...clock import FakeClock
from ...drivers.sqlite import sql
from ...errors import InvalidArgument
from ...queue import JobQueue, new_token
from ..claim_index import plan
from ..priorities import simulate, subselect
from . import Verdict, not_yet, passed, starting_points

# -- 1. the claim's ORDER BY ---------------------------------------------------------------

STARTER_ORDER = "visible_at, id"  # the tutorial's order: no priorities yet
ANSWER_ORDER = "priority DESC, visible_at, id"
LEASE = 30.0


def _scenario(q: JobQueue, clock: FakeClock) -> None:
    """Eight jobs: four priorities (one below the default), ties within a priority, a delayed
    job that is ready by the time the claims start, and a job that failed once, whose retry
    is ready later than a younger job of its priority."""
    q.enqueue("a", {"n": 1})  # t=0, priority 0
    q.enqueue("b", {"n": 2}, priority=5)  # t=0
    q.enqueue("c", {"n": 3}, priority=5, delay=4)  # ready at t=4
    clock.advance(1)
    q.enqueue("d", {"n": 4}, priority=10)  # t=1
    q.enqueue("e", {"n": 5})  # t=1, priority 0
    q.enqueue("f", {"n": 6}, priority=5)  # t=1
    (first,) = q.claim("w0")  # job 4, the highest priority
    q.fail(first, "TimeoutError: upstream", retry=True)  # ready again at t=2 (the rng is pinned to 1)
    clock.advance(0.5)
    q.enqueue("g", {"n": 7}, priority=10)  # t=1.5: ready before job 4's retry
    q.enqueue("h", {"n": 8}, priority=-3)  # t=1.5, below the default
    clock.now = 10.0


def claim_order(order_by: str, folder: str | Path | None = None) -> tuple[list[int], str]:
    """The ids the claim takes one at a time with `order_by` as its ORDER BY, and the plan of
    its search. Raises sqlite3 errors for SQL that does not run."""
    statement = sql.CLAIM.replace(sql.CLAIM_ORDER, order_by)
    with tempfile.TemporaryDirectory(prefix="nb15_") as scratch:
        clock = FakeClock(0.0)
        path = Path(folder or scratch) / "claim_order.db"
        with JobQueue(path, clock=clock, lease_seconds=LEASE, rng=lambda: 1.0, wake=False) as q:
            _scenario(q, clock)
            search_plan = plan(q.db, subselect(statement))
            taken = []
            while True:
                params = {
                    "now": clock.now,
                    "lease_end": clock.now + LEASE,
                    "token": new_token(),
                    "worker": "w1",
                    "limit": 1,
                }
                rows = q.db.execute(statement, params).fetchall()
                if not rows:
                    break
                taken.append(rows[0]["id"])
                if len(taken) > 20:
                    break
    return taken, search_plan


def scenario_jobs() -> dict[int, tuple[int, float]]:
    """Each job of the scenario: its priority and when it is ready (visible_at), as the claims
    at t=10 find them."""
    with tempfile.TemporaryDirectory(prefix="nb15_") as scratch:
        clock = FakeClock(0.0)
        with JobQueue(
            Path(scratch) / "jobs.db", clock=clock, lease_seconds=LEASE, rng=lambda: 1.0, wake=False
        ) as q:
            _scenario(q, clock)
            rows = q.db.execute("SELECT id, priority, visible_at FROM jobs").fetchall()
    return {row["id"]: (row["priority"], row["visible_at"]) for row in rows}


def _why_apart(mine: int | None, right: int) -> str:
    """What the learner's order got wrong where it first parts from the claim's."""
    if mine is None:
        return f"your order stopped before job {right}"
    jobs = scenario_jobs()
    (p_mine, ready_mine), (p_right, ready_right) = jobs[mine], jobs[right]
    said = f"job {mine} instead of job {right}"
    if p_mine != p_right:
        return (
            f"{said}: job {mine} has priority {p_mine}, job {right} priority {p_right}. A worker wants the "
            "highest priority first."
        )
    if ready_mine != ready_right:
        return (
            f"{said}: both have priority {p_mine}, but job {right} has been ready since "
            f"t={ready_right:g} and job {mine} only since t={ready_mine:g} (a delayed job, or a retry, "
            "keeps its id but not its place). Among jobs of one priority, the one ready longest goes first."
        )
    return f"{said}: same priority, ready at the same moment; a tie goes to the lower id."


def check_claim_order(order_by: object) -> Verdict:
    """Passes when `order_by` claims the jobs in the package's order (highest priority first,
    then the oldest visible_at, then the lowest id) and SQLite reads that order off the index."""
    if not isinstance(order_by, str) or not order_by.strip():
        return not_yet(
            f"order_by must be the text after ORDER BY, such as 'visible_at, id'; got {order_by!r}"
        )
    if ";" in order_by or "--" in order_by:
        return not_yet("write only the ORDER BY terms: no ';' and no comments")
    try:
        got, got_plan = claim_order(order_by)
    except Exception as exc:  # the learner's SQL: report it, never raise
        return not_yet(f"ORDER BY {order_by} did not run: {type(exc).__name__}: {exc}")
    want, _ = claim_order(sql.CLAIM_ORDER)
    if got != want:
        first = next(i for i, (a, b) in enumerate(zip(got, want + [None] * len(got), strict=False)) if a != b)
        mine = got[first] if first < len(got) else None
        return not_yet(
            f"ORDER BY {order_by} claims jobs {got}; the claim must take {want}. They part at claim "
            f"{first + 1}: {_why_apart(mine, want[first])}"
        )
    if "TEMP B-TREE" in got_plan:
        return not_yet(
            f"the order is right, but the plan is '{got_plan}': SQLite sorts every ready row for each "
            "claim. Write the terms exactly as the index jobs_ready lists its columns."
        )
    return passed(
        f"ORDER BY {order_by} takes {want}: priority 10 first (job 7 before job 4, whose retry was "
        "ready later), then priority 5 by the time each was ready (the delayed job 3 after job 6), "
        f"then 0, then -3. The plan is '{got_plan}': the index delivers the order, no sort."
    )


# -- 2. weights for the fair turns -----------------------------------------------------------

MIX = "everyone floods"
TARGETS = {"reports": 0.40, "mail": 0.30, "webhooks": 0.15}
STARTER_QUEUES = "mail,webhooks,reports"
ANSWER_QUEUES = "mail:3,webhooks:2,reports:4"


def check_weights(queues: object) -> Verdict:
    """Passes when fair turns with these `queues` (``--queues`` syntax, e.g. "mail:2,reports")
    give every queue at least its TARGETS share of the completions under the MIX flood."""
    if not isinstance(queues, str) or not queues.strip():
        return not_yet(
            f"write queues as --queues takes them, such as 'mail:2,webhooks,reports'; got {queues!r}"
        )
    try:
        run = simulate(MIX, fair=True, queues=queues, duration_s=60.0)
    except InvalidArgument as exc:
        return not_yet(f"{queues!r}: {exc}")
    shares = run.shares()
    said = ", ".join(f"{q} {shares[q]:.0%}" for q in TARGETS)
    short = [q for q, target in TARGETS.items() if shares[q] < target]
    if short:
        wants = ", ".join(f"{q} at least {TARGETS[q]:.0%}" for q in short)
        return not_yet(f"with {queues!r} the completions split {said}; the goal is {wants}")
    return passed(
        f"with {queues!r} the completions split {said}. Every queue is flooded, so each gets its "
        "weight divided by the sum of the weights."
    )


CHECKERS = {"claim_order": check_claim_order, "weights": check_weights}
STARTERS = {"claim_order": {"order_by": STARTER_ORDER}, "weights": {"queues": STARTER_QUEUES}}
ANSWERS = {"claim_order": {"order_by": ANSWER_ORDER}, "weights": {"queues": ANSWER_QUEUES}}
WRONG = {
    "claim_order": [
        {"order_by": "priority, visible_at, id"},  # the lowest priority first
        {"order_by": "priority DESC, id"},  # a retry keeps its old place
        {"order_by": "-priority, visible_at, id"},  # the right order, but sorted for every claim
    ],
    "weights": [
        {"queues": "mail,webhooks,reports:9"},  # reports gets its share, mail does not
        {"queues": "mail:3,reports:4"},  # webhooks is not served at all
        {"queues": "mail:3,webhooks:0,reports:4"},  # a weight must be at least 1
    ],
}

starting_points(__name__)
