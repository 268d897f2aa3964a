"""labqueue: a durable job queue on one SQLite file, and the labs that teach it."""

from .clock import FakeClock
from .errors import (
    CannotOpen,
    ForeignJobsTable,
    InvalidArgument,
    LabqueueError,
    NotADatabase,
    PayloadNotSerializable,
    QueueBusy,
    SQLiteTooOld,
    StorageFull,
    UnknownJobKind,
)
from .keepalive import KeepAlive
from .procs import kill_tree, start_worker
from .queue import Job, JobQueue
from .scratch import db_path
from .sql import INDEXES, SCHEMA, TABLE
from .versions import sqlite_report

__all__ = [
    "INDEXES",
    "SCHEMA",
    "TABLE",
    "CannotOpen",
    "FakeClock",
    "ForeignJobsTable",
    "InvalidArgument",
    "Job",
    "JobQueue",
    "KeepAlive",
    "LabqueueError",
    "NotADatabase",
    "PayloadNotSerializable",
    "QueueBusy",
    "SQLiteTooOld",
    "StorageFull",
    "UnknownJobKind",
    "db_path",
    "kill_tree",
    "sqlite_report",
    "start_worker",
]
