"""Queue files and their schema: paths, files and foreign schemas get labqueue's own errors
at open, and a refused file is left exactly as it was; files of older schema versions are
upgraded keeping every row; create=False creates nothing; text SQLite or the OS cannot
hold is refused."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from labqueue import (
    CannotOpen,
    ForeignJobsTable,
    InvalidArgument,
    Job,
    JobQueue,
    KeepAlive,
    core,
)
from labqueue.drivers.sqlite import sql
from labqueue.errors import ForeignDatabase, QueueNotFound, SchemaTooNew, SchemaTooOld
from labqueue.migrate import migrate

# The schema text of labqueue before schema versions existed (user_version 0), as it was.
PREVIOUS_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'running', 'done', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    visible_at   REAL    NOT NULL,
    lease_token  TEXT,
    worker       TEXT,
    last_error   TEXT,
    dedupe_key   TEXT UNIQUE,
    created_at   REAL    NOT NULL,
    finished_at  REAL
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (visible_at, id)
    WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_exhausted ON jobs (visible_at)
    WHERE state = 'running' AND attempts >= max_attempts;
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead';
"""

OLD_JOB = "INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('t', '{\"n\": 7}', 0, 0)"


def make_file(path: Path, script: str, *, user_version: int = 0) -> None:
    """A file as another program (or an older labqueue) left it: rollback journal, closed."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(script)
    db.execute(f"PRAGMA user_version = {int(user_version)}")
    db.close()


def state_of(path: Path) -> tuple:
    """What "untouched" means: the same bytes, the same mtime, no new file beside it."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


# -- read-only files and folders ------------------------------------------------------------
# Run in a child process as an unprivileged user (root may write anything), in a
# folder that user can reach.

PROBE = """
import json, sys
from labqueue import JobQueue
try:
    q = JobQueue(sys.argv[1])
except Exception as exc:
    print(json.dumps(["open", type(exc).__name__, str(exc)]))
else:
    try:
        q.enqueue("t", {})
        print(json.dumps(["ok", "", ""]))
    except Exception as exc:
        print(json.dumps(["enqueue", type(exc).__name__, str(exc)]))
    q.close()
"""


@pytest.fixture
def shared() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="labqueue-ro-"))
    folder.chmod(0o777)
    yield folder
    for p in [folder, *folder.iterdir()]:
        p.chmod(0o777)
    shutil.rmtree(folder)


def open_as_a_user(path: Path) -> list[str]:
    """Open the queue and enqueue, as a user with no special rights: (where it failed,
    the error's class, its message)."""
    who = {"user": 65534, "group": 65534} if os.geteuid() == 0 else {}
    command = [sys.executable, "-c", PROBE, str(path)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True, **who)
    return json.loads(out.stdout)


def a_queue(folder: Path) -> Path:
    path = folder / "jobs.db"
    JobQueue(path).close()  # the last connection to close removes -wal and -shm
    path.chmod(0o666)
    return path


def test_a_read_only_folder_cannot_hold_a_new_queue(shared):
    shared.chmod(0o555)
    where, error, message = open_as_a_user(shared / "jobs.db")
    assert (where, error) == ("open", "CannotOpen")
    assert f"cannot create {shared / 'jobs.db'}: its folder {shared} is read-only" in message
    assert list(shared.iterdir()) == []


def test_a_read_only_database_file_is_refused_at_open(shared):
    path = a_queue(shared)
    path.chmod(0o444)
    before = state_of(path)
    where, error, message = open_as_a_user(path)
    assert (where, error) == ("open", "CannotOpen")
    assert message.startswith(f"{path} is read-only for this user")
    assert state_of(path) == before


