"""The end-to-end chaos run: real worker processes drain a shuffled mix of jobs while a
supervisor replaces the ones that die and, if asked, kills and freezes them at random.

    python -m labqueue.chaos                        # the course's 300-job run
    python -m labqueue.chaos --jobs 5000 --kill-every 0.5 --pause-every 2 --seed 7
    python -m labqueue.chaos --jobs 5000 --kill-every 0.5 --pause-every 2 --part2

Faults come on top of the poison and failing jobs: SIGKILL of a random worker at
random moments, and SIGSTOP of a random worker for longer than its lease, with SIGCONT
later (a zombie that wakes up and tries to finish a job it no longer holds). When the
queue has drained, the run checks its invariants, prints them, and exits 1 if any broke.
Worker lifetimes, faults and job finish times stay in the database (tables chaos_workers
and chaos_faults) for the timeline plot.

The queue is a new SQLite file (--db FILE), or PostgreSQL: --db postgresql://... names a
database, or --postgres starts a throwaway server listening on 127.0.0.1 and runs in a
fresh database there. The workers are separate processes that connect over TCP, as
workers on other machines would.

Part 2 of the course adds its own moving parts, each one opt-in (--part2 turns all on):
jobs spread over named queues with mixed priorities, which the workers take turns
between (--queues); the supervisor purging finished jobs into jobs_archive while the
workers run (--purge-every), and cancelling queued and running jobs at random
(--cancel-every); and a periodic schedule every worker ticks (--schedule-every). The
checks then read archived rows beside the live ones, expect every cancelled job to end
cancelled without an effect, and at most one scheduled job per period, each done.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil

from ..backends import open_queue
from ..demo.handlers import DEMO_HANDLERS, LEDGER_TABLE
from ..demo.scratch import db_path
from ..errors import CannotCancel, CannotOpen, InvalidArgument, QueueBusy
from ..pool import Worker, WorkerPool
from ..redaction import ArgumentParser, redact
from ..settings import WorkerSettings
from ..signals import StopEvent, stop_on
from .check import EXPECTED_STATE, TUTORIAL_MIX, Check, JobRow, check_run, figures
from .store import Location, Store, check_new, is_postgres

TICK = 0.05  # how often the supervisor looks at its workers, in seconds
# Times in these tables are seconds since chaos_run.started (a wall-clock time, like
# jobs.finished_at). DOUBLE PRECISION: a REAL is 4 bytes on PostgreSQL (8 on SQLite either way).
RECORD_TABLES = """
CREATE TABLE IF NOT EXISTS chaos_run (started DOUBLE PRECISION, elapsed DOUBLE PRECISION, settings TEXT);
CREATE TABLE IF NOT EXISTS chaos_workers (
    name TEXT PRIMARY KEY, slot INTEGER, pid INTEGER, started DOUBLE PRECISION, ended DOUBLE PRECISION,
    returncode INTEGER, fate TEXT
);
CREATE TABLE IF NOT EXISTS chaos_faults (
    at DOUBLE PRECISION, fault TEXT, worker TEXT, job_id INTEGER, until DOUBLE PRECISION
);
"""

HELD_JOBS = "SELECT id FROM jobs WHERE state = 'running' AND worker = ? ORDER BY id"
# The run's jobs: live rows and the ones a purge moved to jobs_archive (ids never repeat).
JOB_ROWS = """
SELECT id, kind, state, attempts, max_attempts, last_error, finished_at FROM jobs
UNION ALL
SELECT id, kind, state, attempts, max_attempts, last_error, finished_at FROM jobs_archive
ORDER BY id
"""
SCHEDULE_KEYS = """
SELECT dedupe_key FROM jobs WHERE kind = ? AND dedupe_key IS NOT NULL
UNION ALL
SELECT dedupe_key FROM jobs_archive WHERE kind = ? AND dedupe_key IS NOT NULL
"""
LIVE_IDS = "SELECT id FROM jobs WHERE state IN ('queued', 'running') ORDER BY id"
# PostgreSQL faults: every session of this database but the supervisor's own, terminated;
# and the database's ALLOW_CONNECTIONS switch (its name quoted by format's %I).
SEVER_WORKERS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> ALL(?)
"""
# run from the server's maintenance database: PostgreSQL will not switch off the current one
ALLOW_CONNECTIONS = "ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {allowed}"
# Part 2's named queues: the workers take turns, weighted (--queues default,mail:2,bulk).
PART2_QUEUES = {"default": 1, "mail": 2, "bulk": 1}
PART2_PRIORITIES = (0, 0, 5, 10)
SCHEDULED_KIND = "noop"  # labqueue.demo.handlers' no-op: done, no ledger row


