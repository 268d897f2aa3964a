"""A model-checked queue: hypothesis drives JobQueue and a small pure-Python model of it,
on the same fake clock, through random sequences of every operation (priorities, named
queues, cancellation, periodic ticks and purges included), and after each step the two
must agree on every job and the queue's invariants must hold.

The same machine runs on PostgreSQL (PgJobQueue, with the clock injected): only how
the queue is opened and how the ledger row is written differ."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from labqueue import FakeClock, Job, JobQueue
from labqueue.drivers.sqlite.sql import LAST_ATTEMPT_EXPIRED
from labqueue.errors import CannotCancel, JobNotFound
from labqueue.lab.demo_handlers import LEDGER_TABLE, ledger_effect
from labqueue.queue import MAX_ERROR_CHARS, period_key, period_start

LEASE = 30.0
BACKOFF_CAP = 60.0
BACKOFF_BASE = 2.0
MAX_ATTEMPTS = 3
CLOCK_STEPS = [0.0, 0.5, 1.0, 10.0, LEASE - 0.5, LEASE, LEASE + 0.5, 2 * LEASE, 600.0, -5.0, -LEASE]


@dataclass
class ModelJob:
    kind: str
    max_attempts: int
    visible_at: float
    dedupe_key: str | None
    created_at: float
    priority: int = 0
    queue: str = "default"
    state: str = "queued"
    attempts: int = 0
    lease_token: str | None = None
    worker: str | None = None
    last_error: str | None = None
    finished_at: float | None = None
    effects: list[int] = field(default_factory=list)  # the attempt of each ledger row


class QueueModel:
    """What the queue should do, written as plainly as possible."""

    def __init__(self) -> None:
        self.jobs: dict[int, ModelJob] = {}
        self.last_id = 0  # ids are never handed out twice, even after a purge

    def enqueue(self, kind, now, delay, max_attempts, dedupe_key, priority=0, queue="default") -> int | None:
        if dedupe_key is not None and any(j.dedupe_key == dedupe_key for j in self.jobs.values()):
            return None
        self.last_id += 1
        self.jobs[self.last_id] = ModelJob(kind, max_attempts, now + delay, dedupe_key, now, priority, queue)
        return self.last_id

    def ready(self, now: float, queues: list[str] | None = None) -> list[int]:
        live = [
            i
            for i, j in self.jobs.items()
            if j.state in ("queued", "running")
            and j.visible_at <= now
            and (queues is None or j.queue in queues)
        ]
        return sorted(live, key=lambda i: (-self.jobs[i].priority, self.jobs[i].visible_at, i))

    def cancel(self, job_id: int, now: float) -> str:
        job = self.jobs.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        if job.state not in ("queued", "running"):
            raise CannotCancel(job_id)
        was = job.state
        job.state, job.finished_at, job.lease_token = "cancelled", now, None
        return was

    def purgeable(self, now: float, older_than: float, states: tuple[str, ...]) -> set[int]:
        """What a purge may remove: finished in one of `states` at least `older_than` ago,
        and not the newest row."""
        newest = max(self.jobs, default=0)
        return {
            i
            for i, j in self.jobs.items()
            if j.state in states
            and j.finished_at is not None
            and j.finished_at <= now - older_than
            and i != newest
        }

    def claim(self, now: float, worker: str, limit: int, queues: list[str] | None = None) -> list[int]:
        for job in self.jobs.values():  # a last lease that ran out retires the job
            if job.state == "running" and job.attempts >= job.max_attempts and job.visible_at <= now:
                job.state, job.lease_token, job.finished_at = "dead", None, now
                previous = job.last_error
                job.last_error = LAST_ATTEMPT_EXPIRED + (
                    "" if previous is None else f"; previous error: {previous}"
                )
        return self.ready(now, queues)[:limit]

    def lease(self, ids: list[int], now: float, worker: str, token: str) -> None:
        for i in ids:
            job = self.jobs[i]
            job.state, job.attempts, job.visible_at = "running", job.attempts + 1, now + LEASE
            job.lease_token, job.worker = token, worker

    def holds(self, handle: Job) -> bool:
        job = self.jobs.get(handle.id)  # None once purged
        return job is not None and job.state == "running" and job.lease_token == handle.lease_token

    def complete(self, handle: Job, now: float, effect: bool) -> bool:
        if not self.holds(handle):
            return False
        job = self.jobs[handle.id]
        job.state, job.finished_at, job.lease_token = "done", now, None
        if effect:
            job.effects.append(handle.attempts)
        return True

    def fail(self, handle: Job, now: float, error: str, retry: bool, jitter: float) -> str | None:
        if not self.holds(handle):
            return None
        job = self.jobs[handle.id]
        if not retry or job.attempts >= job.max_attempts:
            job.state, job.finished_at = "dead", now
        else:
            ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (handle.attempts - 1))
            job.state, job.finished_at, job.visible_at = "queued", None, now + jitter * ceiling
        job.lease_token, job.last_error = None, error[:MAX_ERROR_CHARS]
        return job.state

    def heartbeat(self, handle: Job, now: float) -> bool:
        if not self.holds(handle):
            return False
        self.jobs[handle.id].visible_at = now + LEASE
        return True

    def requeue_dead(self, ids: list[int] | None, now: float) -> list[int]:
        chosen = [i for i, j in self.jobs.items() if j.state == "dead" and (ids is None or i in ids)]
        for i in chosen:
            job = self.jobs[i]
            job.state, job.attempts, job.visible_at, job.finished_at = "queued", 0, now, None
        return sorted(chosen)


class QueueMachine(RuleBasedStateMachine):
    """Every rule does one thing to both the queue and the model and compares the answers."""

    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(1000.0)
        self.jitter = 0.5
        self.q = self.open_queue(
            lease_seconds=LEASE,
            backoff_cap=BACKOFF_CAP,
            backoff_base=BACKOFF_BASE,
            max_attempts=MAX_ATTEMPTS,
            clock=self.clock,
            rng=lambda: self.jitter,
        )
        self.q.db.execute(LEDGER_TABLE)
        self.model = QueueModel()
        self.ever_done: set[int] = set()
        self.tokens_seen: set[str] = set()
        self.purged: dict[int, ModelJob] = {}
        self.clock_went_back = False  # purges may then stop early (ids no longer follow created_at)

    def open_queue(self, **settings) -> JobQueue:
        self.folder = Path(tempfile.mkdtemp(prefix="labqueue-model-"))
        return JobQueue(self.folder / "jobs.db", **settings)

    def ledger_effect(self, handle: Job):
        return ledger_effect(handle)

    def teardown(self) -> None:
        self.q.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    @initialize()
    def a_first_job(self) -> None:
        self.enqueue(delay=0.0, max_attempts=None, dedupe_key=None)

    # -- producing -------------------------------------------------------------------

    @rule(
        delay=st.sampled_from([0.0, 0.0, 5.0, LEASE, 100.0]),
        max_attempts=st.sampled_from([None, None, 1, 2]),
        dedupe_key=st.sampled_from([None, None, "signup-ada", "signup-bob"]),
        priority=st.sampled_from([0, 0, 5, -1]),
        queue=st.sampled_from(["default", "default", "mail"]),
    )
    def enqueue(
        self,
        delay: float,
        max_attempts: int | None,
        dedupe_key: str | None,
        priority: int = 0,
        queue: str = "default",
    ) -> None:
        got = self.q.enqueue(
            "credit",
            {},
            delay=delay,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            priority=priority,
            queue=queue,
        )
        attempts = MAX_ATTEMPTS if max_attempts is None else max_attempts
        assert got == self.model.enqueue(
            "credit", self.clock.now, delay, attempts, dedupe_key, priority, queue
        )

    @rule()
    def every(self) -> None:
        """A periodic schedule's tick: one job per minute, by its dedupe key."""
        key = period_key("report", period_start(self.clock.now, 60.0))
        got = self.q.every("report", 60)
        assert got == self.model.enqueue("report", self.clock.now, 0.0, MAX_ATTEMPTS, key)

    @rule(n=st.integers(1, 3))
    def enqueue_many(self, n: int) -> None:
        assert self.q.enqueue_many("credit", [{}] * n) == n
        for _ in range(n):
            self.model.enqueue("credit", self.clock.now, 0.0, MAX_ATTEMPTS, None)

    # -- consuming -------------------------------------------------------------------

    @rule(
        target=handles,
        worker=st.sampled_from(["w1", "w2", "w3"]),
        limit=st.integers(1, 3),
        queues=st.sampled_from(
            [None, None, ["mail"], ["default", "mail"], ["other"], ["mail", "other"], ["default"]]
        ),
    )
    def claim(self, worker: str, limit: int, queues: list[str] | None):
        expected = self.model.claim(self.clock.now, worker, limit, queues)
        jobs = self.q.claim(worker, limit=limit, queues=queues)
        assert [j.id for j in jobs] == sorted(expected)
        if jobs:
            token = jobs[0].lease_token
            assert all(j.lease_token == token for j in jobs), "a batch shares one token"
            assert token not in self.tokens_seen, "every claim issues a fresh token"
            self.tokens_seen.add(token)
            self.model.lease(expected, self.clock.now, worker, token)
            for job in jobs:
                assert (job.attempts, job.lease_expires_at) == (
                    self.model.jobs[job.id].attempts,
                    self.clock.now + LEASE,
                )
        return multiple(*jobs)

    @rule(handle=handles, effect=st.booleans())
    def complete(self, handle: Job, effect: bool) -> None:
        expected = self.model.complete(handle, self.clock.now, effect)
        assert self.q.complete(handle, effect=self.ledger_effect(handle) if effect else None) is expected

    @rule(handle=handles, retry=st.booleans(), jitter=st.sampled_from([0.0, 0.25, 1.0]))
    def fail(self, handle: Job, retry: bool, jitter: float) -> None:
        self.jitter = jitter
        error = f"attempt {handle.attempts} failed"
        expected = self.model.fail(handle, self.clock.now, error, retry, jitter)
        assert self.q.fail(handle, error, retry=retry) == expected

    @rule(handle=handles)
    def heartbeat(self, handle: Job) -> None:
        assert self.q.heartbeat(handle) is self.model.heartbeat(handle, self.clock.now)

    # -- time and operations -------------------------------------------------------------

    @rule(job_id=st.integers(1, 12))
    def cancel(self, job_id: int) -> None:
        try:
            expected = self.model.cancel(job_id, self.clock.now)
        except (JobNotFound, CannotCancel) as refusal:
            with pytest.raises(type(refusal)):
                self.q.cancel(job_id)
        else:
            assert self.q.cancel(job_id) == expected

    @rule(
        older_than=st.sampled_from([0.0, LEASE, 600.0]),
        states=st.sampled_from([("done",), ("done", "dead", "cancelled")]),
        batch=st.sampled_from([1, 2, 5]),
    )
    def purge(self, older_than: float, states: tuple[str, ...], batch: int) -> None:
        allowed = self.model.purgeable(self.clock.now, older_than, states)
        before = {r[0] for r in self.q.db.execute("SELECT id FROM jobs")}
        result = self.q.purge(older_than, states=states, batch=batch)
        removed = before - {r[0] for r in self.q.db.execute("SELECT id FROM jobs")}
        assert result.removed == len(removed)
        assert removed <= allowed, "a purge removed a job it must keep"
        if not self.clock_went_back:  # ids follow created_at: the walk reaches every old job
            assert removed == allowed
        for job_id in removed:  # gone from the table; what its effect wrote stays
            self.purged[job_id] = self.model.jobs.pop(job_id)
        self.ever_done -= removed

    @rule(step=st.sampled_from(CLOCK_STEPS))
    def move_clock(self, step: float) -> None:
        self.clock.advance(step)
        self.clock_went_back |= step < 0

    @rule(pick=st.one_of(st.none(), st.lists(st.integers(1, 12), max_size=4)))
    def requeue_dead(self, pick: list[int] | None) -> None:
        expected = self.model.requeue_dead(pick, self.clock.now)
        assert self.q.requeue_dead(pick) == expected

    @precondition(lambda self: self.model.jobs)
    @rule()
    def stats_agree(self) -> None:
        now, jobs = self.clock.now, self.model.jobs.values()
        stats = self.q.stats()
        assert stats["queued"] == sum(j.state == "queued" for j in jobs)
        assert stats["running"] == sum(j.state == "running" for j in jobs)
        assert stats["dead"] == sum(j.state == "dead" for j in jobs)
        assert stats["ready_now"] == len(self.model.ready(now))

    # -- after every step ---------------------------------------------------------------

    @invariant()
    def every_job_agrees_with_the_model(self) -> None:
        rows = self.q.db.execute(
            "SELECT id, state, attempts, max_attempts, visible_at, lease_token, worker, last_error,"
            " finished_at, dedupe_key, priority, queue FROM jobs ORDER BY id"
        ).fetchall()
        assert [r[0] for r in rows] == sorted(self.model.jobs)
        for row in rows:
            job = self.model.jobs[row[0]]
            got = tuple(row)[1:]
            want = (
                job.state,
                job.attempts,
                job.max_attempts,
                job.visible_at,
                job.lease_token,
                job.worker,
                job.last_error,
                job.finished_at,
                job.dedupe_key,
                job.priority,
                job.queue,
            )
            assert got == want, f"job {row[0]}: queue {got} != model {want}"

    @invariant()
    def the_same_jobs_are_visible(self) -> None:
        now = self.clock.now
        # Written apart from the queue's SQL: not finished, and due by now, earliest first.
        rows = self.q.db.execute("SELECT id, visible_at, state, priority FROM jobs").fetchall()
        due = [
            (-p, at, i)
            for i, at, state, p in rows
            if at <= now and state not in ("done", "dead", "cancelled")
        ]
        assert [i for *_, i in sorted(due)] == self.model.ready(now)

    @invariant()
    def the_queue_invariants_hold(self) -> None:
        db = self.q.db

        def ids_where(condition: str) -> list[int]:
            return [r[0] for r in db.execute(f"SELECT id FROM jobs WHERE {condition} ORDER BY id")]

        # One live token per job: running exactly when a token is held.
        assert ids_where("(state = 'running') != (lease_token IS NOT NULL)") == []
        # No job is ever claimed past its max_attempts.
        assert ids_where("attempts > max_attempts") == []
        # Done is final, and its effect, if any, was applied once, by its last attempt.
        done = set(ids_where("state = 'done'"))
        assert self.ever_done <= done
        self.ever_done |= done
        ledger: dict[int, list[int]] = {}
        for job_id, attempt in db.execute("SELECT job_id, attempt FROM ledger"):
            ledger.setdefault(job_id, []).append(attempt)
        assert set(ledger) <= done | set(self.purged)
        for job_id, attempts in ledger.items():
            job = self.model.jobs.get(job_id) or self.purged[job_id]
            assert attempts == job.effects
            assert attempts == [job.attempts]


