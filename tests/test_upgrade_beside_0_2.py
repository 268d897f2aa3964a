"""A rolling upgrade, tried for real: labqueue 0.2.0 (its package taken from this
repository's history, the commit CHANGELOG names, run from a folder of its own on
PYTHONPATH) makes a queue and runs a producer and a worker on it; while they run,
`labqueue migrate` brings the schema to today's, today's workers start beside the old
ones, and the old producer keeps enqueueing. Nothing that should run is refused, every
job is done exactly once (a ledger row written in the completing transaction, whoever
ran it), and after the old processes stop, `migrate --contract` takes the step they
could not live with. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from labqueue import open_queue
from labqueue.migrate import migrate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
RELEASE_0_2_0 = "9cfddc8"  # CHANGELOG: [0.2.0]
JOBS = 240
APP = "upgrade_jobs"
APP_SOURCE = """
import sqlite3

from labqueue import handler


@handler("ledgered")
def ledgered(job, q):
    entry = (job.id, job.attempts)

    def effect(db):
        if isinstance(db, sqlite3.Connection):
            db.execute("INSERT INTO ledger VALUES (?, ?)", entry)
        else:
            db.execute("INSERT INTO ledger VALUES (%s, %s)", entry)

    return effect
"""
LEDGER = "CREATE TABLE ledger (job_id BIGINT NOT NULL, attempt BIGINT NOT NULL)"
PRODUCER = """
import sys, time
from labqueue import open_queue
with open_queue(sys.argv[1]) as q:
    for n in range(int(sys.argv[2])):
        q.enqueue("ledgered", {"n": n}, dedupe_key=f"job-{n}")
        if n % 4 == 0:
            q.enqueue("ledgered", {"n": n}, dedupe_key=f"job-{n}")  # a duplicate: ON CONFLICT
        time.sleep(0.01)
print("enqueued")
"""


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """0.2.0's labqueue package, in a folder of its own."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this repository's history")
    folder = tmp_path_factory.mktemp("labqueue-0.2.0")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", RELEASE_0_2_0, "labqueue"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {RELEASE_0_2_0} (0.2.0) is not in this clone's history")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "jobs.db")
        return
    from labqueue.postgres.server import fresh_database

    with fresh_database(request.getfixturevalue("pg_url")) as url:
        yield url


def env_for(code: Path | None, app: Path, location: str) -> dict[str, str]:
    """A process's environment: 0.2.0's package first on the path (`code`), or today's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LABQUEUE_DB")}
    paths = [str(code)] if code is not None else [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(app)])
    return env


def version_of(code: Path | None, app: Path, location: str) -> str:
    env = env_for(code, app, location)
    out = subprocess.run(
        [sys.executable, "-c", "import labqueue; print(labqueue.__version__, labqueue.__file__)"],
        env=env,
        cwd=app,  # not this checkout: `-c` puts the current folder first on the path
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_old_producers_and_workers_run_beside_new_workers_through_migrate(release, location, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / f"{APP}.py").write_text(textwrap.dedent(APP_SOURCE))
    (app / "producer.py").write_text(textwrap.dedent(PRODUCER))
    old, new = env_for(release, app, location), env_for(None, app, location)
    assert str(release) in version_of(release, app, location)  # the old processes import 0.2.0

    subprocess.run(  # 0.2.0 makes the queue, at its schema
        [
            sys.executable,
            "-c",
            f"from labqueue import open_queue; q = open_queue({location!r}); "
            f"q.db.execute({LEDGER!r}); q.db.commit(); q.close()",
        ],
        env=old,
        cwd=app,
        check=True,
        capture_output=True,
        text=True,
    )
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(env: dict[str, str], *args: str, name: str) -> subprocess.Popen:
        out = open(logs / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        return subprocess.Popen(
            [sys.executable, *args], env=env, cwd=app, stdout=out, stderr=subprocess.STDOUT
        )

    producer = start(old, "producer.py", location, str(JOBS), name="old-producer")
    old_worker = start(
        old, "-m", "labqueue.worker", location, "old-1", "10", "2", "--handlers", APP, name="old-worker"
    )
    time.sleep(1.0)  # the old processes are at work
    with pytest.raises(Exception, match="labqueue migrate"):  # today's worker needs the new schema
        open_queue(location).close()
    plan = migrate(location)
    assert plan.steps, "the old queue had steps to take"
    new_workers = [
        start(
            new,
            "-m",
            "labqueue.worker",
            "--handlers",
            APP,
            "--",
            location,
            f"new-{n}",
            "10",
            "2",
            name=f"new-{n}",
        )
        for n in range(2)
    ]
    try:
        assert producer.wait(timeout=120) == 0, (logs / "old-producer.log").read_text()
        for proc in [old_worker, *new_workers]:
            assert proc.wait(timeout=120) == 0, [p.read_text() for p in logs.iterdir()]
    finally:
        for proc in [producer, old_worker, *new_workers]:
            if proc.poll() is None:
                proc.kill()
    assert "enqueued" in (logs / "old-producer.log").read_text()

    with open_queue(location) as q:
        counts = q.counts()
        ledger = q.db.execute("SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id").fetchall()
        workers = {row[0] for row in q.db.execute("SELECT DISTINCT worker FROM jobs")}
    assert counts.get("done") == JOBS and sum(counts.values()) == JOBS, counts  # each dedupe key once
    assert len(ledger) == JOBS and {n for _, n in ledger} == {1}  # each job's effect committed once
    assert any(w.startswith("old-") for w in workers) and any(w.startswith("new-") for w in workers), workers

    contracted = migrate(location, contract=True)  # the old processes have stopped
    if location.startswith("postgresql://"):
        assert [step[0] for step in contracted.steps] == [8]
        with open_queue(location) as q:
            assert q.enqueue("ledgered", {}, dedupe_key="job-0") is None  # dedupe still holds
    else:
        assert contracted.steps == ()  # SQLite has no contract step