@dataclass(frozen=True)
class ChaosConfig:
    """What to run. Times are in seconds; 0 for kill_every/pause_every means no such fault."""

    jobs: int = 300
    workers: int = 8
    lease: float = 0.8
    max_attempts: int = 3
    mix: dict[str, int] | None = None  # None: the tutorial's mix, scaled to `jobs`
    kill_every: float = 0.0  # mean time between SIGKILLs
    pause_every: float = 0.0  # mean time between SIGSTOPs
    pause_seconds: float = 2.0  # how long a stopped worker stays stopped
    seed: int = 42  # shuffles the jobs (the tutorial's 42)
    fault_seed: int | None = None  # draws the faults' times and victims; None: the same as seed
    idle_exit: float = 1.0
    timeout: float = 600.0
    queues: bool = False  # spread the jobs over PART2_QUEUES with mixed priorities; workers take turns
    purge_every: float = 0.0  # the supervisor purges finished jobs into jobs_archive this often
    cancel_every: float = 0.0  # mean seconds between cancels of a random live job
    schedule_every: float = 0.0  # every worker ticks a schedule of SCHEDULED_KIND with this period
    # PostgreSQL only: the server's own faults, which a worker must survive by reconnecting.
    sever_every: float = 0.0  # mean seconds between terminating every worker's session
    outage_at: float = 0.0  # seconds into the run when the database refuses connections (0: never)
    outage_seconds: float = 1.0  # ... for this long, every worker's session terminated as it starts

    def __post_init__(self) -> None:
        for name in ("jobs", "workers", "max_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f"{name} must be a whole number of at least 1, got {value!r}")
        for name in ("lease", "idle_exit", "timeout"):
            if not _number(getattr(self, name)) or getattr(self, name) <= 0:
                raise InvalidArgument(
                    f"{name} must be a number of seconds above 0, got {getattr(self, name)!r}"
                )
        for name in (
            "kill_every",
            "pause_every",
            "purge_every",
            "cancel_every",
            "schedule_every",
            "sever_every",
            "outage_at",
            "outage_seconds",
        ):
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                raise InvalidArgument(
                    f"{name} must be 0 (off) or a number of seconds, got {getattr(self, name)!r}"
                )
        if self.pause_every and not (_number(self.pause_seconds) and self.pause_seconds > self.lease):
            raise InvalidArgument(
                f"pause_seconds must be longer than the lease ({self.lease} s), got {self.pause_seconds!r}"
            )
        if self.mix is not None:
            check_mix(self.mix, self.jobs)

    @property
    def job_mix(self) -> dict[str, int]:
        return dict(self.mix) if self.mix is not None else scaled_mix(self.jobs)

    def worker_settings(self) -> WorkerSettings:
        """Each worker's settings: the demo handlers, and what Part 2 adds."""
        written = ",".join(f"{name}:{weight}" for name, weight in PART2_QUEUES.items())
        queues = written if self.queues else None
        every = (f"{SCHEDULED_KIND}={self.schedule_every:g}",) if self.schedule_every else ()
        return WorkerSettings(handlers=(DEMO_HANDLERS,), queues=queues, every=every)

    def with_part2(self) -> ChaosConfig:
        """Every Part 2 part on, at rates that keep a run busy but finished."""
        return replace(self, queues=True, purge_every=1.0, cancel_every=0.5, schedule_every=0.5)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_mix(mix: dict[str, int], jobs: int) -> None:
    unknown = sorted(set(mix) - set(EXPECTED_STATE))
    if unknown:
        raise InvalidArgument(f"mix has kinds without an expected end state: {', '.join(unknown)}")
    bad = {k: n for k, n in mix.items() if not isinstance(n, int) or isinstance(n, bool) or n < 0}
    if bad:
        raise InvalidArgument(f"mix counts must be whole numbers of 0 or more, got {bad}")
    if sum(mix.values()) != jobs:
        raise InvalidArgument(f"mix adds up to {sum(mix.values())} jobs, but jobs is {jobs}")


def scaled_mix(jobs: int) -> dict[str, int]:
    """The tutorial's 260/6/10/24 in proportion to `jobs`, by largest remainder."""
    total = sum(TUTORIAL_MIX.values())
    exact = {k: n * jobs / total for k, n in TUTORIAL_MIX.items()}
    mix = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: exact[k] - mix[k], reverse=True)[: jobs - sum(mix.values())]:
        mix[k] += 1
    return mix


