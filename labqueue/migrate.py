"""Upgrading a queue's schema, only when told: ``labqueue migrate DB|URL``.

Opening a queue never migrates it (a new queue is still created on first open). A queue
whose schema is older than this labqueue runs on is refused with SchemaTooOld, which
names this command; one newer than it knows, with SchemaTooNew. `migrate()` applies the
pending steps while the queue runs:

- SQLite: each step of drivers/sqlite/sql.py's MIGRATIONS in one write transaction
  (BEGIN IMMEDIATE: producers and workers wait for it, up to their own timeouts), the
  version in PRAGMA user_version. Steps 2 and 4 rebuild the jobs table, copying every
  row: on a large queue, choose a quiet moment (`--dry-run` says which steps are pending).
- PostgreSQL: the steps of drivers/postgres/schema.py's STEPS, each in a short
  transaction under a bounded lock_timeout (tried again when a lock is held longer),
  indexes built CONCURRENTLY, each applied version recorded in the schema's
  labqueue_migrations table. Expand steps are ones an older labqueue can run beside;
  contract steps (`contract=True`, `--contract`) only once every process runs this one.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import validate
from .backends import is_postgres_url
from .errors import InvalidArgument, QueueBusy, QueueNotFound
from .lock_retry import with_lock_retries
from .redaction import redact

DEFAULT_LOCK_TIMEOUT = 5.0  # seconds a step waits for a lock before it backs off and tries again
DEFAULT_ATTEMPTS = 10


@dataclass(frozen=True)
class Plan:
    """Where a queue's schema stands: the versions applied, and the steps `migrate` takes
    (or took), each (version, what it does, "expand" or "contract")."""

    where: str
    applied: tuple[int, ...]
    steps: tuple[tuple[int, str, str], ...]
    known: int  # the newest version this labqueue knows
    required: int  # the version this labqueue runs on (and every one before it)

    def lines(self) -> list[str]:
        """Where the schema stands and each pending step, for --status and --dry-run."""
        head = f"{self.where}: schema version {max(self.applied, default=0)}"
        head += f" (this labqueue runs on {self.required}, knows up to {self.known})"
        if not self.steps:
            return [head, "nothing to do: the schema is current"]
        return [head] + [f"pending version {v} ({kind}): {name}" for v, name, kind in self.steps]

    def summary(self) -> str:
        """One line after the steps were taken."""
        before = max(self.applied, default=0)
        if not self.steps:
            return f"{self.where}: schema version {before}, nothing to do"
        return f"{self.where}: schema version {before} -> {max(v for v, _, _ in self.steps)}"


def migrate(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    contract: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
    schema: str | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Plan:
    """Apply the queue's pending schema steps (with `dry_run`, only say which) and return
    the plan: the versions applied before and the steps taken. `contract` also takes the
    steps an older labqueue cannot run beside (PostgreSQL's; SQLite has none). A step
    waits at most `lock_timeout` seconds for a lock, then backs off and tries again, up to
    `attempts` times."""
    validate.flag("dry_run", dry_run)
    validate.flag("contract", contract)
    lock_timeout = validate.seconds("lock_timeout", lock_timeout)
    attempts = validate.whole("attempts", attempts, low=1, high=1000)
    if is_postgres_url(location):
        return _migrate_postgres(str(location), dry_run, contract, lock_timeout, attempts, schema, say)
    if schema is not None:
        raise InvalidArgument("schema= names a PostgreSQL schema; an SQLite file holds one queue")
    return _migrate_sqlite(Path(validate.db_path(location)), dry_run, lock_timeout, attempts, say)


def _migrate_sqlite(path: Path, dry_run: bool, lock_timeout: float, attempts: int, say: Callable) -> Plan:
    from .drivers.sqlite import sql
    from .drivers.sqlite.driver import is_busy
    from .drivers.sqlite.schema import check_existing, check_is_sqlite_file, file_version
    from .drivers.sqlite.schema import migrate as run_steps

    check_is_sqlite_file(path)
    if not path.is_file():
        raise QueueNotFound(f"{path} does not exist: there is no queue to migrate (nothing was created)")
    db = sqlite3.connect(
        path.absolute().as_uri() + "?mode=rw", uri=True, isolation_level=None, timeout=lock_timeout
    )
    with contextlib.closing(db):
        check_existing(db, path, create=False)  # another application's file, a newer queue: refused
        version = file_version(db)
        steps = tuple((v + 1, sql.MIGRATION_NAMES[v], "expand") for v in range(version, sql.SCHEMA_VERSION))
        plan = Plan(str(path), tuple(range(1, version + 1)), steps, sql.SCHEMA_VERSION, sql.SCHEMA_VERSION)
        if dry_run or not steps:
            return plan
        try:
            with_lock_retries(
                lambda: db.execute("BEGIN IMMEDIATE"),
                locked=is_busy,
                attempts=attempts,
                waited=f"the write lock was held longer than {lock_timeout:g} s; trying again",
                say=say,
            )
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            raise QueueBusy(f"{path}: the write lock stayed taken; nothing was migrated") from exc
        try:
            run_steps(db, path)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        for v, name, _ in steps:
            say(f"applied version {v}: {name}")
    return plan


def _migrate_postgres(
    url: str,
    dry_run: bool,
    contract: bool,
    lock_timeout: float,
    attempts: int,
    schema: str | None,
    say: Callable,
) -> Plan:
    from .drivers.postgres.driver import PgDriver
    from .drivers.postgres.schema import DEFAULT_SCHEMA, KNOWN, REQUIRED, migrate_schema

    schema = DEFAULT_SCHEMA if schema is None else schema
    driver = PgDriver(
        url, schema=schema, clock=None, timeout=lock_timeout, create=False, wake=False, migrating=True
    )
    try:
        applied, steps = migrate_schema(
            driver.db,
            schema,
            url,
            contract=contract,
            dry_run=dry_run,
            lock_timeout=lock_timeout,
            attempts=attempts,
            say=say,
        )
    finally:
        driver.close()
    return Plan(
        f"{redact(url)} (schema {schema})",
        tuple(sorted(applied)),
        tuple((s.version, s.name, s.kind) for s in steps),
        KNOWN,
        REQUIRED,
    )
