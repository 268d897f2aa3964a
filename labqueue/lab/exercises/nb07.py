"""Notebook 07's exercises.

1. ``check_backoff``: write the full-jitter delay, ``backoff(attempts, base, cap, rng)``.
   The checker feeds it known random draws and compares every delay, over attempts 1 to
   12, with a uniform pick under the ceiling min(cap, base * 2 ** (attempts - 1)).
2. ``check_poison_prediction``: choose max_attempts and predict in which round of the
   crash loop the poison job goes dead, and with how many attempts. The checker plays the
   crash loop on a fake clock (a claim, no report, the lease runs out) with the JobQueue
   class the notebook passes (the learner's; the tutorial's without one) and compares.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...clock import FakeClock
from ...tutorial.jobqueue import JobQueue
from . import Verdict, not_yet, passed, starting_points

Backoff = Callable[[int, float, float, Callable[[], float]], float]

ATTEMPTS = range(1, 13)
SETTINGS = ({"base": 1.0, "cap": 60.0}, {"base": 2.0, "cap": 30.0}, {"base": 0.5, "cap": 5.0})


def starter_backoff(attempts: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    return base * 2 ** (attempts - 1)  # exponential, but no cap and no jitter


def answer_backoff(attempts: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    ceiling = min(cap, base * 2 ** (attempts - 1))
    return rng() * ceiling


def wrong_backoff_no_cap(attempts: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    return rng() * base * 2 ** (attempts - 1)


def wrong_backoff_no_jitter(attempts: int, base: float, cap: float, rng: Callable[[], float]) -> float:
    return min(cap, base * 2 ** (attempts - 1))


def _ceiling(attempts: int, base: float, cap: float) -> float:
    return min(cap, base * 2 ** (attempts - 1))


def check_backoff(backoff: object) -> Verdict:
    """Passes when `backoff(attempts, base, cap, rng)` returns rng() times the capped,
    doubling ceiling: the same draw always gives the same fraction of the ceiling."""
    if not callable(backoff):
        return not_yet(f"backoff must be a function backoff(attempts, base, cap, rng), got {backoff!r}")
    draws = random.Random(11)
    for settings in SETTINGS:
        base, cap = settings["base"], settings["cap"]
        for attempts in ATTEMPTS:
            u = draws.random()
            calls = 0

            def rng(u: float = u) -> float:
                nonlocal calls
                calls += 1
                return u

            try:
                delay = float(backoff(attempts, base, cap, rng))
            except Exception as exc:
                call = f"backoff({attempts}, {base:g}, {cap:g}, rng)"
                return not_yet(f"{call} raised {type(exc).__name__}: {exc}")
            ceiling = _ceiling(attempts, base, cap)
            where = f"with base {base:g} s and cap {cap:g} s, attempt {attempts}"
            if not math.isfinite(delay) or delay < 0:
                return not_yet(f"{where}: a delay of {delay!r} s; it must be a number of seconds from 0 up")
            if delay > ceiling + 1e-9:
                bound = "the cap" if ceiling == cap else f"its ceiling {ceiling:g} s"
                return not_yet(f"{where}: a delay of {delay:g} s, above {bound}.")
            if math.isclose(delay, ceiling) and not math.isclose(u, 1.0):
                return not_yet(
                    f"{where}: the delay is the ceiling itself ({ceiling:g} s). Without jitter, "
                    "every job that failed together retries together."
                )
            if calls != 1:
                return not_yet(f"{where}: rng() was called {calls} times; draw once per delay.")
            if not math.isclose(delay, u * ceiling, rel_tol=1e-9, abs_tol=1e-12):
                uncapped = u * base * 2 ** (attempts - 1)
                hint = " The ceiling stops growing at the cap." if math.isclose(delay, uncapped) else ""
                return not_yet(
                    f"{where}: rng() gave {u:.3f}, so the delay should be {u:.3f} x {ceiling:g} = "
                    f"{u * ceiling:.3f} s, got {delay:.3f} s.{hint}"
                )
    return passed(
        "every delay is one uniform draw times min(cap, base * 2 ** (attempts - 1)): full jitter, "
        "the formula fail() uses."
    )


# -- the poison job's crash loop, on a fake clock -------------------------------------------


def crash_loop(
    max_attempts: int,
    *,
    lease: float = 1.0,
    folder: str | Path | None = None,
    queue_class: type | None = None,
    rounds_at_most: int | None = None,
) -> list[dict]:
    """One poison job: every round a fresh worker claims it and dies without reporting,
    then the lease runs out. Returns, per round, what the claim found and the job's row
    afterwards, until a round's claim finds the job dead (or after `rounds_at_most`,
    max_attempts + 1 unless given: a claim that counts no attempt never gets there)."""
    clock = FakeClock(0.0)
    rounds: list[dict] = []
    row = "SELECT state, attempts, last_error FROM jobs WHERE id = 1"
    with tempfile.TemporaryDirectory(prefix="nb07_") as scratch:
        path = Path(folder or scratch) / "poison_prediction.db"
        q = (queue_class or JobQueue)(path, lease_seconds=lease, max_attempts=max_attempts, clock=clock)
        try:
            q.enqueue("poison", {})
            for number in range(1, (rounds_at_most or max_attempts + 1) + 1):
                got = q.claim(f"w{number}")  # the worker dies at once: nothing calls fail()
                state, attempts, last_error = q.db.execute(row).fetchone()
                rounds.append(
                    {
                        "round": number,
                        "claimed": bool(got),
                        "state": state,
                        "attempts": attempts,
                        "last_error": last_error,
                    }
                )
                if state == "dead":
                    break
                clock.advance(lease * 1.5)
        finally:
            q.db.close()
    return rounds


def check_poison_prediction(
    max_attempts: object, dead_in_round: object, attempts: object, queue_class: type | None = None
) -> Verdict:
    """Passes when the learner predicted, for their max_attempts, the round whose claim
    finds the poison job dead and the attempts it ends with, on `queue_class` (the
    learner's JobQueue; the tutorial's without one)."""
    whole = [isinstance(v, int) and not isinstance(v, bool) for v in (max_attempts, dead_in_round, attempts)]
    if not all(whole):
        return not_yet(
            "max_attempts, dead_in_round and attempts must all be whole numbers, got "
            f"{max_attempts!r}, {dead_in_round!r} and {attempts!r}"
        )
    if not 1 <= max_attempts <= 10:
        return not_yet(f"pick max_attempts from 1 to 10, got {max_attempts}")
    rounds = crash_loop(max_attempts, queue_class=queue_class)
    last = rounds[-1]
    if last["state"] != "dead":
        return not_yet(
            f"with max_attempts={max_attempts}, the job was still {last['state']} with "
            f"attempts={last['attempts']} after {last['round']} rounds: your claim does not count "
            "attempts (CLAIM must set attempts = attempts + 1), so the crash loop never ends."
        )
    happened = (
        f"with max_attempts={max_attempts}, round {last['round']}'s claim found the job dead "
        f"with attempts={last['attempts']} ({last['last_error']})"
    )
    if (dead_in_round, attempts) == (last["round"], last["attempts"]):
        return passed(
            f"{happened}, as you predicted. Each of the first {max_attempts} workers claimed it and died; "
            "only the next claim can see that the last lease ran out."
        )
    # A wrong prediction gets a direction, not the answer: the learner predicts again.
    said = f"you predicted round {dead_in_round} with attempts={attempts} (max_attempts={max_attempts})"
    off = []
    if dead_in_round != last["round"]:
        later = last["round"] > dead_in_round
        off.append(f"the job went dead in {'a later' if later else 'an earlier'} round")
    if attempts != last["attempts"]:
        off.append(f"it ended with {'more' if last['attempts'] > attempts else 'fewer'} attempts")
    question = "Which claim counts an attempt, and which one retires the job?"
    return not_yet(f"{said}, but {' and '.join(off)}. {question}")


CHECKERS = {"backoff": check_backoff, "poison_prediction": check_poison_prediction}
STARTERS = {
    "backoff": {"backoff": starter_backoff},
    "poison_prediction": {"max_attempts": 5, "dead_in_round": 0, "attempts": 0},
}
ANSWERS = {
    "backoff": {"backoff": answer_backoff},
    "poison_prediction": {"max_attempts": 5, "dead_in_round": 6, "attempts": 5},
}
WRONG = {
    "backoff": [{"backoff": wrong_backoff_no_cap}, {"backoff": wrong_backoff_no_jitter}],
    "poison_prediction": [
        {"max_attempts": 5, "dead_in_round": 5, "attempts": 5},  # the round of the last crash
        {"max_attempts": 5, "dead_in_round": 6, "attempts": 6},  # the retiring claim does not count
    ],
}

starting_points(__name__)
