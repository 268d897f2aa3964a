"""Notebook 16's exercise: write the dedupe key that makes a schedule run once per period.

``check_period_key`` races four scheduler threads, each with its own connection to one queue
file and its own fake clock, against your ``period_key(name, seconds, now)``. Two schedules
("report" and "cleanup", both every 60 s) tick twice per scheduler in every period, at
scattered moments, except for three periods when every scheduler is down. Each tick enqueues
with ``dedupe_key=period_key(...)``. It passes when every period with a tick got exactly one
job of each schedule.
"""

from __future__ import annotations

import math
import random
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from ...clock import FakeClock
from ...queue import JobQueue, period_start
from . import Verdict, not_yet, passed, starting_points

PeriodKey = Callable[[str, float, float], str]

SCHEDULERS = 4
SECONDS = 60.0
SCHEDULES = ("report", "cleanup")
FIRST_PERIOD = 6000.0  # a multiple of SECONDS
PERIODS = 10
DOWN = (4, 5, 6)  # periods in which every scheduler is down
TICKS_PER_PERIOD = 2


def starter_period_key(name: str, seconds: float, now: float) -> str:
    return f"every:{name}:{now}"  # every tick is a key of its own


def answer_period_key(name: str, seconds: float, now: float) -> str:
    return f"every:{name}:{math.floor(now / seconds) * seconds}"


def wrong_period_key_no_name(name: str, seconds: float, now: float) -> str:
    return f"every:{math.floor(now / seconds) * seconds}"


def wrong_period_key_rounded(name: str, seconds: float, now: float) -> str:
    return f"every:{name}:{round(now / seconds) * seconds}"


def wrong_period_key_no_period(name: str, seconds: float, now: float) -> str:
    return f"every:{name}"


def race(period_key: PeriodKey, folder: str | Path | None = None) -> list[tuple[str, float, str, int | None]]:
    """The race: returns every tick as (schedule, time, key, new job id or None). Raises
    what the learner's function raised (the first such error), or TypeError for a key
    that is not text."""
    ticks: list[tuple[str, float, str, int | None]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    gate = threading.Barrier(SCHEDULERS)
    with tempfile.TemporaryDirectory(prefix="nb16_") as scratch:
        path = Path(folder or scratch) / "period_key.db"
        JobQueue(path, wake=False).close()

        def scheduler(index: int) -> None:
            rng = random.Random(150 + index)
            clock = FakeClock(FIRST_PERIOD)
            with JobQueue(path, clock=clock, wake=False) as q:
                for period in range(PERIODS):
                    gate.wait()  # all schedulers tick in the same period at the same time
                    if period in DOWN or errors:
                        continue
                    moments = sorted(rng.uniform(0, SECONDS) for _ in range(TICKS_PER_PERIOD))
                    for offset, name in ((o, n) for o in moments for n in SCHEDULES):
                        clock.now = FIRST_PERIOD + period * SECONDS + offset
                        try:
                            key = period_key(name, SECONDS, clock.now)
                            if not isinstance(key, str):
                                raise TypeError(f"it returned {key!r}, not a string")
                            job_id = q.enqueue(name, None, dedupe_key=key)
                        except Exception as exc:  # the others still pass every barrier
                            errors.append(exc)
                            break
                        with lock:
                            ticks.append((name, clock.now, key, job_id))

        def guarded(index: int) -> None:
            try:
                scheduler(index)
            except threading.BrokenBarrierError:
                pass
            except BaseException as exc:
                errors.append(exc)
                gate.abort()

        threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(SCHEDULERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return ticks


def check_period_key(period_key: object) -> Verdict:
    """Passes when `period_key(name, seconds, now)` gives every tick of one schedule in one
    period the same key, and a different key to any other period or schedule."""
    if not callable(period_key):
        return not_yet(f"period_key must be a function period_key(name, seconds, now), got {period_key!r}")
    try:
        ticks = race(period_key)
    except Exception as exc:
        return not_yet(f"period_key raised {type(exc).__name__}: {exc}")
    for name in SCHEDULES:
        for period in range(PERIODS):
            if period in DOWN:
                continue
            start = FIRST_PERIOD + period * SECONDS
            mine = [t for t in ticks if t[0] == name and period_start(t[1], SECONDS) == start]
            created = [t for t in mine if t[3] is not None]
            where = f"{name!r}, period starting at t={start:g}"
            if len(created) > 1:
                keys = sorted({t[2] for t in created})
                shown = ", ".join(repr(k) for k in keys[:3]) + (" ..." if len(keys) > 3 else "")
                return not_yet(
                    f"{where}: {len(created)} jobs from {len(mine)} ticks, under the keys {shown}. "
                    "Every tick in one period must make the same key."
                )
            if not created:
                key = mine[0][2]
                return not_yet(
                    f"{where}: no job at all. Its ticks made the key {key!r}, which an earlier "
                    "period or the other schedule had already used."
                )
    ran = PERIODS - len(DOWN)
    return passed(
        f"{len(ticks)} ticks from {SCHEDULERS} racing schedulers made exactly one job per schedule "
        f"in each of the {ran} periods they were up, and none in the {len(DOWN)} periods they were down: "
        "the period's start is the key."
    )


CHECKERS = {"period_key": check_period_key}
STARTERS = {"period_key": {"period_key": starter_period_key}}
ANSWERS = {"period_key": {"period_key": answer_period_key}}
WRONG = {
    "period_key": [
        {"period_key": wrong_period_key_no_name},
        {"period_key": wrong_period_key_rounded},
        {"period_key": wrong_period_key_no_period},
    ]
}

starting_points(__name__)
