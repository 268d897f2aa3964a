"""Is the queue healthy? One answer and one line of why, for a probe.

``labqueue health DB`` exits 0 when the queue opens and answers and every threshold
given holds, 1 otherwise, so a container HEALTHCHECK, a Kubernetes exec probe or a
cron job can use it as is. The thresholds are the two numbers that say work is not
getting done: how long the oldest ready job has waited (no worker is taking jobs, or
too few) and how many jobs are dead (something fails for good).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .durations import format_duration


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str

    @property
    def line(self) -> str:
        return f"{'healthy' if self.healthy else 'unhealthy'}: {self.reason}"


def judge(
    stats: Mapping[str, float | int],
    *,
    max_oldest_ready: float | None = None,
    max_dead: int | None = None,
) -> Health:
    """Health from a queue's stats() and the thresholds (None: not checked)."""
    age, dead = float(stats["oldest_ready_age_s"]), int(stats["dead"])
    summary = (
        f"{stats['ready_now']} ready, the oldest waiting {age:g} s; {stats['running']} running; {dead} dead"
    )
    problems = []
    if max_oldest_ready is not None and age > max_oldest_ready:
        problems.append(
            f"the oldest ready job has waited {age:g} s, "
            f"over --max-oldest-ready {format_duration(max_oldest_ready)}"
        )
    if max_dead is not None and dead > max_dead:
        problems.append(f"{dead} dead job(s), over --max-dead {max_dead}")
    if problems:
        return Health(False, "; ".join(problems))
    return Health(True, summary)
