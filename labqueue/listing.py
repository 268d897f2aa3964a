"""Jobs as an operator reads them: a table, one job whole, or JSON with the payload as
JSON (not a string of JSON inside JSON), times in UTC a person can read.

Text another program stored (a kind, a queue name, an error, a payload) is shown through
``printable``: a control character in it is escaped, never sent to the terminal. The
JSON output escapes such characters by itself."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from typing import Any

from .core import Attempt, attempts_of

TABLE_COLUMNS = (
    "id",
    "kind",
    "queue",
    "state",
    "attempts",
    "created (UTC)",
    "finished (UTC)",
    "worker",
    "last_error",
)
ERROR_WIDTH = 60
# What a terminal acts on instead of showing: the C0 and C1 control characters and DEL (an
# escape sequence starts with one; a newline or a carriage return forges a line), and the
# marks that reorder or break the text after them (bidirectional overrides and isolates,
# the line and paragraph separators).
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` for a terminal: each control character as its Python escape (\\x1b, \\n,
    \\u202e), as a listing already shows bytes that are not UTF-8 (\\xff)."""
    return UNPRINTABLE.sub(lambda found: found[0].encode("unicode_escape").decode("ascii"), text)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters: a longer one ends in an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"


def utc(seconds: float | None) -> str:
    """A moment (seconds since the epoch) as '2026-12-03 23:25:39' UTC; '' for none; a
    stored value that is no date (out of range, not a number) as it is stored."""
    if seconds is None:
        return ""
    shown = _date(seconds)
    return printable(str(seconds)) if shown is None else shown


def _date(seconds: Any) -> str | None:
    """`seconds` since the epoch as a UTC date and time, or None when no date is that."""
    try:
        return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def iso_utc(seconds: float) -> str:
    """A moment as ISO 8601 in UTC, to the millisecond: '2026-12-03T23:25:39.123Z'."""
    moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def decoded_payload(text: str | bytes) -> Any:
    """The stored payload as JSON, or its text as stored when it is not valid JSON (a
    row another program wrote; a BLOB's bytes as text, escaped where they are not UTF-8):
    a listing shows any row."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return _as_text(text)


def _as_text(value: Any) -> Any:
    """A stored value JSON cannot hold (a BLOB another program wrote) as text."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def as_json(record: Any) -> str:
    """One job as one JSON object, its payload and its result as JSON (the result null
    while the job is not done, and for a handler that returned None), `attempt_log` every
    attempt as an object (core.attempts_of: the done or running one too)."""
    entry = dataclasses.asdict(record)
    entry["payload"] = decoded_payload(record.payload)
    entry["result"] = None if record.result is None else decoded_payload(record.result)
    entry["attempt_log"] = [dataclasses.asdict(attempt) for attempt in attempts_of(record)]
    return json.dumps(entry, default=lambda value: str(_as_text(value)))


def table(records: list[Any]) -> list[str]:
    """The job table's lines: a header, then one line per job, the error cut short."""
    rows = [TABLE_COLUMNS, *(_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def _row(r: Any) -> tuple[str, ...]:
    error = printable(str(r.last_error or "").replace("\n", " "))
    return (
        str(r.id),
        *(printable(str(text)) for text in (r.kind, r.queue, r.state)),
        f"{r.attempts}/{r.max_attempts}",
        utc(r.created_at),
        utc(r.finished_at),
        printable(str(r.worker or "")),
        cut(error, ERROR_WIDTH),
    )


def whole(record: Any) -> list[str]:
    """One job, every field on a line of its own: times in UTC (and as stored), the
    payload as indented JSON, the last error in full (a line of it per line)."""
    lines = []
    fields = dataclasses.fields(record)
    width = max(len(field.name) for field in fields) + 2  # the longest name, its colon and a space
    for field in fields:
        value = getattr(record, field.name)
        if field.name in ("payload", "result", "attempt_log"):
            continue
        date = _date(value) if field.name.endswith("_at") and value is not None else None
        shown = "" if value is None else str(value) if date is None else f"{date} UTC ({value})"
        first, *more = shown.split("\n")
        lines.append(f"{field.name + ':':<{width}}{printable(first)}".rstrip())
        lines += [f"{'':<{width}}{printable(line)}".rstrip() for line in more]
    payload = json.dumps(decoded_payload(record.payload), indent=2, ensure_ascii=False)
    lines.append("payload:")
    lines += ["  " + printable(line) for line in payload.split("\n")]  # not splitlines(): \x85 is a character
    return lines + result_and_attempts(record, width)


def result_and_attempts(record: Any, width: int = 20) -> list[str]:
    """A job's result (a done job's: its handler's return value as indented JSON) and every
    attempt (core.attempts_of), each with its worker, times, outcome, error and traceback."""
    lines = []
    if record.state == "done":
        value = None if record.result is None else decoded_payload(record.result)
        lines.append("result:")
        lines += [
            "  " + printable(line) for line in json.dumps(value, indent=2, ensure_ascii=False).split("\n")
        ]
    else:
        lines.append(
            f"result:{'':<{width - 7}}none ({printable(str(record.state))}: only a done job has one)"
        )
    attempts = attempts_of(record)
    lines.append(f"attempt log:{'':<{width - 12}}" + (f"{len(attempts)}" if attempts else "none (never run)"))
    for attempt in attempts:
        lines += _attempt_lines(attempt)
    return lines


def _attempt_lines(attempt: Attempt) -> list[str]:
    """One attempt: its number, outcome, worker and times on a line, then its error and
    traceback indented (each line of them a line)."""
    took = ""
    if attempt.started_at is not None and attempt.finished_at is not None:
        try:
            took = f" ({attempt.finished_at - attempt.started_at:.3f} s)"
        except TypeError:
            took = ""
    head = (
        f"  #{attempt.attempt} {attempt.outcome}, worker {attempt.worker or '?'}, "
        f"{utc(attempt.started_at) or '?'} to {utc(attempt.finished_at) or '...'} UTC{took}"
    )
    lines = [printable(head)]
    if attempt.exception_class_path or attempt.message:
        error = ": ".join(str(part) for part in (attempt.exception_class_path, attempt.message) if part)
        lines += ["    " + printable(line) for line in error.split("\n")]
    if attempt.traceback:
        lines += ["    | " + printable(line) for line in attempt.traceback.rstrip("\n").split("\n")]
    return lines
