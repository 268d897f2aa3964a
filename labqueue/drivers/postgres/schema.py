"""The queue's schema on PostgreSQL: its name, its creation (one process at a time), the
checks that refuse a `jobs` table that is not labqueue's, and the migrations of older
queues (the SQL is sql.py's: SCHEMA, MIGRATE_V2, PAUSES, MIGRATE_V5, MIGRATE_V6,
MIGRATE_DEDUPE, SETTLE). The connection is the driver's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from ...errors import ForeignJobsTable, QueueNotFound
from ...redaction import redact
from . import sql

DEFAULT_SCHEMA = "labqueue"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def open_schema(db: psycopg.Connection, schema: str, url: str, *, create: bool) -> bool:
    """Create the schema, table and indexes if missing (one process at a time; with
    create=False refuse instead), and refuse a `jobs` table that is not labqueue's:
    its columns' names, types and NOT NULLs, its primary key and its unique key are
    read before anything is written, so a foreign table is left untouched.

    A queue that needs nothing is only read: no lock, so workers that start together
    open it together (with the schema's lock, four took turns at 8 ms each). Anything
    to create or migrate is decided again under the lock, which one process at a time
    holds. Returns whether the schema has the settle function (install_settle)."""
    name = pg_sql.Identifier(schema)
    with db.transaction():
        found = _Found.read(db, schema)
        if not found.current():
            db.execute(sql.LOCK_SCHEMA, {"schema": schema})
            found = _Found.read(db, schema)
        columns = found.columns
        if columns:
            _check_table(db, schema, url, columns)
        elif not create:
            raise QueueNotFound(
                f"there is no queue in schema {schema!r} at {redact(url)}: create=False "
                "opens an existing queue only, so nothing was created"
            )
        if found.current():
            return True
        if db.execute(sql.SCHEMA_EXISTS, {"schema": schema}).fetchone() is None:
            db.execute(pg_sql.SQL(sql.CREATE_SCHEMA).format(schema=name))  # needs CREATE
        db.execute(pg_sql.SQL("SET LOCAL search_path = {schema}").format(schema=name))
        if not columns:
            db.execute(sql.SCHEMA)
        elif "queue" not in columns:  # a queue of schema version 1: upgraded in place
            db.execute(sql.MIGRATE_V2)
        if columns and "concurrency_key" not in columns:  # before version 5: the key columns added
            db.execute(sql.MIGRATE_V5)
        if columns and "attempt_log" not in columns:  # before version 6: results and attempts
            db.execute(sql.MIGRATE_V6)
        if columns and not found.dedupe_index:
            db.execute(sql.MIGRATE_DEDUPE)  # the dedupe keys' partial unique index, for the constraint
        if not found.pauses:
            db.execute(sql.PAUSES)  # schema version 3
        return found.settle or install_settle(db)


@dataclass(frozen=True)
class _Found:
    """What a schema holds of the queue: the jobs table's columns (none: no table), and
    whether each later addition is there."""

    columns: dict[str, tuple]
    dedupe_index: bool
    pauses: bool
    settle: bool

    @classmethod
    def read(cls, db: psycopg.Connection, schema: str) -> _Found:
        prefix = f"{pg_sql.Identifier(schema).as_string(db)}."
        columns = {row[0]: row[1:] for row in db.execute(sql.TABLE_COLUMNS, {"table": prefix + "jobs"})}

        def exists(name: str) -> bool:
            return bool(one_row(db.execute(sql.RELATION_EXISTS, {"name": prefix + name}))[0])

        return cls(columns, exists("jobs_dedupe_key"), exists("queue_pauses"), has_settle(db, schema))

    def current(self) -> bool:
        """Nothing to create or migrate: every column, index, table and function is there."""
        every_column = set(sql.COLUMN_TYPES) <= set(self.columns)
        return every_column and self.dedupe_index and self.pauses and self.settle


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
    if not {"started_at", "result", "attempt_log"} & set(columns):  # before version 6: likewise
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
