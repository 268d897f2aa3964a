"""What every role of the queue stands on: one driver, the queue's settings, its
transactions and reads with their database errors translated (labqueue.core.translated),
and the paused queues a claim leaves out. labqueue.roles puts the roles together."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NoReturn, TypeVar

from .. import validate
from ..core import (
    PAUSES_READ_EVERY,
    Clock,
    Driver,
    Scope,
    scope_of,
    translated,
)
from ..stored import stored_error

T = TypeVar("T")


class Transaction:
    """QueueBase._tx(): the driver's transaction, with a database error that stands for a
    labqueue error raised as that error. A class rather than a generator: the worker
    opens one per batch, and a generator's context manager costs it about 2 µs more."""

    __slots__ = ("_inner", "_queue")

    def __init__(self, queue: QueueBase, inner: AbstractContextManager[Any] | None = None) -> None:
        self._queue = queue
        self._inner = queue._d.transaction() if inner is None else inner  # or the driver's snapshot()

    def __enter__(self) -> Any:
        try:
            return self._inner.__enter__()
        except Exception as exc:  # BEGIN failed (a lock held past the timeout, a lost connection)
            self._queue._raise_translated(exc)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        # Never swallows: the block's exception goes on, rolled back (psycopg's transaction
        # would swallow a psycopg.Rollback, which nothing of the queue's raises at this level)
        try:
            handled = self._inner.__exit__(kind, exc, tb)
        except Exception as failure:  # COMMIT or ROLLBACK failed, or a new error replaced exc
            self._queue._raise_translated(failure)
        if isinstance(exc, Exception) and not handled:
            self._queue._raise_translated(exc)


class QueueBase:
    """The queue's plumbing, shared by its roles: the driver (`_d`), the settings checked
    by labqueue.core.settings(), `_tx()` for a write transaction and `_read()` for a read,
    the clock, and the stored form of an error."""

    def __init__(self, driver: Driver, settings: dict[str, Any]) -> None:
        self._d = driver
        self.lease_seconds: float = settings["lease_seconds"]
        self.max_attempts: int = settings["max_attempts"]
        self.backoff_base: float = settings["backoff_base"]
        self.backoff_cap: float = settings["backoff_cap"]
        self.timeout: float = settings["timeout"]
        self.rng: Callable[[], float] = settings["rng"]
        self._checked_worker: str | None = None
        self._paused: tuple[str, ...] = ()
        self._paused_read_at = -math.inf
        self._secret_locations: tuple[object, ...] = ()

    def keep_secret(self, *locations: object) -> None:
        """Mask the passwords of `locations` (database URLs a worker knows) in every error,
        note and reason this queue stores, besides any URL's password, which is always masked."""
        self._secret_locations += locations

    @property
    def db(self) -> Any:
        """The driver's connection (sqlite3 or psycopg): effects and the course use it."""
        return self._d.db

    @property
    def clock(self) -> Clock | None:
        """The clock deadlines are written in: a callable, or None for a database server's own."""
        return self._d.clock

    def _now(self) -> float | None:
        clock = self._d.clock
        return None if clock is None else clock()

    def _stored(self, error: str) -> str:
        return stored_error(error, *self._secret_locations)

    def _tx(self) -> Transaction:
        """Run the block as one write transaction on the driver's connection: committed at
        its end, rolled back on any exception (KeyboardInterrupt included), and a database
        error that stands for a labqueue error raised as that error."""
        return Transaction(self)

    def _raise_translated(self, exc: Exception) -> NoReturn:
        """Raise `exc` as the labqueue error it stands for, or as it is (called by the
        handler that caught it)."""
        mapped = translated(self._d, exc, timeout=self.timeout)
        if mapped is exc:
            raise exc
        raise mapped from exc

    def _read(self, action: Callable[[], T]) -> T:
        """A read outside a transaction, its database errors translated as _tx()'s are."""
        try:
            return action()
        except Exception as exc:
            self._raise_translated(exc)

    def server_time(self) -> float:
        """The clock deadlines are compared with, now (one round trip on a database server)."""
        return self._read(self._d.server_time)

    def reconnect(self) -> None:
        """Open the driver's connection again after ConnectionLost (a server restart, a
        terminated session). Listening for hints resumes; leases are untouched."""
        self._read(self._d.reconnect)

    def _check_worker(self, worker: object) -> None:
        if worker is not self._checked_worker:  # the same name again costs one comparison
            validate.text("worker", worker)  # not indexed: no length limit
            self._checked_worker = worker  # type: ignore[assignment]

    def _scope(self, queues: Sequence[str] | None) -> Scope:
        """scope_of(queues), leaving out the paused queues (read at most once a second)."""
        now = time.monotonic()
        if now - self._paused_read_at >= PAUSES_READ_EVERY:
            self._paused = tuple(self._read(self._d.paused_names))
            self._paused_read_at = now
        return scope_of(queues, self._paused)

    def close(self) -> None:
        """Close the connection (leaving a ``with`` block does it)."""
        self._d.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
