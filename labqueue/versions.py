"""Which SQLite this Python links, and whether it has what the queue needs."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass

from .errors import SQLiteTooOld

Version = tuple[int, int, int]
RETURNING_SINCE: Version = (3, 35, 0)


def has_returning(version: Version) -> bool:
    """RETURNING, which every claim uses, arrived in SQLite 3.35.0."""
    return tuple(version) >= RETURNING_SINCE


def has_wal_reset_fix(version: Version) -> bool:
    """The WAL-reset bug (two connections writing or checkpointing at the same
    instant) is fixed in 3.51.3, and in the 3.50.7 and 3.44.6 backports."""
    v = tuple(version)
    return v >= (3, 51, 3) or (3, 50, 7) <= v < (3, 51, 0) or (3, 44, 6) <= v < (3, 45, 0)


def require_returning(version: Version | None = None) -> None:
    version = sqlite3.sqlite_version_info if version is None else version
    if not has_returning(version):
        shown = ".".join(map(str, version))
        raise SQLiteTooOld(
            f"labqueue needs SQLite 3.35.0 or newer for RETURNING; this Python links SQLite {shown}"
        )


@dataclass(frozen=True)
class SQLiteReport:
    python: str
    sqlite: str
    returning: bool
    wal_reset_fix: bool

    def rows(self) -> list[dict[str, str]]:
        """The report as a small table: each check, its answer, and what it means."""
        return [
            {
                "check": "RETURNING (SQLite 3.35.0+)",
                "present": "yes" if self.returning else "no",
                "what it means": (
                    "claims are one atomic statement; the course runs"
                    if self.returning
                    else "the queue cannot run: install a Python that links SQLite 3.35.0 or newer"
                ),
            },
            {
                "check": "WAL-reset fix (3.51.3+, or 3.50.7 / 3.44.6)",
                "present": "yes" if self.wal_reset_fix else "no",
                "what it means": (
                    "safe for several processes writing one file"
                    if self.wal_reset_fix
                    else "fine for these labs; in production use a fixed SQLite build "
                    "(a newer Python, or the pysqlite3-binary package)"
                ),
            },
        ]


def sqlite_report(version: Version | None = None, version_text: str | None = None) -> SQLiteReport:
    """Python and SQLite versions, RETURNING support and the WAL-reset fix."""
    if version is None:
        version, version_text = sqlite3.sqlite_version_info, sqlite3.sqlite_version
    return SQLiteReport(
        python=sys.version.split()[0],
        sqlite=version_text or ".".join(map(str, version)),
        returning=has_returning(version),
        wal_reset_fix=has_wal_reset_fix(version),
    )
