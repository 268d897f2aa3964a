"""Bad input gets a clear error that names the value, and changes nothing."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import datetime

import pytest

from labqueue import (
    CannotOpen,
    ForeignJobsTable,
    InvalidArgument,
    JobQueue,
    NotADatabase,
    PayloadNotSerializable,
    SQLiteTooOld,
    sqlite_report,
)
from labqueue.lab import db_path
from labqueue.versions import require_returning


def count(q: JobQueue) -> int:
    return q.db.execute("SELECT COUNT(id) FROM jobs").fetchone()[0]


def test_payload_that_is_not_json_names_the_type_and_writes_nothing(q):
    with pytest.raises(PayloadNotSerializable, match="datetime"):
        q.enqueue("t", {"when": datetime(2026, 1, 1)})
    with pytest.raises(PayloadNotSerializable, match="Out of range float"):
        q.enqueue("t", {"x": float("nan")})
    assert count(q) == 0


def test_enqueue_many_writes_none_of_a_batch_with_one_bad_payload(q):
    with pytest.raises(PayloadNotSerializable, match=r"payload #2: .*set"):
        q.enqueue_many("t", [{"n": 0}, {"n": 1}, {"n": {1, 2}}, {"n": 3}])
    assert count(q) == 0


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("lease_seconds", 0),
        ("lease_seconds", -1.0),
        ("lease_seconds", float("inf")),
        ("lease_seconds", "30"),
        ("max_attempts", 0),
        ("max_attempts", 2.5),
        ("max_attempts", True),
        ("backoff_base", 0),
        ("backoff_base", -2.0),
        ("backoff_cap", 0),
        ("backoff_cap", float("nan")),
        ("synchronous", "SOMETIMES"),
        ("synchronous", "NORMAL; DROP TABLE jobs"),
    ],
)
def test_bad_settings_are_refused_by_name_and_value(tmp_path, setting, value):
    with pytest.raises(InvalidArgument, match=setting) as err:
        JobQueue(tmp_path / "q.db", **{setting: value})
    assert repr(value) in str(err.value)
    assert not (tmp_path / "q.db").exists()


@pytest.mark.parametrize("limit", [0, -3, 1.5, None, True])
def test_claim_limit_below_one_is_refused(q, limit):
    q.enqueue("t", {})
    with pytest.raises(InvalidArgument, match=rf"limit .* got {limit!r}"):
        q.claim("w", limit=limit)
    assert q.stats()["queued"] == 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"delay": -1}, "delay"), ({"max_attempts": 0}, "max_attempts"), ({"dedupe_key": 7}, "dedupe_key")],
)
def test_bad_enqueue_arguments_are_refused(q, kwargs, name):
    with pytest.raises(InvalidArgument, match=name):
        q.enqueue("t", {}, **kwargs)
    assert count(q) == 0


@pytest.mark.parametrize("kind", ["", None, 3])
def test_kind_must_be_a_non_empty_string(q, kind):
    with pytest.raises(InvalidArgument, match="kind"):
        q.enqueue(kind, {})
    with pytest.raises(InvalidArgument, match="kind"):
        q.enqueue_many(kind, [{}])
    assert count(q) == 0


def test_fail_needs_an_error_string(q):
    q.enqueue("t", {})
    (job,) = q.claim("w")
    with pytest.raises(InvalidArgument, match="ValueError"):
        q.fail(job, ValueError("boom"))
    assert q.db.execute("SELECT state FROM jobs").fetchone()[0] == "running"


def test_requeue_dead_ids_must_be_whole_numbers(q):
    with pytest.raises(InvalidArgument, match="'1'"):
        q.requeue_dead(["1"])


def test_a_missing_folder_is_named_and_not_created(tmp_path):
    missing = tmp_path / "no-such-folder" / "jobs.db"
    with pytest.raises(CannotOpen, match="no-such-folder"):
        JobQueue(missing)
    assert not missing.parent.exists()


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(NotADatabase, match="is a directory"):
        JobQueue(tmp_path)


def test_a_file_that_is_not_sqlite_is_left_byte_for_byte_untouched(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"shopping list: eggs, milk\n" * 100)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(NotADatabase, match="not an SQLite database"):
        JobQueue(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_foreign_jobs_table_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs (title TEXT, id INTEGER PRIMARY KEY)")
    db.execute("INSERT INTO jobs (title) VALUES ('plumber')")
    db.commit()
    db.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ForeignJobsTable, match="missing columns: kind, payload"):
        JobQueue(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_an_sqlite_without_returning_is_refused_naming_the_version():
    with pytest.raises(SQLiteTooOld, match=r"3\.35\.0 or newer .* SQLite 3\.34\.1"):
        require_returning((3, 34, 1))
    require_returning((3, 35, 0))


@pytest.mark.parametrize("name", ["", "a/b", "..", "../escape"])
def test_db_path_wants_a_plain_name(tmp_path, name):
    with pytest.raises(InvalidArgument, match="plain file name"):
        db_path(name, tmp_path)


@pytest.mark.parametrize(
    ("version", "returning", "fixed"),
    [
        ((3, 34, 1), False, False),
        ((3, 35, 0), True, False),
        ((3, 40, 1), True, False),
        ((3, 44, 5), True, False),
        ((3, 44, 6), True, True),
        ((3, 45, 0), True, False),
        ((3, 50, 6), True, False),
        ((3, 50, 7), True, True),
        ((3, 51, 0), True, False),
        ((3, 51, 3), True, True),
        ((3, 52, 0), True, True),
    ],
)
def test_sqlite_report(version, returning, fixed):
    report = sqlite_report(version)
    assert (report.returning, report.wal_reset_fix) == (returning, fixed)
    assert report.sqlite == ".".join(map(str, version))
    assert [r["present"] for r in report.rows()] == ["yes" if returning else "no", "yes" if fixed else "no"]


def test_sqlite_report_describes_this_python():
    report = sqlite_report()
    assert report.sqlite == sqlite3.sqlite_version
    assert report.returning is True