class PostgresQueueMachine(QueueMachine):
    """The same rules on PgJobQueue: one schema for the whole run, emptied for each example."""

    url = ""  # set by the postgres_model fixture
    schema = ""

    def open_queue(self, **settings):
        from labqueue.postgres import PgJobQueue

        q = PgJobQueue(self.url, schema=self.schema, **settings)
        q.db.execute("DROP TABLE IF EXISTS ledger")
        q.db.execute(
            "TRUNCATE jobs, jobs_archive RESTART IDENTITY"
        )  # ids start at 1 again, as the model's do
        return q

    def ledger_effect(self, handle: Job):
        entry = (handle.id, handle.attempts)

        def effect(db) -> None:
            db.execute(LEDGER_TABLE)
            db.execute("INSERT INTO ledger (job_id, attempt) VALUES (%s, %s)", entry)

        return effect

    def teardown(self) -> None:
        self.q.close()


@pytest.fixture
def postgres_model(pg_url) -> Iterator[None]:
    from labqueue.postgres import drop_schema

    PostgresQueueMachine.url = pg_url
    PostgresQueueMachine.schema = f"model_{uuid.uuid4().hex[:12]}"
    yield
    drop_schema(pg_url, PostgresQueueMachine.schema)


TestQueueModel = pytest.mark.slow(QueueMachine.TestCase)
TestQueueModel.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Fewer examples than on SQLite: every step is a round trip to the server. The rules are
# the same, so SQLite's 300 examples already explore the model; these check the dialect.
TestQueueModelOnPostgres = pytest.mark.usefixtures("postgres_model")(
    pytest.mark.slow(PostgresQueueMachine.TestCase)
)
TestQueueModelOnPostgres.settings = settings(
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
