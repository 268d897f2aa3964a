"""Real worker processes on PostgreSQL: `python -m labqueue.worker URL ...`, four at once,
stand-ins for workers on four machines. Each claim is one statement with FOR UPDATE SKIP
LOCKED, so no job is handed to two workers and none is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest

pytestmark = pytest.mark.slow
psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from labqueue import open_queue  # noqa: E402

WORKERS = 4
JOBS = 2000

# Each handling is written down at once, outside the job's transaction (a claim seen
# twice would show as two rows), and the completion's effect adds the job's done row.
HANDLERS = textwrap.dedent(
    """
    import os
    import time
    from labqueue.handlers import handler

    @handler("race")
    def race(job, q):
        q.db.execute("INSERT INTO handled (job_id, attempt, pid) VALUES (%s, %s, %s)",
                      (job.id, job.attempts, os.getpid()))

        def effect(db):
            db.execute("INSERT INTO finished (job_id) VALUES (%s)", (job.id,))

        return effect

    @handler("hang_once")
    def hang_once(job, q):
        # The first attempt says it started, then hangs until it is killed.
        q.db.execute("INSERT INTO handled (job_id, attempt, pid) VALUES (%s, %s, %s)",
                      (job.id, job.attempts, os.getpid()))
        if job.attempts == 1:
            time.sleep(600)

        def effect(db):
            db.execute("INSERT INTO finished (job_id) VALUES (%s)", (job.id,))

        return effect
    """
)


@pytest.fixture
def database_url(pg_url) -> Iterator[str]:
    """A database of this test's own on the session's server (the workers use the
    default schema, so the database keeps them apart from other tests)."""
    name = f"race_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(pg_url)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_four_worker_processes_drain_2000_jobs_each_handled_once(database_url, tmp_path):
    (tmp_path / "race_handlers.py").write_text(HANDLERS)
    with open_queue(database_url, lease_seconds=60) as q:
        q.db.execute("CREATE TABLE handled (job_id bigint, attempt int, pid int)")
        q.db.execute("CREATE TABLE finished (job_id bigint)")
        q.enqueue_many("race", [{"n": n} for n in range(JOBS)])
        command = [sys.executable, "-m", "labqueue.worker", database_url]
        settings = ["60", "1.0", "--handlers", "race_handlers", "--log-level", "WARNING"]
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # where race_handlers.py is
        workers = [
            subprocess.Popen([*command, f"machine-{i}", *settings], env=env, stderr=PIPE, text=True)
            for i in range(WORKERS)
        ]
        for worker in workers:
            _, err = worker.communicate(timeout=240)
            assert worker.returncode == 0, err

        assert q.counts() == {"queued": 0, "running": 0, "done": JOBS, "dead": 0, "cancelled": 0}
        handled = q.db.execute("SELECT job_id, COUNT(*) FROM handled GROUP BY job_id").fetchall()
        assert len(handled) == JOBS
        assert [job_id for job_id, n in handled if n > 1] == []  # no job handed to two workers
        finished = q.db.execute("SELECT COUNT(*), COUNT(DISTINCT job_id) FROM finished").fetchone()
        assert finished == (JOBS, JOBS)  # one effect per job, committed with its completion
        pids = q.db.execute("SELECT COUNT(DISTINCT pid) FROM handled").fetchone()[0]
        workers_seen = len({r.worker for r in q.jobs(state="done")})
    print(f"{JOBS} jobs, {WORKERS} worker processes: 0 duplicates, {pids} processes took part")
    assert workers_seen == pids


def test_the_server_command_prints_a_url_and_cleans_up_on_sigterm():
    env = {k: v for k, v in os.environ.items() if k != "LABQUEUE_PG_URL"}
    command = [sys.executable, "-W", "ignore", "-m", "labqueue.postgres.server"]
    server = subprocess.Popen(command, env=env, stdout=PIPE, stderr=PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("postgresql://"), server.stderr.read()
        with psycopg.connect(url) as db:
            assert db.execute("SELECT 1").fetchone() == (1,)
        folder = Path(parse_qs(urlsplit(url).query)["host"][0]).parent  # .../labqueue-pg-*/data
        assert folder.is_dir()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    assert server.returncode == 0
    assert not folder.exists()


def test_a_killed_workers_job_is_taken_over_after_its_lease_by_the_servers_clock(database_url, tmp_path):
    """Worker A takes the job and is SIGKILLed mid-handler; worker B, started at once,
    gets it only when A's lease (2 s on the server's clock) has run out, as attempt 2."""
    (tmp_path / "race_handlers.py").write_text(HANDLERS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def worker(name: str, idle_exit: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "labqueue.worker", database_url, name, "2", idle_exit]
        return subprocess.Popen([*command, "--handlers", "race_handlers"], env=env, stderr=PIPE, text=True)

    with open_queue(database_url, lease_seconds=2) as q:
        q.db.execute("CREATE TABLE handled (job_id bigint, attempt int, pid int)")
        q.db.execute("CREATE TABLE finished (job_id bigint)")
        q.enqueue("hang_once", {})
        a = worker("machine-a", "30")
        try:
            for _ in range(600):  # up to a minute for A to start and take the job
                if q.db.execute("SELECT COUNT(*) FROM handled").fetchone()[0]:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("worker A never started the job")
            held = q.job(1)
            assert (held.state, held.worker, held.attempts) == ("running", "machine-a", 1)
        finally:
            a.kill()
            a.wait(timeout=60)
        b = worker("machine-b", "5")  # idle long enough to see the 2 s lease run out
        _, err = b.communicate(timeout=120)
        assert b.returncode == 0, err
        done = q.job(1)
        assert (done.state, done.worker, done.attempts) == ("done", "machine-b", 2)
        attempts = q.db.execute("SELECT attempt FROM handled ORDER BY attempt").fetchall()
        assert attempts == [(1,), (2,)]
        assert q.db.execute("SELECT COUNT(*) FROM finished").fetchone() == (1,)
