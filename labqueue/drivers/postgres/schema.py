"""The queue's schema on PostgreSQL: its name, its creation (one process at a time), the
checks that refuse a `jobs` table that is not labqueue's, and the migrations of older
queues, which `labqueue migrate` applies (never an open): each step recorded in the
schema's labqueue_migrations table. The SQL is sql.py's (SCHEMA, MIGRATE_V2, PAUSES,
ADD_KEY_COLUMNS, MIGRATE_RESULTS and the indexes built CONCURRENTLY, SETTLE). The
connection is the driver's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from ...errors import ForeignJobsTable, QueueNotFound, SchemaTooNew, SchemaTooOld
from ...lock_retry import with_lock_retries
from ...redaction import redact
from . import sql

DEFAULT_SCHEMA = "labqueue"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def open_schema(db: psycopg.Connection, schema: str, url: str, *, create: bool) -> bool:
    """Create the schema, table and indexes if missing (one process at a time; with
    create=False refuse instead), and refuse a `jobs` table that is not labqueue's:
    its columns' names, types and NOT NULLs, its primary key and its unique key are
    read before anything is written, so a foreign table is left untouched.

    An existing queue is never migrated here: one whose schema lacks a step this labqueue
    runs on is refused (SchemaTooOld, naming `labqueue migrate`), one with a step it does
    not know likewise (SchemaTooNew). Only the settle function (install_settle) is added
    where it is missing, by an opener that may create (a worker, a producer); with
    create=False nothing is written. A queue that needs nothing is only read: no lock, so
    workers that start together open it together. Returns whether the schema has the
    settle function."""
    name = pg_sql.Identifier(schema)
    with db.transaction():
        found = _Found.read(db, schema)
        if not found.columns:
            if not create:
                raise QueueNotFound(
                    f"there is no queue in schema {schema!r} at {redact(url)}: create=False "
                    "opens an existing queue only, so nothing was created"
                )
            db.execute(sql.LOCK_SCHEMA, {"schema": schema})
            found = _Found.read(db, schema)
            if not found.columns:
                if db.execute(sql.SCHEMA_EXISTS, {"schema": schema}).fetchone() is None:
                    db.execute(pg_sql.SQL(sql.CREATE_SCHEMA).format(schema=name))  # needs CREATE
                db.execute(pg_sql.SQL("SET LOCAL search_path = {schema}").format(schema=name))
                db.execute(sql.SCHEMA)
                _record(db, [step.version for step in STEPS])
                return install_settle(db)
        _check_table(db, schema, url, found.columns)
        check_version(found.applied, f"schema {schema!r} at {redact(url)}", url)
        if found.settle or not create:
            return found.settle
        db.execute(sql.LOCK_SCHEMA, {"schema": schema})
        if has_settle(db, schema):
            return True
        db.execute(pg_sql.SQL("SET LOCAL search_path = {schema}").format(schema=name))
        return install_settle(db)


@dataclass(frozen=True)
class Step:
    """One schema version: what it adds, and whether older labqueues can run beside it
    ("expand") or only newer ones ("contract")."""

    version: int
    name: str
    kind: str = "expand"


STEPS: tuple[Step, ...] = (
    Step(1, "the jobs table and its indexes"),
    Step(2, "priority, queue and the 'cancelled' state"),
    Step(3, "the queue_pauses table"),
    Step(4, "(SQLite's states CHECK: nothing to do on PostgreSQL)"),
    Step(5, "the concurrency_key and concurrency_limit columns and the jobs_key_held index"),
    Step(6, "the started_at, result and attempt_log columns (jobs and jobs_archive)"),
    Step(7, "the dedupe keys' partial unique index, beside the UNIQUE constraint"),
    Step(8, "the UNIQUE (dedupe_key) constraint dropped (older labqueues cannot enqueue after)", "contract"),
)
KNOWN = STEPS[-1].version
REQUIRED = 6  # the newest step this labqueue's statements need


def check_version(applied: frozenset[int], where: str, url: str) -> None:
    """Refuse a queue this labqueue cannot run on: a needed step missing, or one unknown."""
    unknown = sorted(v for v in applied if v > KNOWN)
    if unknown:
        raise SchemaTooNew(
            f"{where} has labqueue schema version {max(unknown)}; this labqueue knows versions up to "
            f"{KNOWN}: upgrade labqueue to open it (nothing was changed)"
        )
    missing = [v for v in range(1, REQUIRED + 1) if v not in applied]
    if missing:
        raise SchemaTooOld(
            f"{where} lacks labqueue schema version {missing[0]} ({STEPS[missing[0] - 1].name}); this "
            f"labqueue runs on version {REQUIRED} and later: run `labqueue migrate {redact(url)}` to "
            "upgrade it (nothing was changed)"
        )


def _record(db: psycopg.Connection, versions: list[int]) -> None:
    """Write the versions applied into the schema's labqueue_migrations (the search_path names it)."""
    db.execute(sql.MIGRATIONS_TABLE)
    for version in versions:
        db.execute(sql.RECORD_MIGRATION, {"version": version, "name": STEPS[version - 1].name})


