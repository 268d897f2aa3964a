"""Jobs as an operator reads them: a table, one job whole, or JSON with the payload as
JSON (not a string of JSON inside JSON), times in UTC a person can read."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

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


def utc(seconds: float | None) -> str:
    """A moment (seconds since the epoch) as '2026-12-03 23:25:39' UTC; '' for none."""
    if seconds is None:
        return ""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def iso_utc(seconds: float) -> str:
    """A moment as ISO 8601 in UTC, to the millisecond: '2026-12-03T23:25:39.123Z'."""
    moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def decoded_payload(text: str) -> Any:
    """The stored payload as JSON, or its text as stored when it is not valid JSON (a
    row another program wrote): a listing shows any row."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def as_json(record: Any) -> str:
    """One job as one JSON object, its payload as JSON."""
    entry = dataclasses.asdict(record)
    entry["payload"] = decoded_payload(record.payload)
    return json.dumps(entry)


def table(records: list[Any]) -> list[str]:
    """The job table's lines: a header, then one line per job, the error cut short."""
    rows = [TABLE_COLUMNS, *(_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def _row(r: Any) -> tuple[str, ...]:
    error = (r.last_error or "").replace("\n", " ")
    return (
        str(r.id),
        r.kind,
        r.queue,
        r.state,
        f"{r.attempts}/{r.max_attempts}",
        utc(r.created_at),
        utc(r.finished_at),
        r.worker or "",
        error if len(error) <= ERROR_WIDTH else error[: ERROR_WIDTH - 1] + "…",
    )


def whole(record: Any) -> list[str]:
    """One job, every field on a line of its own: times in UTC (and as stored), the
    payload as indented JSON, the last error in full."""
    lines = []
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if field.name == "payload":
            continue
        if field.name.endswith("_at") and value is not None:
            shown = f"{utc(value)} UTC ({value})"
        else:
            shown = "" if value is None else str(value)
        lines.append(f"{field.name + ':':<14}{shown}".rstrip())
    payload = json.dumps(decoded_payload(record.payload), indent=2, ensure_ascii=False)
    lines.append("payload:")
    lines += ["  " + line for line in payload.splitlines()]
    return lines
