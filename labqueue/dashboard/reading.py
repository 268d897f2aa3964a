"""What each page reads, through the queue's own API, in short read-only transactions
(Queue.read_only()) that each end within READ_TIMEOUT: a reader that held its snapshot
long would keep SQLite's WAL from being reset and PostgreSQL's cleanup (its xmin) from
moving on. A jobs page is one such transaction; the overview is several, one per figure,
each read through an index (the live rows', the dead rows', the primary key), and its
throughput chart counts the jobs among the newest CHART_ROWS ids only (a range of the
primary key: there is no index on finished_at). Each function returns plain data;
views.py renders it after the transactions have ended.

A page's query string is checked here (Filters.parse): a bad state, a bad id or an empty
name is a Refused with a one-line reason, shown as a 400 page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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
# The chart reads at most this many rows: the jobs among the newest CHART_ROWS ids.
CHART_ROWS = 50_000
# How long one read may take before it is stopped (the page then says so: a 503).
READ_TIMEOUT = 1.0
# Open tabs refresh the overview every views.REFRESH_SECONDS; within this many seconds they
# share one reading of it, so sixteen tabs cost the database what one does.
OVERVIEW_MAX_AGE = 5.0


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
    chart_after_id: int = 0  # the chart counts jobs with a larger id only (0: every job)


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


def short_read(q: Any, read: Callable[[], Any]) -> Any:
    """read() in a read-only transaction of its own, stopped after READ_TIMEOUT."""
    with q.read_only(timeout=READ_TIMEOUT):
        return read()


def overview(q: Any) -> Overview:
    """The overview's figures, each in a short transaction of its own (so they may be a few
    milliseconds apart: each is what the queue held when it was read)."""
    from .chart import summed

    now = short_read(q, q.server_time)
    per_queue = short_read(q, q.queue_stats)
    totals = short_read(q, q.queue_totals)
    stats = summed_stats(per_queue, totals)  # what q.stats() says, without reading the live rows again
    paused = short_read(q, q.paused)
    waiting = short_read(q, q.waiting_on_keys)
    newest = short_read(q, lambda: q.latest_jobs(limit=1))
    after = max(newest[0].id - CHART_ROWS, 0) if newest else 0
    finished = short_read(q, lambda: q.throughput(CHART_SECONDS, CHART_STEP, after_id=after))
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
    return Overview(now, stats, queues, paused, summed(finished, CHART_STEPS), waiting, after)


def summed_stats(per_queue: dict[str, dict[str, Any]], totals: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Queue.stats() from queue_stats() and queue_totals(), which read the same rows."""
    live = per_queue.values()
    return {
        "queued": sum(row["queued"] for row in live),
        "running": sum(row["running"] for row in live),
        "ready_now": sum(row["ready_now"] for row in live),
        "oldest_ready_age_s": max((row["oldest_ready_age_s"] for row in live), default=0.0),
        "dead": sum(row["dead"] for row in totals.values()),
    }


class Shared:
    """One reading shared by the requests that ask within `max_age` seconds of it: the
    first reads while the others wait for it (one read at a time, however many tabs)."""

    def __init__(
        self, max_age: float = OVERVIEW_MAX_AGE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_age, self.clock = max_age, clock
        self._lock = threading.Lock()
        self._value: Any = None
        self._at = -float("inf")

    def get(self, read: Callable[[], Any]) -> Any:
        with self._lock:
            if self.clock() - self._at >= self.max_age:
                self._value = read()  # a failed read raises and leaves nothing cached
                self._at = self.clock()
            return self._value


def listing(q: Any, filters: Filters) -> Listing:
    """A page of jobs, newest first, below filters.before: one more row than shown is read,
    to know whether an older page exists."""
    with q.read_only(timeout=READ_TIMEOUT):
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
    with q.read_only(timeout=READ_TIMEOUT):
        now = q.server_time()
        rows = q.jobs(state="running", limit=RUNNING_LIMIT)
    return Listing(now, Filters(state="running"), rows, None)


def one_job(q: Any, job_id: int) -> OneJob:
    with q.read_only(timeout=READ_TIMEOUT):
        return OneJob(q.server_time(), q.job(job_id))