def pending(applied: frozenset[int], *, contract: bool) -> list[Step]:
    """The steps `migrate` takes: every expand step missing, and with `contract` the
    contract steps too."""
    return [s for s in STEPS if s.version not in applied and (s.kind == "expand" or contract)]


def migrate_schema(
    db: psycopg.Connection,
    schema: str,
    url: str,
    *,
    contract: bool,
    dry_run: bool,
    lock_timeout: float,
    attempts: int,
    sleep: Callable[[float], None] = time.sleep,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[frozenset[int], list[Step]]:
    """Take the queue's schema through its pending steps (see `pending`), each in its own
    short transaction under `lock_timeout` (an index built CONCURRENTLY, outside one), a
    step that meets a lock held too long tried again up to `attempts` times, and record
    each step as it lands. Returns the steps applied before and the steps taken (or, with
    `dry_run`, to take). The connection is autocommit, as the driver opens it."""
    found = _Found.read(db, schema)
    if not found.columns:
        raise QueueNotFound(f"there is no queue in schema {schema!r} at {redact(url)}: nothing to migrate")
    _check_table(db, schema, url, found.columns)
    if any(v > KNOWN for v in found.applied):
        check_version(found.applied, f"schema {schema!r} at {redact(url)}", url)
    todo = pending(found.applied, contract=contract)
    if dry_run:
        return found.applied, todo
    db.execute(pg_sql.SQL("SET search_path = {schema}").format(schema=pg_sql.Identifier(schema)))
    db.execute(sql.SET_SESSION_LOCK_TIMEOUT, {"ms": str(max(1, round(lock_timeout * 1000)))})
    for step in todo:
        with_lock_retries(
            partial(_apply, db, step, schema, found.applied),
            locked=lambda exc: isinstance(exc, pg_errors.LockNotAvailable),
            attempts=attempts,
            waited=f"version {step.version}: a lock was held longer than {lock_timeout:g} s; trying again",
            say=say,
            sleep=sleep,
        )
        say(f"applied version {step.version}: {step.name}")
    with db.transaction():
        _record(db, sorted(found.applied))  # the steps read from the catalog, written down once
        db.execute(sql.LOCK_SCHEMA, {"schema": schema})
        if not has_settle(db, schema):
            install_settle(db)
    return found.applied, todo


def _apply(db: psycopg.Connection, step: Step, schema: str, applied: frozenset[int]) -> None:
    """One step: its short transactional part under the session's lock_timeout, and its
    index built CONCURRENTLY (writes go on meanwhile), then its row in labqueue_migrations."""
    prefix = f"{pg_sql.Identifier(schema).as_string(db)}."
    if step.version == 2:
        with db.transaction():
            db.execute(sql.MIGRATE_V2)
    elif step.version == 3:
        with db.transaction():
            db.execute(sql.PAUSES)
    elif step.version == 5:
        with db.transaction():
            db.execute(sql.ADD_KEY_COLUMNS)
        _index_concurrently(db, sql.KEY_HELD_INDEX_CONCURRENTLY, prefix + "jobs_key_held")
    elif step.version == 6:
        with db.transaction():
            db.execute(sql.MIGRATE_RESULTS)
    elif step.version == 7:
        _index_concurrently(db, sql.DEDUPE_INDEX_CONCURRENTLY, prefix + "jobs_dedupe_key")
    elif step.version == 8:
        with db.transaction():
            db.execute(sql.DROP_DEDUPE_CONSTRAINT)
    with db.transaction():
        _record(db, sorted(applied | {step.version}))


def _index_concurrently(db: psycopg.Connection, statement: str, qualified: str) -> None:
    """CREATE INDEX CONCURRENTLY, after dropping what a failed try of it left (an index
    there but not valid, which IF NOT EXISTS would otherwise keep)."""
    valid = db.execute(sql.INDEX_VALID, {"name": qualified}).fetchone()
    if valid is not None and not valid[0]:
        db.execute(pg_sql.SQL(sql.DROP_INDEX_CONCURRENTLY).format(name=pg_sql.SQL(qualified)))
    db.execute(statement)


@dataclass(frozen=True)
class _Found:
    """What a schema holds of the queue: the jobs table's columns (none: no table), the
    schema versions applied, and whether the settle function is there."""

    columns: dict[str, tuple]
    applied: frozenset[int]
    settle: bool

    @classmethod
    def read(cls, db: psycopg.Connection, schema: str) -> _Found:
        prefix = f"{pg_sql.Identifier(schema).as_string(db)}."
        columns = {row[0]: row[1:] for row in db.execute(sql.TABLE_COLUMNS, {"table": prefix + "jobs"})}
        if not columns:
            return cls(columns, frozenset(), False)

        def exists(name: str) -> bool:
            return bool(one_row(db.execute(sql.RELATION_EXISTS, {"name": prefix + name}))[0])

        if exists("labqueue_migrations"):
            named = pg_sql.SQL(prefix + "labqueue_migrations")
            table = pg_sql.SQL(sql.MIGRATIONS_APPLIED_FROM).format(table=named)
            applied = frozenset(row[0] for row in db.execute(table))
        else:
            applied = cls.inferred(db, prefix, columns, exists)
        return cls(columns, applied, has_settle(db, schema))

    @staticmethod
    def inferred(
        db: psycopg.Connection, prefix: str, columns: dict[str, tuple], exists: Callable[[str], bool]
    ) -> frozenset[int]:
        """The steps a schema made before labqueue_migrations has taken, read from the
        catalog: what each step adds is there."""
        applied = {1}
        if "queue" in columns:
            applied.add(2)
        if exists("queue_pauses"):
            applied |= {3, 4}
        if "concurrency_key" in columns and exists("jobs_key_held"):
            applied.add(5)
        if "attempt_log" in columns:
            applied.add(6)
        if exists("jobs_dedupe_key"):
            applied.add(7)
            if not one_row(db.execute(sql.DEDUPE_CONSTRAINT_EXISTS, {"table": prefix + "jobs"}))[0]:
                applied.add(8)
        return frozenset(applied)


def one_row(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The row of a statement that always answers one (an aggregate, a clock, EXISTS)."""
    row = cursor.fetchone()
    assert row is not None, "the statement answered no row"
    return row


def install_settle(db: psycopg.Connection) -> bool:
    """Install the one-round-trip settle function (sql.SETTLE) in the schema the
    search_path names, which open_schema found without it. A role that may use the queue
    but not create in its schema opens it without: the worker then reports and claims in
    a transaction of several statements, as before the function. Returns whether the
    schema has it now."""
    try:
        with db.transaction():  # a savepoint: a refusal leaves the open's transaction usable
            db.execute(sql.SETTLE)
    except pg_errors.InsufficientPrivilege:
        return False
    return True


def has_settle(db: psycopg.Connection, schema: str) -> bool:
    signature = f"{pg_sql.Identifier(schema).as_string(db)}.{sql.SETTLE_FUNCTION}({sql.SETTLE_ARGUMENTS})"
    return bool(one_row(db.execute(sql.SETTLE_EXISTS, {"signature": signature}))[0])


def _check_table(db: psycopg.Connection, schema: str, url: str, columns: dict[str, tuple]) -> None:
    expected = {name: spec for name, spec in sql.COLUMN_TYPES.items()}
    if "queue" not in columns and "priority" not in columns:  # version 1: upgraded after the checks
        expected.pop("queue"), expected.pop("priority")
    if "concurrency_key" not in columns and "concurrency_limit" not in columns:  # before version 5: likewise
        expected.pop("concurrency_key"), expected.pop("concurrency_limit")
    if not {"started_at", "result", "attempt_log"} & set(columns):  # before version 6: refused later
        expected.pop("started_at"), expected.pop("result"), expected.pop("attempt_log")
    missing = [name for name in expected if name not in columns]
    problems = [f"missing columns: {', '.join(missing)}"] if missing else []
    for name, (kind, required) in expected.items():
        if name in columns:
            found, nullable, _ = columns[name]
            if found != kind:
                problems.append(f"column {name} is {found}, labqueue's is {kind}")
            if required and nullable:
                problems.append(f"column {name} may be NULL, labqueue's is NOT NULL")
    problems += [
        f"its extra column {name} is NOT NULL without a default, so labqueue could not add a job"
        for name, (_, nullable, has_default) in columns.items()
        if name not in expected and not nullable and not has_default
    ]
    keys = {(bool(primary), tuple(cols)) for primary, cols in db.execute(sql.UNIQUE_KEYS, {"schema": schema})}
    if (True, ("id",)) not in keys:
        problems.append("its primary key is not (id)")
    if (False, ("dedupe_key",)) not in keys:
        problems.append("it has no UNIQUE (dedupe_key)")
    if problems:
        raise ForeignJobsTable(
            f"schema {schema!r} at {redact(url)} already has a 'jobs' table that is not "
            f"labqueue's ({'; '.join(problems)}); it was not changed"
        )
