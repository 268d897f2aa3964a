"""Rows and parameters as SQLite and the queue each want them: ids named by a run or a list,
queue names as JSON arrays, columns whose text another program stored as invalid UTF-8,
and a stored row as a JobRecord."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ...core import JobRecord, Unreadable
from . import sql


def naming(ids: list[int], listed: Callable[[int], str], ranged: str) -> list[tuple[str, Sequence[int]]]:
    """`ids` in chunks of at most sql.IDS_PER_STATEMENT, each with the statement that names
    it: `ranged` and (first, last) for a run of consecutive ids (sql.id_run), otherwise
    `listed(count)` and the ids themselves."""
    named: list[tuple[str, Sequence[int]]] = []
    for start in range(0, len(ids), sql.IDS_PER_STATEMENT):
        chunk = ids[start : start + sql.IDS_PER_STATEMENT]
        run = sql.id_run(chunk)
        named.append((listed(len(chunk)), chunk) if run is None else (ranged, run))
    return named


def sqlite_params(params: dict[str, Any]) -> dict[str, Any]:
    """Lists of queue names travel to SQLite as JSON arrays (read with json_each): `params`
    (a fresh dict, from a record's params()) with them converted in place."""
    for name in ("queues", "paused"):
        names = params[name]
        if names is not None:  # the common case is neither: nothing to convert
            params[name] = json.dumps(names)
    return params


def raw_text(value: bytes | None, stored_as: str) -> str | bytes | Unreadable | None:
    """A column read as bytes: its text if it is valid UTF-8 text, else what it is."""
    if stored_as == "blob":
        return value
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unreadable(f"stored as text that is not valid UTF-8 ({exc.reason} at byte {exc.start})")


def record(row: sqlite3.Row) -> JobRecord:
    """A row as a JobRecord; a column a file opened as it is (schema=None) lacks is None."""
    names = row.keys()
    return JobRecord(**{name: row[name] for name in sql.COLUMNS if name in names})


def lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")
