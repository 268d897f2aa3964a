"""The invariants a chaos run must end with, checked on plain rows read from its database.

Kept apart from the supervisor, so each rule can be tested on hand-made rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..drivers.sqlite.sql import LAST_ATTEMPT_EXPIRED

TUTORIAL_MIX: dict[str, int] = {"credit": 260, "slow": 6, "poison": 10, "bad": 24}
EXPECTED_STATE = {"credit": "done", "slow": "done", "poison": "dead", "bad": "dead"}
LEDGER_KINDS = ("credit", "slow")  # the kinds whose effect writes one ledger row
SLOW_STALL_SECONDS = 2.0  # labqueue.demo.handlers.slow stalls this long on attempt 1
CREDIT_TIMEOUT_EVERY = 20  # labqueue.demo.handlers.credit fails attempt 1 of every 20th job id


@dataclass(frozen=True)
class JobRow:
    """A job as the run left it."""

    id: int
    kind: str
    state: str
    attempts: int
    max_attempts: int
    last_error: str | None
    finished_at: float | None


@dataclass(frozen=True)
class Check:
    """One invariant: whether it held, and the first few jobs that broke it."""

    claim: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"  {'ok  ' if self.ok else 'FAIL'} {self.claim}" + (f": {self.detail}" if self.detail else "")


def natural_failures(job: JobRow, lease: float) -> int:
    """Attempts the demo handlers use up on their own, with no fault injected: the
    credit timeout on attempt 1 of every 20th job, the slow job's first attempt that
    outlives a short lease."""
    if job.kind == "credit":
        return int(job.id % CREDIT_TIMEOUT_EVERY == 0)
    if job.kind == "slow":
        return int(lease < SLOW_STALL_SECONDS)
    return 0


def faults_used_it_up(job: JobRow, hits: int, lease: float) -> bool:
    """A job that should succeed may end dead only if injected kills and pauses (and
    crashes of a worker that held it beside a poison job in one batch), with the
    handler's own failures, account for every one of its attempts, and the queue
    retired it because its last lease ran out."""
    return (
        job.state == "dead"
        and (job.last_error or "").startswith(LAST_ATTEMPT_EXPIRED)
        and hits + natural_failures(job, lease) >= job.max_attempts
    )


def _first(ids: Sequence[object], limit: int = 5) -> str:
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(str(i) for i in ids[:limit]) + more


def check_run(
    jobs: Sequence[JobRow],
    ledger: Sequence[tuple[int, int]],
    hits: Mapping[int, int],
    *,
    lease: float,
    drained: bool,
    cancelled: Collection[int] = (),
    scheduled: tuple[str, Sequence[str]] | None = None,
) -> list[Check]:
    """Every invariant of the run. `ledger` holds (job_id, attempt) rows, `hits` the
    number of injected faults (and crashes) that caught each job in a worker's hands. Part 2:
    `cancelled` the jobs the run cancelled, `scheduled` the scheduled kind and every
    dedupe key its jobs carried (their own rules below)."""
    rows = Counter(job_id for job_id, _ in ledger)
    attempt_of = dict(ledger)
    cancelled = set(cancelled)
    periodic = scheduled[0] if scheduled else None
    # A scheduled job enqueued as the run stopped may be left live: the schedule never ends.
    live = [j.id for j in jobs if j.state in ("queued", "running") and j.kind != periodic]
    checks = [Check("nothing is left queued or running", drained and not live, _first(live))]

    should_succeed = [j for j in jobs if EXPECTED_STATE.get(j.kind) == "done" and j.id not in cancelled]
    lost = [
        j.id
        for j in should_succeed
        if not (j.state == "done" and rows[j.id] == 1) and not faults_used_it_up(j, hits.get(j.id, 0), lease)
    ]
    checks.append(
        Check("every credit and slow job is done with exactly one ledger row", not lost, _first(lost))
    )

    twice = [j.id for j in jobs if rows[j.id] != (1 if j.state == "done" and j.kind in LEDGER_KINDS else 0)]
    checks.append(
        Check("no job's effect was applied twice, and no dead job has one", not twice, _first(twice))
    )

    superseded = [j.id for j in jobs if j.id in attempt_of and attempt_of[j.id] != j.attempts]
    checks.append(
        Check("every recorded effect is from the job's last attempt", not superseded, _first(superseded))
    )

    should_die = [j for j in jobs if EXPECTED_STATE.get(j.kind) == "dead" and j.id not in cancelled]
    alive = [j.id for j in should_die if not (j.state == "dead" and j.attempts == j.max_attempts)]
    checks.append(Check("every poison and bad job is dead after max_attempts", not alive, _first(alive)))

    silent = [j.id for j in jobs if j.state == "dead" and not j.last_error]
    checks.append(Check("every dead job carries its reason", not silent, _first(silent)))

    # A slow job's first attempt outlives its lease. Whether another worker takes it over
    # before the stall ends depends on how fast the backlog ahead of it drains (a reclaimed
    # job lines up behind the jobs already waiting); once one has, attempt 1 must lose.
    stale_won = [j.id for j in jobs if j.kind == "slow" and j.attempts > 1 and attempt_of.get(j.id) == 1]
    checks.append(
        Check(
            "no slow job's stalled attempt 1 was accepted after another worker took it over",
            not stale_won,
            _first(stale_won),
        )
    )
    if cancelled:
        by_id = {j.id: j for j in jobs}
        wrong = sorted(i for i in cancelled if by_id[i].state != "cancelled" or rows[i])
        checks.append(
            Check("every job the run cancelled ended cancelled, with no effect", not wrong, _first(wrong))
        )
    stray = [j.id for j in jobs if j.state == "cancelled" and j.id not in cancelled]
    if cancelled or stray:  # a run without cancels keeps the tutorial's seven checks
        checks.append(Check("no job is cancelled that the run did not cancel", not stray, _first(stray)))
    if scheduled:
        kind, keys = scheduled
        repeated = sorted(key for key, n in Counter(keys).items() if n > 1)
        own = [j for j in jobs if j.kind == kind]
        failed = [j.id for j in own if j.state == "dead"]
        checks.append(
            Check(
                f"one {kind} job per period of the schedule ({len(own)} periods), none dead",
                not repeated and not failed and len(keys) == len(own) > 0,
                _first(repeated + failed),
            )
        )
    return checks


def figures(jobs: Sequence[JobRow], ledger: Sequence[tuple[int, int]]) -> dict[str, object]:
    """The run's figures, in the order the tutorial prints them."""
    rows = Counter(job_id for job_id, _ in ledger)
    attempt_of = dict(ledger)
    return {
        "states": dict(sorted(Counter(j.state for j in jobs).items())),
        "ledger_rows": len(ledger),
        "jobs_with_two_or_more_rows": sum(1 for n in rows.values() if n > 1),
        "credit_retried": sum(1 for j in jobs if j.kind == "credit" and j.attempts > 1),
        "slow_by_attempt": dict(
            sorted(Counter(attempt_of[j.id] for j in jobs if j.kind == "slow" and j.id in attempt_of).items())
        ),
        "dead_attempts": dict(
            sorted(Counter((j.kind, j.attempts) for j in jobs if j.state == "dead").items())
        ),
    }