@pytest.mark.parametrize("side", ["-wal", "-shm"])
def test_a_read_only_wal_or_shm_file_is_named_at_open(shared, side):
    path = a_queue(shared)
    sidecar = path.with_name(path.name + side)
    sidecar.touch(0o444)
    sidecar.chmod(0o444)
    before = state_of(path)
    where, error, message = open_as_a_user(path)
    assert (where, error) == ("open", "CannotOpen")
    assert message.startswith(f"{sidecar} is read-only for this user")
    assert state_of(path) == before


def test_a_read_only_folder_around_a_writable_file_is_named_at_open(shared):
    path = a_queue(shared)
    shared.chmod(0o555)
    before = state_of(path)
    where, error, message = open_as_a_user(path)
    assert (where, error) == ("open", "CannotOpen")
    assert f"the folder {shared} is read-only for this user: in WAL mode SQLite must create" in message
    assert state_of(path) == before


def test_a_writable_queue_opens_for_that_user(shared):
    path = a_queue(shared)
    assert open_as_a_user(path) == ["ok", "", ""]


# -- a jobs table that is not labqueue's ----------------------------------------------------


def variant(old: str, new: str) -> str:
    """Version 1's table with one change: files at versions 0 and 1 are checked against it."""
    assert old in sql.TABLE_V1, old
    return sql.TABLE_V1.replace(old, new)


