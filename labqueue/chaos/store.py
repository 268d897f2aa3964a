"""Where a chaos run keeps its queue and its record: a new SQLite file, or a PostgreSQL
database reached by a postgresql:// URL (the queue in the workers' default schema).

The supervisor reads the jobs and writes its record tables through `Store`, which hides
the two drivers' differences: its SQL is written with ``?`` placeholders, turned into
psycopg's ``%s`` on PostgreSQL, and a transaction is `BEGIN IMMEDIATE` on SQLite and
psycopg's own on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..backends import is_postgres_url
from ..errors import CannotOpen, InvalidArgument
from ..redaction import redact

# The schema a worker started by `python -m labqueue.worker URL ...` uses (PgJobQueue's default).
PG_SCHEMA = "labqueue"
PG_QUEUE_TABLE = "SELECT to_regclass('labqueue.jobs') IS NOT NULL"
PG_SEARCH_PATH = "SET search_path TO labqueue"

Location = str | os.PathLike[str]


def is_postgres(location: Location) -> bool:
    return is_postgres_url(location)


def describe(location: Location) -> str:
    """The location for messages: a URL without its password, or the file's path."""
    return redact(location)


def connect(location: Location) -> Any:
    """An autocommit psycopg connection to the run's database; a failure is CannotOpen,
    its message without the URL's password (libpq's own text may quote the URL)."""
    import psycopg

    try:
        return psycopg.connect(str(location), autocommit=True)
    except psycopg.Error as exc:
        detail = redact(" ".join(str(exc).split()), location)
        raise CannotOpen(f"cannot connect to {describe(location)} ({detail})") from None


def check_new(location: Location) -> None:
    """Refuse a location that already holds something: a file with content, or a database
    whose `labqueue` schema already has a queue (the run would mix its jobs with those)."""
    if is_postgres(location):
        with connect(location) as db:
            if db.execute(PG_QUEUE_TABLE).fetchone()[0]:
                raise InvalidArgument(
                    f"{describe(location)} already holds a queue in schema {PG_SCHEMA!r}; a run needs a "
                    "database without one (--postgres makes a fresh database and drops it afterwards)"
                )
        return
    path = Path(location)
    if path.exists() and path.stat().st_size > 0:
        raise InvalidArgument(f"path must be a new file for the run's queue, but {path} already exists")


class Store:
    """One connection to the run's database, for the supervisor's reads and its record."""

    def __init__(self, location: Location) -> None:
        self.postgres = is_postgres(location)
        if self.postgres:
            self.db: Any = connect(location)
            self.db.execute(PG_SEARCH_PATH)
        else:
            self.db = sqlite3.connect(location, timeout=60, isolation_level=None)

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple]:
        return list(self.db.execute(self._sql(statement), tuple(params)).fetchall())

    def scalar(self, statement: str, params: Sequence[Any] = ()) -> Any:
        row = self.db.execute(self._sql(statement), tuple(params)).fetchone()
        return None if row is None else row[0]

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.db.execute(self._sql(statement), tuple(params))

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(row) for row in rows]
        if rows:
            self.db.cursor().executemany(self._sql(statement), rows)

    def script(self, statements: str) -> None:
        """Several statements separated by semicolons (table definitions, no values)."""
        for statement in filter(str.strip, statements.split(";")):
            self.db.execute(statement)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Store]:
        if self.postgres:
            with self.db.transaction():
                yield self
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
