"""Is the queue healthy? One answer and one line of why, for a probe.

``labqueue health DB`` exits 0 when the queue opens and answers and every threshold
given holds, 1 otherwise, so a container HEALTHCHECK, a Kubernetes exec probe or a
cron job can use it as is. The thresholds are the numbers that say work is not getting
done: how long the oldest ready job has waited (no worker is taking jobs, or too few), how
long any queued job has waited since it was created, whatever the reason (a kind no running
worker handles, which every worker gives back, hidden most of the time; a paused queue, or
one no worker serves; retries), and how many jobs are dead (something fails for good).
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
    max_waiting: float | None = None,
    longest_waiting: tuple[int, float] | None = None,
) -> Health:
    """Health from a queue's stats(), its longest_waiting() (the job id and how long it has
    waited; None: nothing queued) and the thresholds (None: not checked)."""
    age, dead = float(stats["oldest_ready_age_s"]), int(stats["dead"])
    summary = (
        f"{stats['ready_now']} ready, the oldest waiting {age:g} s; {stats['running']} running; {dead} dead"
    )
    if max_waiting is not None and longest_waiting is not None:
        summary += f"; job {longest_waiting[0]} queued longest, {longest_waiting[1]:g} s"
    problems = []
    if max_oldest_ready is not None and age > max_oldest_ready:
        problems.append(
            f"the oldest ready job has waited {age:g} s, "
            f"over --max-oldest-ready {format_duration(max_oldest_ready)}"
        )
    if max_waiting is not None and longest_waiting is not None and longest_waiting[1] > max_waiting:
        job_id, waited = longest_waiting
        problems.append(
            f"job {job_id} has waited {waited:g} s since it was created, over --max-waiting "
            f"{format_duration(max_waiting)} ('labqueue job DB {job_id}' shows why)"
        )
    if max_dead is not None and dead > max_dead:
        problems.append(f"{dead} dead job(s), over --max-dead {max_dead}")
    if problems:
        return Health(False, "; ".join(problems))
    return Health(True, summary)
