"""Notebook 10's exercise: write the alert rule an operator runs over every ``stats()`` sample.

``check_alert_rule`` builds five small queues on a fake clock, each in a situation an
operator must (or must not) be woken for, reads their real ``stats()`` and calls your rule
on each. Your rule returns the set of alarms it raises, from ``ALARMS``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...clock import FakeClock
from ...queue import JobQueue
from ..walks import ops_queue
from . import Verdict, not_yet, passed, starting_points

ALARMS = ("backlog", "dead", "expired leases")
MAX_AGE_S = 60.0
LEASE = 30.0


def _queue(folder: Path, name: str) -> tuple[JobQueue, FakeClock]:
    clock = FakeClock(10_000.0)
    q = JobQueue(folder / f"{name}.db", lease_seconds=LEASE, max_attempts=2, clock=clock, rng=lambda: 0.0)
    return q, clock


def _healthy(folder: Path) -> JobQueue:
    """Three jobs that arrived a second ago and one being worked on under a live lease."""
    q, clock = _queue(folder, "healthy")
    for n in range(4):
        q.enqueue("email", {"n": n})
    q.claim("w1")
    clock.advance(1)
    return q


def _backlog(folder: Path) -> JobQueue:
    """Five jobs nobody has claimed for two minutes: the workers are not keeping up."""
    q, clock = _queue(folder, "backlog")
    for n in range(5):
        q.enqueue("email", {"n": n})
    clock.advance(120)
    return q


def _dead(folder: Path) -> JobQueue:
    """One job failed for good a moment ago; two fresh jobs wait."""
    q, clock = _queue(folder, "dead")
    for n in range(3):
        q.enqueue("email", {"n": n})
    (job,) = q.claim("w1")
    q.fail(job, "ValueError: payload has no recipient", retry=False)
    clock.advance(1)
    return q


def _expired(folder: Path) -> JobQueue:
    """Two workers took a job each and vanished: both leases ran out a second ago."""
    q, clock = _queue(folder, "expired")
    for n in range(2):
        q.enqueue("email", {"n": n})
    q.claim("w1")
    q.claim("w2")
    clock.advance(LEASE + 1)
    return q


def _tutorial(folder: Path) -> JobQueue:
    """The notebook's six jobs at t+31 s: a dead job, and an expired lease that the
    scheduled job 6 hides from the bound ready_now - queued."""
    q, _ = ops_queue(folder)
    return q


#: (what the queue looks like, how it is built, the alarms the rule must raise)
SCENARIOS: tuple[tuple[str, Callable[[Path], JobQueue], frozenset[str]], ...] = (
    ("a healthy queue", _healthy, frozenset()),
    ("five jobs waiting two minutes", _backlog, frozenset({"backlog"})),
    ("one dead job", _dead, frozenset({"dead"})),
    ("two leases that ran out", _expired, frozenset({"expired leases"})),
    ("the notebook's six jobs at t+31 s", _tutorial, frozenset({"dead"})),
)


def scenario_stats() -> list[tuple[str, dict[str, Any], frozenset[str]]]:
    """Each scenario's name, its real stats(), and the alarms it deserves."""
    found = []
    with tempfile.TemporaryDirectory(prefix="nb10_") as scratch:
        for name, build, expected in SCENARIOS:
            with build(Path(scratch)) as q:
                found.append((name, q.stats(), expected))
    return found


def check_alert_rule(rule: object) -> Verdict:
    """Calls `rule(stats)` on each scenario's stats(). Passes when it returns exactly the
    expected alarms every time: "backlog" when the oldest ready job has waited more than
    MAX_AGE_S, "dead" for any dead job, "expired leases" when ready_now exceeds queued."""
    if not callable(rule):
        return not_yet(f"rule must be a function of one stats() dict, got {rule!r}")
    for name, stats, expected in scenario_stats():
        try:
            raised = rule(dict(stats))
        except Exception as exc:  # the learner's code: report it, never raise
            return not_yet(f"{name}: your rule raised {type(exc).__name__}: {exc} on stats() = {stats}")
        if isinstance(raised, str) or not isinstance(raised, (set, frozenset, list, tuple)):
            return not_yet(f"{name}: return a set of alarm names such as {{'dead'}}, got {raised!r}")
        unknown = set(raised) - set(ALARMS)
        if unknown:
            return not_yet(f"{name}: unknown alarm(s) {sorted(unknown)}; use names from {ALARMS}")
        if set(raised) != expected:
            want = sorted(expected) or "no alarm"
            return not_yet(
                f"{name}: stats() = {stats}; your rule raised {sorted(raised) or 'no alarm'}, want {want}"
            )
    return passed(
        f"all {len(SCENARIOS)} scenarios raise exactly the right alarms. Note the last one: job 3's lease "
        "has run out, yet ready_now equals queued because job 6 is queued but not ready: the bound "
        "only ever undercounts."
    )


def _starter(stats: dict) -> set[str]:
    alarms: set[str] = set()
    # your rules here: add "backlog", "dead" or "expired leases"
    return alarms


def _answer(stats: dict) -> set[str]:
    alarms = set()
    if stats["oldest_ready_age_s"] > 60:
        alarms.add("backlog")
    if stats["dead"] > 0:
        alarms.add("dead")
    if stats["ready_now"] > stats["queued"]:
        alarms.add("expired leases")
    return alarms


def _dead_only_when_many(stats: dict) -> set[str]:
    alarms = _answer(stats) - {"dead"}
    if stats["dead"] > 1:  # one dead job is already one too many
        alarms.add("dead")
    return alarms


def _running_means_expired(stats: dict) -> set[str]:
    alarms = _answer(stats) - {"expired leases"}
    if stats["running"] > 0:  # running is normal: only a lease that ran out is a sign
        alarms.add("expired leases")
    return alarms


CHECKERS = {"alert_rule": check_alert_rule}
STARTERS = {"alert_rule": {"rule": _starter}}
ANSWERS = {"alert_rule": {"rule": _answer}}
WRONG = {"alert_rule": [{"rule": _dead_only_when_many}, {"rule": _running_means_expired}, {"rule": len}]}

starting_points(__name__)
