"""Open a queue by where it lives: a file path for SQLite, a postgresql:// URL for PostgreSQL.

    q = open_queue("jobs.db", lease_seconds=30)
    q = open_queue("postgresql://app@db.example/jobs", schema="billing")

PostgreSQL needs the optional extra (pip install 'labqueue[postgres]'); psycopg is
imported only when a URL asks for it, so SQLite needs nothing more.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import InvalidArgument, LabqueueError
from .queue import JobQueue
from .redaction import redact  # the one redaction, here where locations are opened

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# Settings only JobQueue takes: on PostgreSQL they would mean nothing.
SQLITE_ONLY_SETTINGS = {"synchronous"}


class BackendMissing(LabqueueError, ImportError):
    """A location needs an optional extra that is not installed."""


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def open_queue(location: str | os.PathLike[str], **settings: Any) -> Any:
    """JobQueue for a path, PgJobQueue for a postgresql:// URL, with the same settings
    (plus `schema=` on PostgreSQL, `synchronous=` on SQLite)."""
    if is_postgres_url(location):
        scheme = str(location).split("://")[0]
        try:
            from .postgres import PgJobQueue
        except ImportError as exc:
            raise BackendMissing(
                f"{scheme}:// needs the PostgreSQL extra: pip install 'labqueue[postgres]' "
                f"({redact(exc, location)})"
            ) from exc
        sqlite_only = sorted(set(settings) & SQLITE_ONLY_SETTINGS)
        if sqlite_only:
            raise InvalidArgument(
                f"{', '.join(sqlite_only)} applies to SQLite files only, not to {scheme}://"
            )
        return PgJobQueue(str(location), **settings)
    if isinstance(location, str) and "://" in location:
        raise InvalidArgument(
            f"unknown kind of queue location {redact(location)!r}: give a file path or a postgresql:// URL"
        )
    schema = settings.get("schema")
    if isinstance(schema, str) and schema.isidentifier():
        # JobQueue's schema= is the DDL it runs (or None); a bare name is PgJobQueue's meaning.
        raise InvalidArgument(
            f"schema={schema!r} names a PostgreSQL schema; an SQLite file holds one queue, so give "
            "each queue its own file instead"
        )
    return JobQueue(location, **settings)
