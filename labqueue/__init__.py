"""labqueue: a durable job queue on one SQLite file.

Leases, fencing tokens, retries with full-jitter backoff, dead letters, heartbeats.
The course that builds it lives in ``labqueue.lab``; the benchmark and the chaos
harness in ``labqueue.bench`` and ``labqueue.chaos``. Nothing here imports them.
"""

__version__ = "0.2.0"  # the one place the version is written (pyproject.toml reads it)

from .backends import open_queue
from .clock import FakeClock
from .core import Attempt, JobResult, Result
from .drivers.sqlite.sql import SCHEMA
from .errors import (
    CannotCancel,
    CannotOpen,
    ConnectionLost,
    EffectEndedTransaction,
    ForeignDatabase,
    ForeignJobsTable,
    HandlersNotLoaded,
    InvalidArgument,
    JobNotFound,
    LabqueueError,
    NoHandlers,
    NoResult,
    NotADatabase,
    PayloadNotSerializable,
    QueueBusy,
    QueueNotFound,
    ResultNotSerializable,
    SchemaTooNew,
    SchemaTooOld,
    ServerUnreachable,
    SQLiteTooOld,
    StorageFull,
    UnknownJobKind,
    WaitTimedOut,
)
from .handlers import handler
from .keepalive import KeepAlive
from .procs import kill_tree, start_worker
from .queue import Job, JobQueue, JobRecord
from .renewal import cancelled
from .versions import sqlite_report

__all__ = [
    "SCHEMA",
    "Attempt",
    "CannotCancel",
    "CannotOpen",
    "ConnectionLost",
    "EffectEndedTransaction",
    "FakeClock",
    "ForeignDatabase",
    "ForeignJobsTable",
    "HandlersNotLoaded",
    "InvalidArgument",
    "Job",
    "JobNotFound",
    "JobQueue",
    "JobRecord",
    "JobResult",
    "KeepAlive",
    "LabqueueError",
    "NoHandlers",
    "NoResult",
    "NotADatabase",
    "PayloadNotSerializable",
    "QueueBusy",
    "QueueNotFound",
    "Result",
    "ResultNotSerializable",
    "SQLiteTooOld",
    "SchemaTooNew",
    "SchemaTooOld",
    "ServerUnreachable",
    "StorageFull",
    "UnknownJobKind",
    "WaitTimedOut",
    "cancelled",
    "handler",
    "kill_tree",
    "open_queue",
    "sqlite_report",
    "start_worker",
]
