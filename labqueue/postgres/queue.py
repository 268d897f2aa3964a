"""PgJobQueue: the queue in one schema of a PostgreSQL database, for workers on several
machines (labqueue.core's rules over labqueue.drivers.postgres)."""

from __future__ import annotations

import random
from collections.abc import Callable

import psycopg
from psycopg import sql as pg_sql

from ..core import Clock, settings
from ..drivers.postgres import sql
from ..drivers.postgres.driver import PgDriver
from ..drivers.postgres.schema import DEFAULT_SCHEMA, SCHEMA_NAME
from ..errors import InvalidArgument
from ..redaction import redact
from ..roles import Queue
from ..validate import DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP, DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS

__all__ = ["DEFAULT_SCHEMA", "PgJobQueue", "drop_schema"]


class PgJobQueue(Queue):
    """The queue in one schema of a PostgreSQL database. Open one per process or thread.

    Deadlines are read from the server's clock (statement_timestamp()), so workers on
    machines whose clocks disagree agree on every lease and retry time. Pass `clock=`
    (a FakeClock) to drive time yourself instead: its reading is sent with every
    statement. As on SQLite, complete, fail and heartbeat check the lease token (and, for a
    job with a concurrency key, its deadline): a replaced worker's report is refused however
    late or early it comes.
    After ConnectionLost (a server restart, a terminated session) call reconnect();
    the worker does so on its own, with backoff."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lease_seconds: float = DEFAULT_LEASE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
        timeout: float = 30.0,
        create: bool = True,
        wake: bool = True,
    ) -> None:
        checked = settings(lease_seconds, max_attempts, backoff_base, backoff_cap, timeout, rng)
        driver = PgDriver(
            url, schema=schema, clock=clock, timeout=checked["timeout"], create=create, wake=wake
        )
        super().__init__(driver, checked)
        self._pg = driver
        self.keep_secret(url)  # a handler's error that quotes this URL is stored without its password

    @property
    def url(self) -> str:
        """The server's URL, as given (print it through ``labqueue.redaction.redact``)."""
        return self._pg.url

    @property
    def schema(self) -> str:
        """The PostgreSQL schema this queue lives in (``schema=``, default ``labqueue``)."""
        return self._pg.schema

    def __enter__(self) -> PgJobQueue:
        return self

    def __repr__(self) -> str:
        return f"PgJobQueue({redact(self.url)!r}, schema={self.schema!r}, lease_seconds={self.lease_seconds})"


def drop_schema(url: str, schema: str) -> None:
    """Delete a queue's schema and everything in it (its jobs, and any table its effects made)."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"not a queue schema name: {schema!r}")
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(pg_sql.SQL(sql.DROP_SCHEMA).format(schema=pg_sql.Identifier(schema)))
