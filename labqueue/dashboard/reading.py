"""What each page reads, in one read-only transaction (Queue.read_only()), through the
queue's own API. Each function returns plain data; views.py renders it after the
transaction has ended, so no transaction stays open while a page is written out.

A page's query string is checked here (Filters.parse): a bad state, a bad id or an empty
name is a Refused with a one-line reason, shown as a 400 page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ..core import JobRecord
from ..errors import InvalidArgument
from ..validate import STATES

PAGE_SIZE = 50
RUNNING_LIMIT = 500
# The chart: the last hour, a bar a minute.
CHART_SECONDS, CHART_STEP = 3600.0, 60.0
CHART_STEPS = int(CHART_SECONDS // CHART_STEP)


class Refused(InvalidArgument):
    """A query string or form the dashboard does not accept (a 400 page)."""


@dataclass(frozen=True)
class Filters:
    """The jobs list's query: state, queue and kind (None: any), and the id to page below."""

    state: str | None = None
    queue: str | None = None
    kind: str | None = None
    before: int | None = None

    @classmethod
    def parse(cls, query: str, *, state: str | None = None) -> Filters:
        fields = {key: values[-1] for key, values in parse_qs(query, keep_blank_values=True).items()}
        chosen = state or fields.get("state") or None
        if chosen is not None and chosen not in STATES:
            raise Refused(f"no such state {chosen!r}: one of {', '.join(STATES)}")
        before = fields.get("before") or None
        if before is not None and not (before.isascii() and before.isdigit() and len(before) < 19):
            raise Refused(f"before must be a job id, got {before!r}")
        return cls(chosen, fields.get("queue") or None, fields.get("kind") or None, before and int(before))

    def query(self, **changes: Any) -> dict[str, Any]:
        """These filters (with `changes`) as query parameters, the empty ones left out."""
        chosen = {"state": self.state, "queue": self.queue, "kind": self.kind, "before": self.before}
        chosen.update(changes)
        return {key: value for key, value in chosen.items() if value is not None}


@dataclass
class Overview:
    now: float
    stats: dict[str, Any]
    queues: dict[str, dict[str, Any]]  # per named queue: every column of the overview's table
    paused: dict[str, dict[str, Any]]
    throughput: dict[str, list[int]]  # per final state, summed over the queues, oldest step first
    waiting_on_keys: dict[str, int]  # ready jobs held back by a full concurrency key, per key, most first


@dataclass
class Listing:
    now: float
    filters: Filters
    jobs: list[JobRecord]
    older: int | None  # the `before` of the next page, None on the last page


@dataclass
class OneJob:
    now: float
    job: JobRecord | None


def overview(q: Any) -> Overview:
    from .chart import summed

    with q.read_only():
        now = q.server_time()
        stats = q.stats()
        per_queue = q.queue_stats()
        totals = q.queue_totals()
        paused = q.paused()
        finished = q.throughput(CHART_SECONDS, CHART_STEP)
        waiting = q.waiting_on_keys()
    names = sorted({*per_queue, *totals, *paused, *finished})
    queues = {}
    for name in names:
        live = per_queue.get(name, {})
        queues[name] = {
            "queued": live.get("queued", 0),
            "ready_now": live.get("ready_now", 0),
            "running": live.get("running", 0),
            "scheduled": totals.get(name, {}).get("scheduled", 0),
            "dead": totals.get(name, {}).get("dead", 0),
            "oldest_ready_age_s": live.get("oldest_ready_age_s", 0.0),
            "finished_last_minute": sum(counts[-1] for counts in finished.get(name, {}).values()),
        }
    return Overview(now, stats, queues, paused, summed(finished, CHART_STEPS), waiting)


def listing(q: Any, filters: Filters) -> Listing:
    """A page of jobs, newest first, below filters.before: one more row than shown is read,
    to know whether an older page exists."""
    with q.read_only():
        now = q.server_time()
        rows = q.latest_jobs(
            state=filters.state,
            kind=filters.kind,
            queue=filters.queue,
            before=filters.before,
            limit=PAGE_SIZE + 1,
        )
    older = rows[PAGE_SIZE - 1].id if len(rows) > PAGE_SIZE else None
    return Listing(now, filters, rows[:PAGE_SIZE], older)


def running(q: Any) -> Listing:
    """The running jobs (at most RUNNING_LIMIT, oldest lease first by id)."""
    with q.read_only():
        now = q.server_time()
        rows = q.jobs(state="running", limit=RUNNING_LIMIT)
    return Listing(now, Filters(state="running"), rows, None)


def one_job(q: Any, job_id: int) -> OneJob:
    with q.read_only():
        return OneJob(q.server_time(), q.job(job_id))
