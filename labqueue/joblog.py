"""The worker's log lines about jobs: the same fields on every one, text or JSON.

Every line about a job carries ``job_id``, ``kind``, ``queue``, ``attempt``, ``worker``
and ``duration_ms`` (as ``extra=`` fields of the log record), so an operator can grep
or query a job's whole story. A line is stamped with the moment it happened: the
worker reports a batch in one transaction, so a job that failed early in a batch is
logged after the commit, but with the time it failed (the ``at`` field), not the
commit's. Successes are logged at DEBUG, or at INFO with ``--log-success``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from .redaction import redact

JOB_FIELDS = ("job_id", "kind", "queue", "attempt", "worker", "duration_ms")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s"

# The level a job's success is logged at: DEBUG unless --log-success raises it to INFO.
success_level = logging.DEBUG

# What became of a job a worker reported, as a log line about it ends: "...; <words>".
OUTCOME_WORDS = {
    "queued": "it will be retried after a backoff",
    "dead": "no attempts left: it is dead",
    "lost": "the lease was lost (another worker holds the job now); the result was discarded",
    "cancelled": "it was cancelled while it ran; its result was discarded",
}


def outcome_words(outcome: str | None) -> str:
    """OUTCOME_WORDS' sentence for `outcome`; for None (a failure the fence refused: the
    job was no longer the reporting worker's) one that says so."""
    return OUTCOME_WORDS[outcome] if outcome else "it was no longer this worker's"


def job_fields(
    job: Any,
    *,
    worker: str | None,
    queue: str | None,
    duration_s: float | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    """The `extra=` of a log record about `job` (a labqueue Job): its fields, and `at`,
    the time (time.time()) the line's event happened, when that was before the log call."""
    fields: dict[str, Any] = {
        "job_id": job.id,
        "kind": job.kind,
        "queue": queue,
        "attempt": job.attempts,
        "worker": worker,
        "duration_ms": None if duration_s is None else round(duration_s * 1000, 3),
    }
    if at is not None:
        fields["at"] = at
    return fields


def queue_of(q: Any, job_id: int) -> str | None:
    """The named queue of a job, for its log line: one read by id, made only for a line
    that will be written (a claimed Job does not carry its queue). Never raises."""
    try:
        record = q.job(job_id)
    except Exception:  # a log line never stops the worker
        return None
    return None if record is None else record.queue


def _stamp(record: logging.LogRecord) -> None:
    """Give the record the time its event happened, if it says so."""
    at = getattr(record, "at", None)
    if isinstance(at, float):
        record.created = at
        record.msecs = (at - int(at)) * 1000


class TextFormatter(logging.Formatter):
    """The text line, with the job's fields after the message as key=value; any URL's
    password and password parameter masked (a handler's error may quote one)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        _stamp(record)
        line = super().format(record)
        if hasattr(record, "job_id"):
            pairs = " ".join(f"{name}={getattr(record, name)}" for name in JOB_FIELDS)
            head, _, rest = line.partition("\n")  # a traceback stays below the line
            line = f"{head} [{pairs}]" + (f"\n{rest}" if rest else "")
        return redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per log record: time, level, logger, pid, message, the job's fields
    when the record is about a job, and the traceback if any; any URL's password and password
    parameter masked in the message and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        _stamp(record)
        entry: dict[str, Any] = {
            "time": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": redact(record.getMessage()),
        }
        if hasattr(record, "job_id"):
            entry.update({name: getattr(record, name) for name in JOB_FIELDS})
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry)


def configure_logging(level: str = "INFO", log_format: str = "text", *, log_success: bool = False) -> None:
    """Log records of this process to stderr, as text lines or JSON lines; successes at
    INFO when `log_success`, else DEBUG."""
    global success_level
    success_level = logging.INFO if log_success else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
