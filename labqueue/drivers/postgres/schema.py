"""The queue's schema on PostgreSQL: its name, its creation (one process at a time), the
checks that refuse a `jobs` table that is not labqueue's, and the migrations of older
queues (the SQL is sql.py's: SCHEMA, MIGRATE_V2, PAUSES, MIGRATE_V5, MIGRATE_DEDUPE,
SETTLE). The connection is the driver's.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from ...errors import ForeignJobsTable, QueueNotFound
from ...redaction import redact
from . import sql

DEFAULT_SCHEMA = "labqueue"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def open_schema(db: psycopg.Connection, schema: str, url: str, *, create: bool) -> None:
    """Create the schema, table and indexes if missing (one process at a time; with
    create=False refuse instead), and refuse a `jobs` table that is not labqueue's:
    its columns' names, types and NOT NULLs, its primary key and its unique key are
    read before anything is written, so a foreign table is left untouched."""
    name = pg_sql.Identifier(schema)
    with db.transaction():
        db.execute(sql.LOCK_SCHEMA, {"schema": schema})
        columns = {row[0]: row[1:] for row in db.execute(sql.TABLE_COLUMNS, {"schema": schema})}
        if columns:
            _check_table(db, schema, url, columns)
        elif not create:
            raise QueueNotFound(
                f"there is no queue in schema {schema!r} at {redact(url)}: create=False "
                "opens an existing queue only, so nothing was created"
            )
        if db.execute(sql.SCHEMA_EXISTS, {"schema": schema}).fetchone() is None:
            db.execute(pg_sql.SQL(sql.CREATE_SCHEMA).format(schema=name))  # needs CREATE
        db.execute(pg_sql.SQL("SET LOCAL search_path = {schema}").format(schema=name))
        if not columns:
            db.execute(sql.SCHEMA)
        elif "queue" not in columns:  # a queue of schema version 1: upgraded in place
            db.execute(sql.MIGRATE_V2)
        if columns and "concurrency_key" not in columns:  # before version 5: the key columns added
            db.execute(sql.MIGRATE_V5)
        if columns and db.execute(sql.DEDUPE_INDEX_EXISTS, {"schema": schema}).fetchone() is None:
            db.execute(sql.MIGRATE_DEDUPE)  # the dedupe keys' partial unique index, for the constraint
        table = f"{name.as_string(db)}.queue_pauses"
        exists = db.execute(sql.PAUSES_EXIST, {"table": table}).fetchone()
        assert exists is not None  # to_regclass() answers one row
        if not exists[0]:
            db.execute(sql.PAUSES)  # schema version 3
        install_settle(db, schema)


def install_settle(db: psycopg.Connection, schema: str) -> None:
    """The one-round-trip settle function (sql.SETTLE), unless the schema has it. A role
    that may use the queue but not create in its schema opens it without: the worker then
    reports and claims in a transaction of several statements, as before the function."""
    if has_settle(db, schema):
        return
    try:
        with db.transaction():  # a savepoint: a refusal leaves the open's transaction usable
            db.execute(sql.SETTLE)
    except pg_errors.InsufficientPrivilege:
        pass


def has_settle(db: psycopg.Connection, schema: str) -> bool:
    signature = f"{pg_sql.Identifier(schema).as_string(db)}.{sql.SETTLE_FUNCTION}({sql.SETTLE_ARGUMENTS})"
    found = db.execute(sql.SETTLE_EXISTS, {"signature": signature}).fetchone()
    return bool(found and found[0])


def _check_table(db: psycopg.Connection, schema: str, url: str, columns: dict[str, tuple]) -> None:
    expected = {name: spec for name, spec in sql.COLUMN_TYPES.items()}
    if "queue" not in columns and "priority" not in columns:  # version 1: upgraded after the checks
        expected.pop("queue"), expected.pop("priority")
    if "concurrency_key" not in columns and "concurrency_limit" not in columns:  # before version 5: likewise
        expected.pop("concurrency_key"), expected.pop("concurrency_limit")
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
