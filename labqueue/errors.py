"""The errors labqueue raises. Each says what was wrong and with which value."""

from __future__ import annotations

import sqlite3
import sys


class LabqueueError(Exception):
    """Base class for every error labqueue raises on purpose."""


class InvalidArgument(LabqueueError, ValueError):
    """An argument is out of range or of the wrong kind; nothing was written."""


class PayloadNotSerializable(LabqueueError, TypeError):
    """A payload cannot be stored as JSON; nothing was written."""


class NotADatabase(LabqueueError):
    """The path is a directory or a file that is not SQLite; it was not touched."""


class CannotOpen(LabqueueError, OSError):
    """The database file cannot be opened, created or written: a missing folder, or a
    read-only folder, database file, -wal or -shm file. The message names which."""


class QueueNotFound(LabqueueError):
    """create=False, and the path holds no labqueue queue (no file, or no jobs table);
    nothing was created or changed."""


class SchemaTooNew(LabqueueError):
    """The file's schema version is newer than this labqueue knows; it was not touched."""


class SchemaTooOld(LabqueueError):
    """The queue's schema is older than this labqueue runs on; it was not touched. Opening
    never migrates an existing queue: `labqueue migrate DB|URL` does, while it runs."""


class ForeignDatabase(LabqueueError):
    """The file belongs to another application in a way labqueue cannot share; it was
    not touched."""


class ForeignJobsTable(ForeignDatabase):
    """The database has a `jobs` table that is not labqueue's; it was not touched."""


class SQLiteTooOld(LabqueueError):
    """This SQLite build lacks a feature the queue needs."""


class QueueBusy(LabqueueError):
    """Another connection held the write lock past the busy timeout; nothing changed."""


class ConnectionLost(LabqueueError, ConnectionError):
    """The connection to a database server was lost (a restart, a terminated session, a
    network failure). What the transaction wrote was rolled back unless its COMMIT had
    reached the server; every lease stays fenced, so reconnect() and retrying is safe."""


class ServerUnreachable(CannotOpen, ConnectionLost):
    """A database server could not be reached when a queue was opened (it is down,
    restarting, or the network is): a CannotOpen that a worker starting up waits out and
    retries, as a running one does a ConnectionLost (labqueue.reconnect)."""


class StorageFull(LabqueueError):
    """The database or disk is full; the transaction was rolled back."""


class EffectEndedTransaction(LabqueueError):
    """A completion's effect committed, rolled back or began a transaction itself; the
    completion and the effect's writes were rolled back together. `job_id` names the job
    whose effect it was, so a worker reporting a batch fails that job and no other."""

    def __init__(self, message: str, job_id: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class NoHandlers(LabqueueError):
    """A worker was asked to start with no handler registered: it would claim jobs it
    cannot run. Nothing was claimed."""


class HandlersNotLoaded(LabqueueError, ImportError):
    """A --handlers module could not be imported: it is not found, has a syntax error, or
    raised while it ran. The message names the module and the cause; nothing was claimed."""


class UnknownJobKind(LabqueueError):
    """No handler is registered for a job's kind: batch.run_handler was handed such a
    job. A worker never runs one: it gives it back (labqueue.unknown_kinds)."""


class JobNotFound(LabqueueError, LookupError):
    """No job has this id (it never existed, or a purge removed it)."""


class CannotCancel(LabqueueError):
    """The job has finished (done, dead or already cancelled): nothing was changed."""


class ResultNotSerializable(LabqueueError, TypeError):
    """A handler returned a value that cannot be stored as its job's result: not JSON, or
    longer than core.MAX_RESULT_CHARS as JSON text. The attempt fails with this error."""


class NoResult(LabqueueError):
    """The job has no return value to read: it has not finished, or it finished without
    succeeding (dead, cancelled). A job that succeeded and returned None has one: None."""


class WaitTimedOut(LabqueueError, TimeoutError):
    """A wait for a job to finish ran out of time; the job is still queued or running."""


def is_database_error(exc: BaseException) -> bool:
    """Whether `exc` is a driver's own error, one labqueue has no name for: sqlite3's, or
    psycopg's when it is loaded (not imported here: it is an optional extra)."""
    psycopg = sys.modules.get("psycopg")
    return isinstance(exc, sqlite3.Error) or (psycopg is not None and isinstance(exc, psycopg.Error))
