"""The guard that keeps an effect (a handler's writes, run inside the completing
transaction) from beginning, committing or rolling back a transaction of its own."""

from __future__ import annotations

import sqlite3

from ...core import Job


class EffectGuard:
    """The connection's SQLite authorizer. While an effect runs, a statement that would
    begin, commit or roll back a transaction is denied as SQLite prepares it (savepoints
    are allowed: they nest inside our transaction).

    SQLite asks only when it prepares a statement, and sqlite3 caches prepared
    statements by their text. labqueue's own BEGIN, COMMIT and ROLLBACK have texts of
    their own, so an effect's "COMMIT" is never one of ours from the cache; and when
    anyone else prepares a transaction statement on this connection (`stale`), the next
    effect first re-installs the authorizer, which makes SQLite prepare every statement
    afresh, so that cached one is asked about too."""

    __slots__ = ("active", "ours", "refused", "stale")

    def __init__(self) -> None:
        self.active = False
        self.ours = False
        self.refused = False
        self.stale = False

    def __call__(self, action: int, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION:
            if self.active:
                self.refused = True
                return sqlite3.SQLITE_DENY
            if not self.ours:
                self.stale = True
        return sqlite3.SQLITE_OK


def effect_message(job: Job) -> str:
    return (
        f"the effect of job {job.id} ({job.kind!r}) tried to begin, commit or roll back a "
        "transaction itself (COMMIT, ROLLBACK, BEGIN, executescript() or db.commit()): labqueue "
        "commits an effect's writes together with the job's done state, so the completion and "
        "the effect's writes were rolled back and the job is still leased"
    )
