"""`labqueue migrate`: the only way a queue's schema changes. Opening refuses an older
queue (naming the command) and writes nothing; --dry-run and --status say what is pending;
on PostgreSQL each step waits at most --lock-timeout for a lock, so a long transaction
holds up the migration, never the queue's traffic behind it; versions are recorded."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from labqueue import JobQueue, SchemaTooNew, SchemaTooOld, open_queue
from labqueue.drivers.sqlite import sql
from labqueue.errors import InvalidArgument, QueueNotFound
from labqueue.migrate import migrate


def labqueue(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labqueue", *args], capture_output=True, text=True, timeout=120
    )


def version_3_file(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(sql.TABLE_TEMPLATE.format(name="jobs", extra="", states=sql.STATES_IN_LIST))
    db.executescript(sql.INDEXES + sql.ARCHIVE + sql.PAUSES)
    db.execute("INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('old', '{}', 0, 0)")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    return path


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_readers_refuse_an_older_queue_change_nothing_and_name_the_command(tmp_path):
    path = version_3_file(tmp_path / "jobs.db")
    before = file_bytes(path)
    for command in (["stats"], ["jobs"], ["job", None, "1"], ["health"]):
        argv = [command[0], str(path), *command[2:]]
        result = labqueue(*argv)
        assert result.returncode == 1, result
        said = result.stdout + result.stderr  # health answers on stdout, as a probe reads it
        assert f"run `labqueue migrate {path}`" in said and "Traceback" not in said
    assert file_bytes(path) == before and not Path(f"{path}-wal").exists()


def test_dry_run_and_status_say_what_is_pending_and_change_nothing(tmp_path):
    path = version_3_file(tmp_path / "jobs.db")
    before = file_bytes(path)
    dry = labqueue("migrate", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"{path}: schema version 3 (this labqueue runs on {sql.SCHEMA_VERSION}" in dry.stdout
    assert "pending version 4 (expand): the states CHECK" in dry.stdout
    assert "pending version 5 (expand): the concurrency_key" in dry.stdout
    assert "pending version 6 (expand): the started_at, result and attempt_log" in dry.stdout
    assert labqueue("migrate", str(path), "--status").stdout == dry.stdout
    assert file_bytes(path) == before
    done = labqueue("migrate", str(path))
    assert done.returncode == 0, done.stderr
    assert "applied version 4" in done.stdout and f"schema version 3 -> {sql.SCHEMA_VERSION}" in done.stdout
    assert "nothing to do" in labqueue("migrate", str(path), "--status").stdout
    assert labqueue("migrate", str(path)).stdout.strip().endswith("nothing to do")
    with JobQueue(path) as q:
        assert q.claim_next("w").kind == "old"


def test_a_queue_newer_than_this_labqueue_is_refused_by_open_and_by_migrate(tmp_path):
    path = version_3_file(tmp_path / "jobs.db")
    migrate(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {sql.SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(SchemaTooNew):
        JobQueue(path)
    with pytest.raises(SchemaTooNew):
        migrate(path)


def test_migrate_refuses_a_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(QueueNotFound, match="nothing was created"):
        migrate(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(InvalidArgument, match="lock_timeout"):
        migrate(tmp_path / "jobs.db", lock_timeout=0)
    with pytest.raises(InvalidArgument, match="schema"):
        migrate(tmp_path / "jobs.db", schema="billing")
    result = labqueue("migrate", str(tmp_path / "missing.db"))
    assert result.returncode == 1 and "does not exist" in result.stderr


def test_a_new_queue_needs_no_migration(tmp_path):
    JobQueue(tmp_path / "jobs.db").close()
    assert migrate(tmp_path / "jobs.db", dry_run=True).steps == ()


def test_a_sqlite_migration_waits_for_the_write_lock_and_tries_again(tmp_path):
    path = version_3_file(tmp_path / "jobs.db")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # a writer holds the lock for a while
    said: list[str] = []
    threading.Timer(0.6, lambda: holder.execute("COMMIT")).start()
    plan = migrate(path, lock_timeout=0.1, say=said.append)
    holder.close()
    assert [v for v, _, _ in plan.steps] == [4, 5, 6]
    assert any("trying again" in line for line in said) and said[-1].startswith("applied version 6")


# -- PostgreSQL ----------------------------------------------------------------------------------


@pytest.fixture
def schema(pg_url):
    from labqueue.postgres import drop_schema

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(pg_url, name)


def keyless_queue(pg_url: str, schema: str) -> None:
    """A queue as labqueue made it before the concurrency keys (versions 1 to 4, no record)."""
    with open_queue(pg_url, schema=schema) as q:
        q.enqueue_many("old", [{}, {}])
        q.db.execute("ALTER TABLE jobs DROP COLUMN concurrency_key, DROP COLUMN concurrency_limit")
        q.db.execute("DROP TABLE labqueue_migrations")
        q.db.commit()


def test_postgresql_readers_refuse_an_older_schema_and_migrate_records_its_versions(pg_url, schema):
    keyless_queue(pg_url, schema)
    with pytest.raises(SchemaTooOld, match=r"lacks labqueue schema version 5 .* run `labqueue migrate"):
        open_queue(pg_url, schema=schema, create=False)
    plan = migrate(pg_url, schema=schema, dry_run=True)
    assert [v for v, _, _ in plan.steps] == [5] and plan.applied == (1, 2, 3, 4, 6, 7, 8)
    migrate(pg_url, schema=schema)
    with open_queue(pg_url, schema=schema) as q:
        versions = [
            row[0] for row in q.db.execute("SELECT version FROM labqueue_migrations ORDER BY version")
        ]
        assert versions == [1, 2, 3, 4, 5, 6, 7, 8]
        assert q.claim_next("w").kind == "old"
    assert migrate(pg_url, schema=schema).steps == ()


def test_a_postgresql_schema_newer_than_this_labqueue_is_refused(pg_url, schema):
    with open_queue(pg_url, schema=schema) as q:
        q.db.execute("INSERT INTO labqueue_migrations VALUES (99, 'from the future', 0)")
        q.db.commit()
    with pytest.raises(SchemaTooNew, match="version 99"):
        open_queue(pg_url, schema=schema)


def test_a_postgresql_migration_never_holds_up_traffic_longer_than_its_lock_timeout(pg_url, schema):
    """A long transaction holds the jobs table (a report, a dashboard read): the migration's
    ALTER waits for it at most the lock timeout, backs off and tries again, and meanwhile
    producers are held up by its queued lock for no longer than that; once the long
    transaction ends, the migration lands."""
    import psycopg

    keyless_queue(pg_url, schema)
    lock_timeout = 0.3
    long_reader = psycopg.connect(pg_url)
    long_reader.execute(f'SELECT count(*) FROM "{schema}".jobs')  # its transaction stays open
    said: list[str] = []
    migration = threading.Thread(
        target=lambda: migrate(pg_url, schema=schema, lock_timeout=lock_timeout, attempts=50, say=said.append)
    )
    waits: list[float] = []
    producer = psycopg.connect(pg_url, autocommit=True)
    migration.start()
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            began = time.monotonic()
            producer.execute(
                f'INSERT INTO "{schema}".jobs (kind, payload, visible_at, created_at) VALUES (%s, %s, 0, 0)',
                ("new", "{}"),
            )
            waits.append(time.monotonic() - began)
            time.sleep(0.02)
        assert migration.is_alive()  # still waiting for the long transaction
    finally:
        long_reader.rollback()
        long_reader.close()
        migration.join(timeout=60)
        producer.close()
    assert any("trying again" in line for line in said), said
    assert said[-1].startswith("applied version 5")
    assert max(waits) < lock_timeout + 0.5, max(waits)  # never held up past the lock timeout (and slack)
    with open_queue(pg_url, schema=schema) as q:
        assert q.counts()["queued"] == 2 + len(waits)
