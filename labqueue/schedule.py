"""Periodic jobs: "run `report` every 60 seconds", exactly once per period.

A schedule does not keep state of its own. Each period (the clock's multiples of
`seconds`) has one dedupe key, "every:<name>:<period start>", and JobQueue.every()
enqueues the period's job under it, so any number of schedulers (every worker of a
pool, on any number of hosts sharing the database) may tick at once: the first
INSERT wins and the rest change nothing. A crashed scheduler loses nothing either: the
next tick of any other does the same.

Missed periods are skipped. After downtime the period in progress gets its job at the
first tick; the periods that passed meanwhile get none (a report of the last hour is
wanted once, not twelve times). A job that outlives its period does not stop the next
period's job: periods are about starting, not about running alone.

The key is unique for as long as the job's row exists: purge() with an `older_than`
shorter than the period could remove the period's job while the period lasts, and the
next tick would enqueue it again. Keep retention longer than the longest period.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from . import validate
from .durations import parse_duration
from .errors import InvalidArgument
from .queue import period_start

__all__ = ["Every", "Scheduler", "parse_every"]


class _Ticks(Protocol):
    def every(self, kind: str, seconds: float, payload: Any = None, **options: Any) -> int | None: ...


@dataclass(frozen=True)
class Every:
    """Enqueue a `kind` job once every `seconds` (periods aligned to the clock)."""

    kind: str
    seconds: float
    payload: Any = None
    name: str | None = None
    priority: int = 0
    queue: str = validate.DEFAULT_QUEUE

    def __post_init__(self) -> None:
        validate.kind(self.kind)
        validate.seconds("seconds", self.seconds)
        if self.name is not None:
            validate.text("name", self.name)
        validate.priority(self.priority)
        validate.queue_name(self.queue)

    @property
    def label(self) -> str:
        """The schedule's name, or its kind when it has none: how a Scheduler tells schedules apart."""
        return self.kind if self.name is None else self.name

    def tick(self, q: _Ticks) -> int | None:
        """Enqueue this period's job unless it exists; its id, or None."""
        return q.every(
            self.kind, self.seconds, self.payload, name=self.name, priority=self.priority, queue=self.queue
        )


class Scheduler:
    """A worker's schedules, each ticked once per period it sees (JobQueue.every is the
    fence; this only saves the writes a period's second tick would cost)."""

    def __init__(self, schedules: Iterable[Every]) -> None:
        self.schedules = list(schedules)
        labels = [s.label for s in self.schedules]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise InvalidArgument(f"two schedules share the name {repeated[0]!r}: give one a name=")
        self._ticked: dict[str, float] = {}

    def tick(self, q: _Ticks, now: float) -> list[int]:
        """Tick every schedule whose period at `now` has not been ticked yet; the new jobs' ids."""
        created = []
        for schedule in self.schedules:
            start = period_start(now, schedule.seconds)
            if self._ticked.get(schedule.label) != start:
                job_id = schedule.tick(q)
                self._ticked[schedule.label] = start
                if job_id is not None:
                    created.append(job_id)
        return created

    def next_tick(self, now: float) -> float:
        """Seconds from `now` until the next period of any schedule begins (inf: none)."""
        if not self.schedules:
            return math.inf
        return min(period_start(now, s.seconds) + s.seconds - now for s in self.schedules)


def parse_every(text: str) -> Every:
    """`--every report=60` (or report=1h): a kind and its period, a duration above zero."""
    kind, equals, seconds = text.partition("=")
    if not equals or not kind:
        raise InvalidArgument(f"--every needs KIND=DURATION, got {text!r}")
    try:
        period = parse_duration(seconds, allow_zero=False)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--every {kind}: the period: {exc}") from None
    return Every(kind, period)