@dataclass
class WorkerLife:
    """One worker process, from its start to its end."""

    name: str
    slot: int
    pid: int
    started: float
    ended: float | None = None
    returncode: int | None = None
    fate: str = "running"  # then: idle exit, crashed, killed, stopped at the end


@dataclass(frozen=True)
class Fault:
    """A SIGKILL or SIGSTOP the supervisor sent, and the job the worker held then (the
    lowest id: with group commit it may hold a whole batch, all of them in `held`)."""

    at: float
    fault: str  # "kill", "pause", or on PostgreSQL "sever" (the worker's session terminated)
    worker: str
    job_id: int | None
    until: float | None = None  # when a paused worker was let go again
    held: tuple[int, ...] = ()  # every job the worker held; () when unknown (job_id alone)

    @property
    def hit(self) -> tuple[int, ...]:
        """The jobs whose attempt this fault cost."""
        return self.held or (() if self.job_id is None else (self.job_id,))


@dataclass
class ChaosResult:
    config: ChaosConfig
    path: Path | str = field(repr=False)  # the SQLite file, or the PostgreSQL database's URL (secret)
    started: float  # wall-clock time of the start; every other time is relative to it
    elapsed: float
    workers: list[WorkerLife]
    faults: list[Fault]
    jobs: list[JobRow]
    ledger: list[tuple[int, int]]
    checks: list[Check] = field(default_factory=list)
    crash_hits: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    refused_cancels: int = 0
    purged: int = 0

    @property
    def passed(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def crashed(self) -> int:
        return sum(1 for w in self.workers if w.fate == "crashed")

    def report(self) -> list[str]:
        """The run in a few lines, in the tutorial's order, then every check."""
        c, f = self.config, figures(self.jobs, self.ledger)
        mix = ", ".join(f"{n} {k}" for k, n in c.job_mix.items())
        kinds = Counter(x.fault for x in self.faults)
        faults = "none injected"
        if c.kill_every or c.pause_every:
            faults = (
                f"{kinds['kill']} SIGKILLs (one every {c.kill_every:g} s on average), "
                f"{kinds['pause']} SIGSTOPs of {c.pause_seconds:g} s (one every {c.pause_every:g} s)"
            )
        if c.sever_every or c.outage_at:
            severed = f"{kinds['sever']} worker sessions terminated"
            if c.outage_at:
                severed += f", connections refused for {c.outage_seconds:g} s at {c.outage_at:g} s"
            faults = severed if faults == "none injected" else f"{faults}; {severed}"
        lines = [
            f"{len(self.jobs)} jobs ({mix}), {c.workers} workers, lease {c.lease:g} s, "
            f"max_attempts {c.max_attempts}, seed {c.seed}"
            + ("" if c.fault_seed is None else f", fault seed {c.fault_seed}")
            + (", on PostgreSQL" if is_postgres(self.path) else ""),
            f"faults: {faults}",
            f"finished in {self.elapsed:.1f} s; {len(self.workers)} worker processes started, "
            f"{self.crashed} exited with a crash",
            f"states: {f['states']}",
            f"ledger rows: {f['ledger_rows']}; jobs with more than one ledger row: "
            f"{f['jobs_with_two_or_more_rows']}",
            f"credit jobs that needed a retry: {f['credit_retried']}",
            f"slow jobs, by the attempt whose effect was recorded: {f['slow_by_attempt']}",
            f"attempts used by the dead jobs: {f['dead_attempts']}",
            f"attempts lost when a worker crashed (its poison job's batch): {len(self.crash_hits)}",
            *self.part2_lines(),
            "checks:",
            *(check.line() for check in self.checks),
        ]
        lines.append(
            "PASS: every job finished exactly once or was dead-lettered"
            if self.passed
            else "FAIL: " + "; ".join(check.claim for check in self.checks if not check.ok)
        )
        return lines

    def part2_lines(self) -> list[str]:
        c, lines = self.config, []
        if c.queues:
            weights = ", ".join(f"{n}:{w}" for n, w in PART2_QUEUES.items())
            lines.append(
                f"named queues {weights} with priorities {sorted(set(PART2_PRIORITIES))}; workers take turns"
            )
        if c.purge_every:
            lines.append(
                f"purged into jobs_archive while the workers ran: {self.purged} jobs "
                f"(every {c.purge_every:g} s)"
            )
        if c.cancel_every:
            lines.append(
                f"cancelled: {len(self.cancelled)} jobs (one every {c.cancel_every:g} s on average), "
                f"{self.refused_cancels} more came too late (the job had finished)"
            )
        if c.schedule_every:
            own = sum(1 for j in self.jobs if j.kind == SCHEDULED_KIND)
            lines.append(
                f"scheduled {SCHEDULED_KIND} every {c.schedule_every:g} s: {own} jobs, one per period"
            )
        return lines


Progress = Callable[[int, int], None]


def prepare(path: Location, config: ChaosConfig) -> int:
    """A fresh queue holding the shuffled mix, and an empty ledger. Returns the job count."""
    order = [kind for kind, count in config.job_mix.items() for _ in range(count)]
    rng = random.Random(config.seed)
    rng.shuffle(order)  # mix the crashing, stalling and failing jobs in among the rest
    names = list(PART2_QUEUES)
    where = [
        (rng.choice(names), rng.choice(PART2_PRIORITIES)) if config.queues else ("default", 0) for _ in order
    ]
    with open_queue(path, lease_seconds=config.lease, max_attempts=config.max_attempts) as q:
        with Store(path) as store:  # beside the jobs table (on PostgreSQL, in the queue's schema)
            store.execute(LEDGER_TABLE)
            store.script(RECORD_TABLES)
        # In order, a batch per run of one kind in one queue at one priority.
        for (kind, (queue, priority)), run in itertools.groupby(zip(order, where, strict=True)):
            q.enqueue_many(kind, ({} for _ in run), queue=queue, priority=priority)
    return len(order)


ARCHIVED = "SELECT COUNT(*) FROM jobs_archive"


class Supervisor:
    """Keeps `workers` processes running, replaces any that end, and injects the faults.
    The processes are a labqueue.pool.WorkerPool's; this class adds the faults and the record."""

    def __init__(self, path: Location, config: ChaosConfig, started: float) -> None:
        self.path, self.config, self.t0 = path, config, started
        fault_seed = config.seed if config.fault_seed is None else config.fault_seed
        self.rng = random.Random(f"faults-{fault_seed}")
        self.db = Store(path)
        self.pool = WorkerPool(
            path,
            config.workers,
            lease_seconds=config.lease,
            idle_exit=config.idle_exit,
            settings=config.worker_settings(),
        )
        # Part 2: the supervisor's own queue connection purges and cancels while workers run.
        # Its lock timeout is short: a worker it froze (SIGSTOP) mid-transaction may hold the
        # row it wants to cancel, and only the supervisor's next tick lets that worker go.
        busy = config.purge_every or config.cancel_every
        self.q = open_queue(path, lease_seconds=config.lease, timeout=0.5) if busy else None
        self.busy_cancels = 0  # cancels given up: the row stayed locked past that timeout
        self.next_sever = self._next(config.sever_every)
        self.outage_ends: float | None = None  # while the database refuses connections
        self.crash_hits: list[int] = []  # the jobs each crashed worker held, once per crash
        self.cancelled: list[int] = []  # jobs the run cancelled: cancel() answered queued or running
        self.refused_cancels = 0  # cancels that came too late: the job had finished
        # Purged rows are counted in jobs_archive, where each purge window moves them as it
        # commits: a purge cut short by the lock timeout has still moved what it committed.
        self.archived_before = self.db.scalar(ARCHIVED) if config.purge_every else 0
        self.purged = 0
        self.busy_purges = 0  # purges cut short: a frozen worker held the write lock past that timeout
        self.next_purge = self.now() + config.purge_every if config.purge_every else float("inf")
        self.next_cancel = self._next(config.cancel_every)
        self.lives: list[WorkerLife] = []
        self.life: dict[str, WorkerLife] = {}  # by worker name
        self.faults: list[Fault] = []
        self.paused: dict[str, tuple[psutil.Process, float, int]] = {}  # name: (process, wake at, fault #)
        self.killed: set[str] = set()
        self.next_kill = self._next(config.kill_every)
        self.next_pause = self._next(config.pause_every)

    def now(self) -> float:
        return time.time() - self.t0

    def _next(self, mean: float) -> float:
        return self.now() + self.rng.expovariate(1 / mean) if mean else float("inf")

    def live_jobs(self) -> int:
        return self.db.scalar("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')")

    def drained(self) -> bool:
        """Nothing queued or running and, when the workers tick a schedule, its first job made.
        Without the second half, a run whose jobs all end (cancelled, say) before any worker is
        up to tick would end with no period to check."""
        if self.live_jobs():
            return False
        return not self.config.schedule_every or bool(self.db.rows(SCHEDULE_KEYS, (SCHEDULED_KIND,) * 2))

    def finished_jobs(self) -> int:
        return (
            self.db.scalar("SELECT COUNT(*) FROM jobs WHERE state IN ('done', 'dead', 'cancelled')")
            + self.purged
        )

    def held_jobs(self, worker: str) -> tuple[int, ...]:
        """Every job leased to `worker` now: a batch costs each of its jobs an attempt."""
        rows = self.db.rows(HELD_JOBS, (worker,))
        return tuple(row[0] for row in rows)

    def fault(self, at: float, kind: str, worker: str) -> Fault:
        held = self.held_jobs(worker)
        return Fault(at, kind, worker, held[0] if held else None, held=held)

    @property
    def slots(self) -> list[tuple[subprocess.Popen, WorkerLife] | None]:
        """Each slot's process and its life, or None for an empty slot."""
        return [None if w is None else (w.proc, self.life[w.name]) for w in self.pool.slots]

    def tick(self) -> None:
        """Replace ended workers, wake paused ones whose time has come, inject due faults."""
        for worker in self.pool.reap():
            self._ended(worker)
        for worker in self.pool.fill():  # every ended worker is replaced, an idle exit too
            life = WorkerLife(worker.name, worker.slot, worker.pid, self.now())
            self.lives.append(life)
            self.life[worker.name] = life
        for name, (process, wake_at, index) in list(self.paused.items()):
            if self.now() >= wake_at:
                self._resume(name, process, index)
        if self.now() >= self.next_kill:
            self._kill()
            self.next_kill = self._next(self.config.kill_every)
        if self.now() >= self.next_pause:
            self._pause()
            self.next_pause = self._next(self.config.pause_every)
        if self.now() >= self.next_cancel:
            self._cancel()
            self.next_cancel = self._next(self.config.cancel_every)
        if self.now() >= self.next_sever:
            self._sever()
            self.next_sever = self._next(self.config.sever_every)
        if self.config.outage_at and self.outage_ends is None and self.now() >= self.config.outage_at:
            self._allow_connections(False)
            self._sever()
            self.outage_ends = self.now() + self.config.outage_seconds
        if self.outage_ends is not None and self.now() >= self.outage_ends:
            self._allow_connections(True)
            self.outage_ends = float("inf")  # once
        if self.now() >= self.next_purge:
            assert self.q is not None
            try:
                self.q.purge(0, states=("done", "dead", "cancelled"), archive=True)
            except QueueBusy:  # as for a cancel: the frozen worker is thawed by a later tick
                self.busy_purges += 1
            self.purged = self.db.scalar(ARCHIVED) - self.archived_before
            self.next_purge = self.now() + self.config.purge_every

    def _cancel(self) -> None:
        """Cancel a random job that is queued or running now (it may finish first)."""
        assert self.q is not None
        live = [row[0] for row in self.db.rows(LIVE_IDS)]
        if not live:
            return
        job_id = self.rng.choice(live)
        try:
            self.q.cancel(job_id)
        except CannotCancel:
            self.refused_cancels += 1
        except QueueBusy:
            self.busy_cancels += 1
        else:
            self.cancelled.append(job_id)

    def _own_sessions(self) -> list[int]:
        """The supervisor's own PostgreSQL sessions, which its faults leave alone."""
        return [self.db.db.info.backend_pid] + ([self.q.db.info.backend_pid] if self.q is not None else [])

    def _sever(self) -> None:
        """Terminate every worker's session (pg_terminate_backend), as a server restart or
        a failover would: each worker must reconnect and carry on. A worker's leases stay
        fenced; a batch whose COMMIT was cut off costs its jobs an attempt, recorded."""
        at = self.now()
        held = [self.fault(at, "sever", w.name) for w in self._candidates()]
        terminated = self.db.rows(SEVER_WORKERS, (self._own_sessions(),))
        if terminated:
            self.faults.extend(held)

    def _allow_connections(self, allowed: bool) -> None:
        """The outage: the database refuses new connections (ALLOW_CONNECTIONS), so the
        severed workers' reconnects fail and back off until it is over. Switched from the
        server's maintenance database (postgres), which PostgreSQL requires."""
        import psycopg
        from psycopg import sql as pg_sql

        name = self.db.scalar("SELECT current_database()")
        admin = urlunsplit(urlsplit(str(self.path))._replace(path="/postgres"))
        statement = pg_sql.SQL(ALLOW_CONNECTIONS).format(
            name=pg_sql.Identifier(name), allowed=pg_sql.SQL("true" if allowed else "false")
        )
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(statement)

    def _ended(self, worker: Worker) -> None:
        life = self.life[worker.name]
        life.ended, life.returncode = self.now(), worker.returncode
        if life.name in self.killed:
            life.fate = "killed"
        else:
            life.fate = "idle exit" if worker.returncode == 0 else "crashed"
        if life.fate == "crashed":
            # A poison job took its worker down with the rest of its batch: each of them lost
            # an attempt too (their leases still name the worker: it ended a tick ago).
            self.crash_hits.extend(self.held_jobs(worker.name))

    def _candidates(self) -> list[Worker]:
        return [
            w
            for w in self.pool.workers
            if w.proc.poll() is None and w.name not in self.paused.keys() | self.killed
        ]

    def _kill(self) -> None:
        candidates = self._candidates()
        if not candidates:
            return
        worker = self.rng.choice(candidates)
        self.pool.kill(worker.name)  # SIGKILL: the worker gets no chance to run except/finally code
        if os.name == "posix" and worker.returncode != -signal.SIGKILL:
            return  # it ended by itself a moment earlier; the next tick records how
        self.killed.add(worker.name)
        self.faults.append(self.fault(self.now(), "kill", worker.name))

    def _pause(self) -> None:
        candidates = self._candidates()
        if not candidates:
            return
        worker = self.rng.choice(candidates)
        life = self.life[worker.name]
        process = psutil.Process(worker.pid)
        try:
            process.suspend()  # SIGSTOP
        except psutil.NoSuchProcess:
            return
        at = self.now()
        self.faults.append(self.fault(at, "pause", life.name))
        self.paused[life.name] = (process, at + self.config.pause_seconds, len(self.faults) - 1)

    def _resume(self, name: str, process: psutil.Process, index: int) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.resume()  # SIGCONT: the zombie wakes up, its lease long gone
        del self.paused[name]
        self.faults[index] = replace(self.faults[index], until=self.now())

    def stop_all(self) -> None:
        """Let every paused worker go, then kill whatever still runs, with its children."""
        for name, (process, _, index) in list(self.paused.items()):
            self._resume(name, process, index)
        still_running = set(self.pool.processes)
        for worker in self.pool.kill_all():
            if worker.name in still_running:
                life = self.life[worker.name]
                life.ended, life.returncode, life.fate = self.now(), worker.returncode, "stopped at the end"
            else:
                self._ended(worker)

    def close(self) -> None:
        self.db.close()
        if self.q is not None:
            self.q.close()


def run(
    config: ChaosConfig,
    path: Location | None = None,
    progress: Progress | None = None,
    stop: threading.Event | StopEvent | None = None,
) -> ChaosResult:
    """Prepare a queue in `path`, a new file (default: a fresh ./work/chaos.db) or a
    postgresql:// URL of a database without a queue, supervise until it drains (or
    `config.timeout` passes, or `stop` is set), then check and record the run. Every
    worker is thawed and killed before it returns, whatever happened."""
    if path is None:
        path = db_path("chaos")
    elif not is_postgres(path):
        path = Path(path)
    if not is_postgres(path) and (config.sever_every or config.outage_at):
        raise InvalidArgument("sever_every and outage_at are PostgreSQL's faults: run on a postgresql:// URL")
    check_new(path)
    total = prepare(path, config)
    started = time.time()
    supervisor = Supervisor(path, config, started)
    drained = False
    try:
        while supervisor.now() < config.timeout and not (stop is not None and stop.is_set()):
            if supervisor.drained():
                drained = True
                break
            supervisor.tick()
            if progress is not None:
                progress(supervisor.finished_jobs(), total)
            time.sleep(TICK)
    finally:
        elapsed = supervisor.now()
        if supervisor.outage_ends is not None:
            supervisor._allow_connections(True)  # never leave the database refusing connections
        supervisor.stop_all()
        supervisor.close()
    result = collect(path, config, started, elapsed, supervisor.lives, supervisor.faults)
    result.cancelled, result.refused_cancels = supervisor.cancelled, supervisor.refused_cancels
    result.purged = supervisor.purged
    if progress is not None:
        progress(sum(1 for j in result.jobs if j.state in ("done", "dead", "cancelled")), total)
    scheduled = None
    if config.schedule_every:
        with Store(path) as db:
            keys = [row[0] for row in db.rows(SCHEDULE_KEYS, (SCHEDULED_KIND, SCHEDULED_KIND))]
        scheduled = (SCHEDULED_KIND, keys)
    result.crash_hits = supervisor.crash_hits
    result.checks = check_run(
        result.jobs,
        result.ledger,
        Counter(job_id for f in result.faults for job_id in f.hit) + Counter(result.crash_hits),
        lease=config.lease,
        drained=drained,
        cancelled=result.cancelled,
        scheduled=scheduled,
    )
    save_records(path, result)
    return result


def collect(
    path: Location,
    config: ChaosConfig,
    started: float,
    elapsed: float,
    lives: list[WorkerLife],
    faults: list[Fault],
) -> ChaosResult:
    with Store(path) as db:
        jobs = [
            JobRow(r[0], r[1], r[2], r[3], r[4], r[5], None if r[6] is None else r[6] - started)
            for r in db.rows(JOB_ROWS)
        ]
        ledger = [(r[0], r[1]) for r in db.rows("SELECT job_id, attempt FROM ledger ORDER BY job_id")]
    return ChaosResult(config, path, started, elapsed, lives, faults, jobs, ledger)


def save_records(path: Location, result: ChaosResult) -> None:
    """Keep the worker lifetimes and faults next to the jobs, for plots and later questions."""
    with Store(path) as store, store.transaction() as db:
        for table in ("chaos_run", "chaos_workers", "chaos_faults"):
            db.execute(f"DELETE FROM {table}")  # a fixed list of our own table names
        db.execute(
            "INSERT INTO chaos_run VALUES (?, ?, ?)",
            (result.started, result.elapsed, json.dumps(asdict(result.config))),
        )
        db.executemany(
            "INSERT INTO chaos_workers VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(w.name, w.slot, w.pid, w.started, w.ended, w.returncode, w.fate) for w in result.workers],
        )
        db.executemany(
            "INSERT INTO chaos_faults VALUES (?, ?, ?, ?, ?)",
            [(f.at, f.fault, f.worker, f.job_id, f.until) for f in result.faults],
        )


def parse_mix(text: str) -> dict[str, int]:
    """``credit=260,slow=6,poison=10,bad=24`` as a dict."""
    mix: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, count = part.partition("=")
        if not sep or not count.strip().isdigit():
            raise argparse.ArgumentTypeError(f"expected KIND=COUNT, got {part!r}")
        mix[kind.strip()] = int(count)
    return mix


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m labqueue.chaos", description=__doc__.split("\n\n")[0])
    d = ChaosConfig()
    parser.add_argument("--jobs", type=int, default=d.jobs, help=f"how many jobs (default {d.jobs})")
    parser.add_argument(
        "--workers", type=int, default=d.workers, help=f"worker processes (default {d.workers})"
    )
    parser.add_argument("--lease", type=float, default=d.lease, help=f"lease in seconds (default {d.lease})")
    parser.add_argument(
        "--max-attempts", type=int, default=d.max_attempts, help="attempts per job (default 3)"
    )
    parser.add_argument(
        "--mix", type=parse_mix, default=None, help="KIND=COUNT,... (default: 260/6/10/24 scaled to --jobs)"
    )
    parser.add_argument(
        "--kill-every", type=float, default=0.0, help="mean seconds between SIGKILLs (0: none)"
    )
    parser.add_argument(
        "--pause-every", type=float, default=0.0, help="mean seconds between SIGSTOPs (0: none)"
    )
    parser.add_argument(
        "--pause-seconds", type=float, default=d.pause_seconds, help="how long a SIGSTOP lasts (default 2)"
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="shuffles the jobs (default 42)")
    parser.add_argument("--fault-seed", type=int, default=None, help="draws the faults (default: --seed)")
    parser.add_argument("--timeout", type=float, default=d.timeout, help="give up after this many seconds")
    part2 = parser.add_argument_group("Part 2 of the course")
    part2.add_argument("--part2", action="store_true", help="every Part 2 part below, at its default rate")
    part2.add_argument(
        "--queues", action="store_true", help="named queues with mixed priorities, workers take turns"
    )
    part2.add_argument(
        "--purge-every", type=float, default=0.0, help="seconds between purges into jobs_archive"
    )
    part2.add_argument(
        "--cancel-every", type=float, default=0.0, help="mean seconds between cancels (0: none)"
    )
    part2.add_argument("--schedule-every", type=float, default=0.0, help="a periodic noop job every SECONDS")
    server = parser.add_argument_group("PostgreSQL's own faults (with --postgres or a postgresql:// --db)")
    server.add_argument(
        "--sever-every",
        type=float,
        default=0.0,
        help="mean seconds between terminating every worker's session",
    )
    server.add_argument(
        "--outage-at",
        type=float,
        default=0.0,
        help="refuse connections from this second of the run (0: never)",
    )
    server.add_argument("--outage-seconds", type=float, default=d.outage_seconds, help="... for this long")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--db",
        default=None,
        help="a new file for the queue (default: a fresh ./work/chaos.db), or a postgresql:// URL "
        "of a database without a queue",
    )
    where.add_argument(
        "--postgres",
        action="store_true",
        help="run on PostgreSQL: a throwaway server on 127.0.0.1 (or LABQUEUE_PG_URL's), in a fresh "
        "database dropped afterwards; the workers connect over TCP",
    )
    args = parser.parse_args(argv)
    try:
        config = ChaosConfig(
            jobs=args.jobs,
            workers=args.workers,
            lease=args.lease,
            max_attempts=args.max_attempts,
            mix=args.mix,
            kill_every=args.kill_every,
            pause_every=args.pause_every,
            pause_seconds=args.pause_seconds,
            seed=args.seed,
            fault_seed=args.fault_seed,
            timeout=args.timeout,
            queues=args.queues,
            purge_every=args.purge_every,
            cancel_every=args.cancel_every,
            schedule_every=args.schedule_every,
            sever_every=args.sever_every,
            outage_at=args.outage_at,
            outage_seconds=args.outage_seconds,
        )
        if args.part2:
            config = config.with_part2()
    except InvalidArgument as exc:
        parser.error(str(exc))
    if args.db is not None and not is_postgres(args.db) and Path(args.db).exists():
        parser.error(f"--db {args.db} already exists; the run needs a new file")
    # SIGTERM only sets the flag: the loop ends and cleans up, so no worker is left frozen.
    stop = stop_on(signal.SIGTERM)
    try:
        result = run_on_postgres(config, stop=stop) if args.postgres else run(config, args.db, stop=stop)
    except InvalidArgument as exc:
        parser.error(redact(exc, args.db))
    except CannotOpen as exc:  # the database named by --db cannot be reached: one line
        print(f"{parser.prog}: error: {redact(exc, args.db)}", file=sys.stderr)
        return 1
    print("\n".join(result.report()))
    return 0 if result.passed else 1


def run_on_postgres(
    config: ChaosConfig, progress: Progress | None = None, stop: threading.Event | StopEvent | None = None
) -> ChaosResult:
    """run() on PostgreSQL: a throwaway server listening on 127.0.0.1 (or the one
    LABQUEUE_PG_URL names), a fresh database on it, dropped when the run is over."""
    from ..postgres.server import fresh_database, throwaway_server

    with throwaway_server(tcp=True) as server, fresh_database(server) as url:
        return run(config, url, progress=progress, stop=stop)