FOREIGN = {
    "no UNIQUE on dedupe_key": (
        variant("dedupe_key   TEXT UNIQUE", "dedupe_key   TEXT"),
        "its unique keys are none, labqueue's table has UNIQUE (dedupe_key) only",
    ),
    "a UNIQUE kind as well": (
        variant("kind         TEXT    NOT NULL", "kind         TEXT    NOT NULL UNIQUE"),
        "its unique keys are UNIQUE (dedupe_key), UNIQUE (kind)",
    ),
    "an extra NOT NULL column without a default": (
        variant("finished_at  REAL\n", "finished_at  REAL,\n    owner TEXT NOT NULL\n"),
        "its extra column owner is NOT NULL without a default",
    ),
    "another CHECK on state": (
        variant("'done', 'dead')", "'done', 'dead', 'paused')"),
        "its CHECK constraints are [\"(state IN ('queued', 'running', 'done', 'dead', 'paused'))\"]",
    ),
    "no CHECK on state": (
        variant("CHECK (state IN ('queued', 'running', 'done', 'dead'))", ""),
        "its CHECK constraints are none",
    ),
    "payload as a BLOB": (
        variant("payload      TEXT    NOT NULL", "payload      BLOB    NOT NULL"),
        "column payload is BLOB NOT NULL, labqueue's is TEXT NOT NULL",
    ),
    "kind may be NULL": (
        variant("kind         TEXT    NOT NULL", "kind         TEXT"),
        "column kind is TEXT, labqueue's is TEXT NOT NULL",
    ),
    "a view named jobs": (
        sql.TABLE_V1.replace("EXISTS jobs", "EXISTS real_jobs")
        + "CREATE VIEW jobs AS SELECT * FROM real_jobs;",
        "already has a view named 'jobs', not labqueue's table",
    ),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
@pytest.mark.parametrize("version", [0, 1])
def test_a_jobs_table_of_another_shape_is_refused_untouched(tmp_path, case, version):
    script, message = FOREIGN[case]
    path = tmp_path / "app.db"
    make_file(path, script, user_version=version)
    before = state_of(path)
    with pytest.raises(ForeignJobsTable, match="already has a") as refused:
        JobQueue(path)
    assert message in str(refused.value)
    assert state_of(path) == before


def test_an_extra_column_that_may_be_null_is_allowed(tmp_path):
    path = tmp_path / "app.db"
    make_file(path, variant("finished_at  REAL\n", "finished_at  REAL,\n    note TEXT\n") + sql.INDEXES_V1)
    with JobQueue(upgraded(path)) as q:
        q.enqueue("t", {"n": 1})
        assert q.claim("w")[0].payload == {"n": 1}


def test_a_current_table_made_by_hand_without_a_version_gets_its_indexes(tmp_path):
    path = tmp_path / "hand.db"
    make_file(path, sql.TABLE)
    with JobQueue(path) as q:
        names = {n for (n,) in q.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        q.enqueue("t", {"n": 1}, priority=3, queue="mail")
    assert {"jobs_ready", "jobs_queue_ready", "jobs_exhausted", "jobs_dead"} <= names
    assert user_version(path) == sql.SCHEMA_VERSION


def upgraded(path: Path) -> Path:
    """An old queue is refused at open, untouched, naming the command; then migrated."""
    before = state_of(path)
    with pytest.raises(SchemaTooOld, match=r"run `labqueue migrate .*` to upgrade it"):
        JobQueue(path)
    assert state_of(path) == before
    migrate(path)
    return path


# -- schema versions ---------------------------------------------------------------------------


def test_a_new_queue_records_the_current_schema_version(tmp_path):
    JobQueue(tmp_path / "jobs.db").close()
    assert user_version(tmp_path / "jobs.db") == sql.SCHEMA_VERSION == len(sql.MIGRATIONS)


def test_a_queue_from_before_versions_is_upgraded_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "old.db"
    make_file(path, PREVIOUS_SCHEMA + OLD_JOB + ";")
    with JobQueue(upgraded(path)) as q:
        assert [job.payload for job in q.claim("w")] == [{"n": 7}]
    assert user_version(path) == sql.SCHEMA_VERSION


def test_an_old_queue_without_its_indexes_gets_them(tmp_path):
    path = tmp_path / "old.db"
    make_file(path, sql.TABLE_V1)
    with JobQueue(upgraded(path)) as q:
        names = {n for (n,) in q.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_ready", "jobs_exhausted", "jobs_dead"} <= names


def test_schema_none_opens_an_old_queue_without_writing(tmp_path):
    path = tmp_path / "old.db"
    make_file(path, PREVIOUS_SCHEMA + OLD_JOB + ";")
    with JobQueue(path, schema=None) as q:
        assert q.counts()["queued"] == 1
    assert user_version(path) == 0


def test_a_queue_from_a_newer_labqueue_is_refused_untouched(tmp_path):
    path = tmp_path / "new.db"
    make_file(path, sql.SCHEMA, user_version=sql.SCHEMA_VERSION + 1)
    before = state_of(path)
    later = sql.SCHEMA_VERSION + 1
    with pytest.raises(SchemaTooNew, match=rf"schema version {later} .* up to {sql.SCHEMA_VERSION}: upgrade"):
        JobQueue(path)
    assert state_of(path) == before


def rows(path: Path, columns: str) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT {columns} FROM jobs ORDER BY id").fetchall()
    finally:
        db.close()


def test_version_1_files_are_rebuilt_as_version_2_keeping_every_row(tmp_path):
    """Version 2 adds priority, queue and the 'cancelled' state. SQLite cannot ALTER a
    CHECK, so the table is rebuilt: every row, and a column another program added, survive."""
    current = tmp_path / "current.db"
    with_note = variant("finished_at  REAL\n", "finished_at  REAL,\n    note TEXT DEFAULT 'n/a'\n")
    make_file(current, with_note + sql.INDEXES_V1 + OLD_JOB + ";", user_version=1)
    sqlite3.connect(current).execute("UPDATE jobs SET note = 'kept'").connection.commit()
    old = tmp_path / "old.db"
    make_file(old, PREVIOUS_SCHEMA + OLD_JOB + ";")
    fresh = tmp_path / "fresh.db"
    for path in (current, old, fresh):
        with JobQueue(path if path == fresh else upgraded(path)) as q:
            q.enqueue("t", {"n": 8}, priority=5)
            claimed = q.claim("w")  # the higher priority first
            assert claimed[0].payload == {"n": 8}
            assert q.cancel(claimed[0].id) == "running"
            assert [job.payload["n"] for job in q.claim("w")] == ([7] if path != fresh else [])
        assert user_version(path) == sql.SCHEMA_VERSION
        assert {row[0] for row in rows(path, "queue")} == {"default"}
    assert rows(current, "note, priority") == [("kept", 0), ("n/a", 5)]
    assert rows(current, "state") == [("running",), ("cancelled",)]
    with JobQueue(current, schema=None) as q:  # the rebuilt file is labqueue's current shape
        assert q.counts()["cancelled"] == 1


# Schema version 3 as labqueue wrote it: the states CHECK an IN list.
VERSION_3 = (
    sql.TABLE_TEMPLATE.format(name="jobs", extra="", states=sql.STATES_IN_LIST)
    + sql.INDEXES
    + sql.ARCHIVE
    + sql.PAUSES
)


def test_version_3_files_are_rebuilt_as_version_4_keeping_rows_columns_indexes_and_triggers(tmp_path):
    """Version 4 writes the states CHECK as comparisons. The table is rebuilt: every row,
    a column another program added, and that program's own index and trigger survive."""
    path = tmp_path / "v3.db"
    extra = (
        "ALTER TABLE jobs ADD COLUMN note TEXT DEFAULT 'n/a';"
        "CREATE INDEX by_kind ON jobs (kind);"
        "CREATE TABLE audit (job_id INTEGER, state TEXT);"
        "CREATE TRIGGER audit_state AFTER UPDATE OF state ON jobs"
        " BEGIN INSERT INTO audit VALUES (new.id, new.state); END;"
        # Objects that name the table without being on it: a view, another table's trigger.
        "CREATE VIEW waiting AS SELECT id FROM jobs WHERE state = 'queued';"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY);"
        "CREATE TRIGGER ship AFTER INSERT ON orders BEGIN"
        " INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('ship', '{}', 0, 0); END;"
    )
    make_file(path, VERSION_3 + OLD_JOB + ";" + extra, user_version=3)
    assert "(state IN (" in sqlite3.connect(path).execute(sql.JOBS_OBJECT).fetchone()[1]
    with JobQueue(upgraded(path)) as q:
        create = q.db.execute(sql.JOBS_OBJECT).fetchone()[1]
        names = {n for (n,) in q.db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'jobs'")}
        job = q.claim("w")[0]
        assert job.payload == {"n": 7}
        assert q.complete(job)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            q.db.execute("UPDATE jobs SET state = 'paused'")
        q.db.execute("INSERT INTO orders DEFAULT VALUES")  # the trigger writes to the new table
        assert [tuple(r) for r in q.db.execute("SELECT id FROM waiting")] == [(2,)]
    assert user_version(path) == sql.SCHEMA_VERSION  # through version 4's rebuild, then on
    assert f"CHECK ({sql.STATES_COMPARED})" in create and " IN (" not in create.split("CHECK", 1)[1][:120]
    labqueues = {"jobs_ready", "jobs_queue_ready", "jobs_exhausted", "jobs_dead"}
    assert {"by_kind", "audit_state"} | labqueues <= names
    assert rows(path, "note, state") == [("n/a", "done"), ("n/a", "queued")]
    audit = sqlite3.connect(path).execute("SELECT job_id, state FROM audit").fetchall()
    assert audit == [(1, "running"), (1, "done")]


def test_a_version_3_table_made_by_hand_without_a_version_is_rebuilt_and_completed(tmp_path):
    """Made from version 3's sql.SCHEMA by hand (user_version 0, as the course did) and
    without its queue_pauses table: upgraded to version 4, the missing table added."""
    path = tmp_path / "hand3.db"
    version_3_table = sql.TABLE_TEMPLATE.format(name="jobs", extra="", states=sql.STATES_IN_LIST)
    make_file(path, version_3_table + OLD_JOB + ";")
    with JobQueue(upgraded(path)) as q:
        assert [job.payload for job in q.claim("w")] == [{"n": 7}]
        assert q.pause("mail")
        create = q.db.execute(sql.JOBS_OBJECT).fetchone()[1]
    assert user_version(path) == sql.SCHEMA_VERSION
    assert f"CHECK ({sql.STATES_COMPARED})" in create


# -- another application's database, and create=False ------------------------------------------


def an_apps_database(path: Path, *, version: int = 0) -> None:
    script = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'ada');"
    make_file(path, script, user_version=version)


def test_another_apps_database_gets_labqueues_tables_as_documented(tmp_path):
    path = tmp_path / "app.db"
    an_apps_database(path)
    with JobQueue(path) as q:
        assert q.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert q.db.execute("SELECT name FROM users").fetchall()[0][0] == "ada"
    assert user_version(path) == sql.SCHEMA_VERSION
    documented = " ".join(JobQueue.__doc__.split())
    assert "labqueue switches it to WAL journal mode and adds its `jobs` table" in documented


def test_another_apps_database_that_uses_user_version_is_refused_untouched(tmp_path):
    path = tmp_path / "app.db"
    an_apps_database(path, version=12)
    before = state_of(path)
    with pytest.raises(ForeignDatabase, match="user_version is 12: it is another application's database"):
        JobQueue(path)
    assert state_of(path) == before


def test_create_false_adds_no_table_to_another_apps_database(tmp_path):
    path = tmp_path / "app.db"
    an_apps_database(path)
    before = state_of(path)
    with pytest.raises(QueueNotFound, match="has no jobs table: create=False opens an existing queue only"):
        JobQueue(path, create=False)
    assert state_of(path) == before


@pytest.mark.parametrize("name", ["typo.db", "no-such-folder/jobs.db"])
def test_create_false_creates_nothing_at_a_missing_path(tmp_path, name):
    with pytest.raises(QueueNotFound, match="does not exist: create=False"):
        JobQueue(tmp_path / name, create=False)
    assert list(tmp_path.iterdir()) == []


def test_create_false_refuses_an_empty_file(tmp_path):
    (tmp_path / "empty.db").touch()
    with pytest.raises(QueueNotFound, match="no jobs table"):
        JobQueue(tmp_path / "empty.db", create=False)
    assert (tmp_path / "empty.db").read_bytes() == b""


@pytest.mark.parametrize("name", ["jobs.db", "a?b#c%20d.db", "with space.db", "ünï.db", "-dash.db"])
def test_create_false_opens_an_existing_queue(tmp_path, name):
    with JobQueue(tmp_path / name) as q:
        q.enqueue("t", {})
    with JobQueue(tmp_path / name, create=False) as q:  # through a file: URI, escaped
        assert q.counts()["queued"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def open_and_enqueue(path: str, start, out) -> None:
    start.wait(120)
    try:
        with JobQueue(path) as q:
            q.enqueue("t", {})
        out.put("ok")
    except Exception as exc:  # sent back to the test, which shows it
        out.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_sixteen_processes_creating_one_queue_at_once_all_succeed(tmp_path):
    """Opening runs the schema's migration under the write lock, with Python-side retries."""
    path = str(tmp_path / "race.db")
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(16), ctx.Queue()
    procs = [ctx.Process(target=open_and_enqueue, args=(path, start, out)) for _ in range(16)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    assert results == ["ok"] * 16
    assert user_version(Path(path)) == sql.SCHEMA_VERSION
    with JobQueue(path) as q:
        assert q.counts()["queued"] == 16


def test_keepalive_never_creates_a_database_at_a_mistyped_path(tmp_path):
    job = Job(1, "t", {}, 1, 3, "token", 0.0)
    with KeepAlive(tmp_path / "tpyo.db", job, lease_seconds=3, interval=0.01) as hb:
        assert hb.lost.wait(30)
    assert isinstance(hb.error, QueueNotFound)
    assert list(tmp_path.iterdir()) == []


# -- text SQLite or the OS cannot hold -------------------------------------------------------


@pytest.mark.parametrize("name", ["jobs\x00.db", "bad\udcff.db", "\ud800.db"])
def test_a_path_with_a_nul_or_unencodable_text_is_refused(tmp_path, name):
    with pytest.raises(InvalidArgument, match="path must"):
        JobQueue(tmp_path / name)
    with pytest.raises(InvalidArgument, match="path must"):
        JobQueue(str(tmp_path / name))
    assert list(tmp_path.iterdir()) == []


BAD_TEXT = ["a\x00b", "\ud800", "report\udcff"]


@pytest.fixture
def q(tmp_path):
    with JobQueue(tmp_path / "jobs.db") as queue:
        yield queue


@pytest.mark.parametrize("text", BAD_TEXT)
def test_a_kind_or_dedupe_key_that_cannot_be_stored_as_text_is_refused(q, text):
    with pytest.raises(InvalidArgument, match="kind must"):
        q.enqueue(text, {})
    with pytest.raises(InvalidArgument, match="kind must"):
        q.enqueue_many(text, [{}])
    with pytest.raises(InvalidArgument, match="dedupe_key must"):
        q.enqueue("t", {}, dedupe_key=text)
    with pytest.raises(InvalidArgument, match="kind must"):
        q.jobs(kind=text)
    assert q.counts()["queued"] == 0


@pytest.mark.parametrize("text", BAD_TEXT)
def test_a_worker_name_that_cannot_be_stored_as_text_is_refused(q, text):
    q.enqueue("t", {})
    for claim in (lambda: q.claim(text), lambda: q.claim_next(text)):
        with pytest.raises(InvalidArgument, match="worker must"):
            claim()
    assert q.counts()["queued"] == 1


def test_a_readable_error_message_names_the_cannot_open_class():
    assert issubclass(CannotOpen, OSError) and issubclass(ForeignJobsTable, ForeignDatabase)


# -- one place for each recurring idea -------------------------------------------------------


def test_the_exhausted_condition_is_written_once_and_used_verbatim(q):
    (index_sql,) = q.db.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs_exhausted'").fetchone()
    assert index_sql.split("WHERE", 1)[1].strip() == sql.EXHAUSTED
    assert f"{sql.EXHAUSTED} AND visible_at <= :now" in sql.RETIRE_EXHAUSTED
    for statement in sql.READY_ROWS_IN.values():  # the batch claim leaves those rows to it
        assert f"NOT ({sql.EXHAUSTED})" in statement


def test_both_claim_paths_take_their_token_from_one_function(q, monkeypatch):
    tokens = iter(["a" * 32, "b" * 32])
    monkeypatch.setattr(core, "new_token", lambda: next(tokens))
    q.enqueue_many("t", [{}, {}])
    assert q.claim("w")[0].lease_token == "a" * 32
    assert q.claim_next("w").lease_token == "b" * 32


def test_the_argument_checks_live_in_validate(monkeypatch, tmp_path):
    from labqueue import validate

    seen = []
    monkeypatch.setattr(validate, "kind", lambda value: seen.append(value) or value)
    with JobQueue(tmp_path / "v.db") as queue:
        queue.enqueue("checked", {})
    assert seen == ["checked"]


def test_opening_reads_the_table_and_the_version_in_one_statement(tmp_path):
    """Read apart, another process could create the table and stamp the version between the
    two reads, and the opener would see a version without a table (a foreign database)."""
    db = sqlite3.connect(tmp_path / "x.db")
    assert db.execute(sql.JOBS_OBJECT_AND_VERSION).fetchone() == (None, None, 0)
    JobQueue(tmp_path / "x.db").close()
    kind, text, version = db.execute(sql.JOBS_OBJECT_AND_VERSION).fetchone()
    assert (kind, version) == ("table", sql.SCHEMA_VERSION) and text.startswith("CREATE TABLE")
    db.close()
