"""Notebook 16's exercise: write the dedupe key that makes a schedule run once per period.

``check_period_key`` races four scheduler threads, each with its own connection to one queue
file and its own fake clock, against your ``period_key(name, seconds, now)``. Two schedules
("report" every 60 s and "cleanup" every 90 s) tick twice per scheduler in each of ten
minutes, at scattered moments, except for three minutes when every scheduler is down. Each
tick enqueues with ``dedupe_key=period_key(...)``. It passes when every period of each
schedule that had a tick got exactly one job. A wrong key is then probed directly, so the
message names its mistake: a fixed period length, rounding to the nearest period, a key per
tick, or a key shared between periods or schedules.
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
Tick = tuple[str, float, str, int | None]  # schedule, time, key, new job id or None

SCHEDULERS = 4
SCHEDULES = {"report": 60.0, "cleanup": 90.0}  # name: seconds; two lengths, so a fixed one shows
ROUND = 60.0  # the schedulers tick in rounds of a minute, all in the same minute at once
FIRST_ROUND = 5400.0  # a multiple of both schedules' periods
ROUNDS = 10
DOWN = (4, 5, 6)  # rounds in which every scheduler is down
TICKS_PER_ROUND = 2


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


def wrong_period_key_fixed_minute(name: str, seconds: float, now: float) -> str:
    return f"every:{name}:{int(now) // 60}"  # a period index, but always of 60 s


def race(period_key: PeriodKey, folder: str | Path | None = None) -> list[Tick]:
    """The race: returns every tick as (schedule, time, key, new job id or None). Raises
    what the learner's function raised (the first such error), or TypeError for a key
    that is not text."""
    ticks: list[Tick] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    gate = threading.Barrier(SCHEDULERS)
    with tempfile.TemporaryDirectory(prefix="nb16_") as scratch:
        path = Path(folder or scratch) / "period_key.db"
        JobQueue(path, wake=False).close()

        def scheduler(index: int) -> None:
            rng = random.Random(150 + index)
            clock = FakeClock(FIRST_ROUND)
            with JobQueue(path, clock=clock, wake=False) as q:
                for minute in range(ROUNDS):
                    gate.wait()  # all schedulers tick in the same minute at the same time
                    if minute in DOWN or errors:
                        continue
                    moments = sorted(rng.uniform(0, ROUND) for _ in range(TICKS_PER_ROUND))
                    for offset, name in ((o, n) for o in moments for n in SCHEDULES):
                        clock.now = FIRST_ROUND + minute * ROUND + offset
                        try:
                            key = period_key(name, SCHEDULES[name], clock.now)
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


def _probe(period_key: PeriodKey, name: str, seconds: float, now: float) -> str | None:
    try:
        return period_key(name, seconds, now)
    except Exception:
        return None


def _ignores_seconds(period_key: PeriodKey, name: str) -> bool:
    """The same key for a 60 s and a 90 s period that start at different moments."""
    moments = (FIRST_ROUND + 60.0, FIRST_ROUND + 150.0, FIRST_ROUND + 250.0)
    return all(
        (a := _probe(period_key, name, 60.0, t)) is not None and a == _probe(period_key, name, 90.0, t)
        for t in moments
    )


def _rounds(period_key: PeriodKey, name: str, seconds: float, start: float) -> bool:
    """A moment late in the period gets the key of the next period's start."""
    late = _probe(period_key, name, seconds, start + 0.75 * seconds)
    return late is not None and late == _probe(period_key, name, seconds, start + seconds)


def _too_many(period_key: PeriodKey, name: str, start: float, mine: list[Tick], created: list[Tick]) -> str:
    seconds = SCHEDULES[name]
    keys = sorted({t[2] for t in created})
    shown = ", ".join(repr(k) for k in keys[:3]) + (" ..." if len(keys) > 3 else "")
    said = (
        f"{name!r} (every {seconds:g} s), period starting at t={start:g}: {len(created)} jobs from "
        f"{len(mine)} ticks, under the keys {shown}."
    )
    if _probe(period_key, name, seconds, start + 0.1 * seconds) != _probe(
        period_key, name, seconds, start + 0.2 * seconds
    ):
        return (
            f"{said} Your key changes from one moment to the next: every tick in one period must make "
            "the same key."
        )
    if _ignores_seconds(period_key, name):
        return (
            f"{said} Your key gives a 60 s and a 90 s schedule the same periods: its period length is "
            "fixed, so 'cleanup', every 90 s, gets a job every minute. The period must come from `seconds`."
        )
    if _rounds(period_key, name, seconds, start):
        return (
            f"{said} A tick late in the period made the key a tick in the next period makes: a moment "
            "belongs to the period it falls in, not to the nearest one."
        )
    return f"{said} Every tick in one period must make the same key."


def _none(name: str, start: float, mine: list[Tick], ticks: list[Tick]) -> str:
    key = mine[0][2]
    first = next(t for t in ticks if t[2] == key and t[3] is not None)
    where = f"{name!r} (every {SCHEDULES[name]:g} s), period starting at t={start:g}: no job at all."
    if first[0] != name:
        return (
            f"{where} Its ticks made the key {key!r}, which the other schedule, {first[0]!r}, took first: "
            "the key must name its schedule."
        )
    return (
        f"{where} Its ticks made the key {key!r}, which a tick at t={first[1]:g}, in an earlier period, "
        "took first: the key must change from one period to the next."
    )


def check_period_key(period_key: object) -> Verdict:
    """Passes when `period_key(name, seconds, now)` gives every tick of one schedule in one
    period the same key, and a different key to any other period or schedule."""
    if not callable(period_key):
        return not_yet(f"period_key must be a function period_key(name, seconds, now), got {period_key!r}")
    try:
        ticks = race(period_key)
    except Exception as exc:
        return not_yet(f"period_key raised {type(exc).__name__}: {exc}")
    ticks.sort(key=lambda t: t[1])
    periods = 0
    for name, seconds in SCHEDULES.items():
        for start in sorted({period_start(t[1], seconds) for t in ticks if t[0] == name}):
            mine = [t for t in ticks if t[0] == name and period_start(t[1], seconds) == start]
            created = [t for t in mine if t[3] is not None]
            if len(created) > 1:
                return not_yet(_too_many(period_key, name, start, mine, created))
            if not created:
                return not_yet(_none(name, start, mine, ticks))
            periods += 1
    return passed(
        f"{len(ticks)} ticks from {SCHEDULERS} racing schedulers made exactly one job in each of the "
        f"{periods} periods of the two schedules (60 s and 90 s) that had a tick, and none while all "
        "were down: one key per period and schedule."
    )


CHECKERS = {"period_key": check_period_key}
STARTERS = {"period_key": {"period_key": starter_period_key}}
ANSWERS = {"period_key": {"period_key": answer_period_key}}
WRONG = {
    "period_key": [
        {"period_key": wrong_period_key_no_name},
        {"period_key": wrong_period_key_rounded},
        {"period_key": wrong_period_key_no_period},
        {"period_key": wrong_period_key_fixed_minute},
    ]
}

starting_points(__name__)
