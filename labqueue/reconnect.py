"""Surviving a lost database connection: a worker's calls go through Reconnector.call,
which on ConnectionLost reconnects with capped exponential backoff and full jitter,
then makes the same call again.

That is safe for the worker's calls because every one of them is fenced or read-only:
a settle repeated after a COMMIT that did reach the server finds its tokens spent and
reports those jobs "lost" (they are done, once); a claim whose COMMIT was lost leaves
its jobs leased until their lease ends, then another worker takes them. Nothing is
applied twice. A file (SQLite) never loses its connection, so this costs it nothing.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ConnectionLost, InvalidArgument

T = TypeVar("T")

# The first wait before reconnecting, and the longest (full jitter below each).
RECONNECT_BASE = 0.25
RECONNECT_CAP = 30.0


class Reconnector:
    """Calls on one queue that survive its server: `limit` reconnect attempts per loss
    (None: keep trying), each after a random wait of up to base * 2**n seconds, capped.
    One line is logged when the connection is lost and one when it is back."""

    def __init__(
        self,
        queue: Any,
        *,
        name: str,
        limit: int | None = None,
        base: float = RECONNECT_BASE,
        cap: float = RECONNECT_CAP,
        log: logging.Logger | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidArgument(f"the reconnect limit must be a whole number >= 0 or None, got {limit!r}")
        self.queue, self.name, self.limit = queue, name, limit
        self.base, self.cap = base, cap
        self.log = log or logging.getLogger("labqueue.worker")
        self.sleep, self.rng, self.stopping = sleep, rng, stopping
        self.losses = 0  # connections lost, for a test or a metric

    def call(self, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        while True:
            try:
                return action(*args, **kwargs)
            except ConnectionLost as lost:
                self.recover(lost)

    def first_open(self, opener: Callable[[], T]) -> T:
        """`opener()`'s queue, waiting out a server that cannot be reached yet (ServerUnreachable,
        a ConnectionLost) as a lost connection is: the same backoff and limit. The opened
        queue becomes the one later calls reconnect."""
        try:
            self.queue = opener()
        except ConnectionLost as lost:
            self.queue = self.recover(lost, again=opener)
        return self.queue

    def recover(self, lost: ConnectionLost, again: Callable[[], Any] | None = None) -> Any:
        """Reconnect (or call `again`, returning what it returns), or raise `lost` once the
        limit is used up (or a stop was asked for)."""
        self.losses += 1
        limit = "no limit" if self.limit is None else f"at most {self.limit} attempt(s)"
        self.log.warning("worker %s: %s; reconnecting with backoff (%s)", self.name, _first_line(lost), limit)
        began = time.monotonic()
        attempt = 0
        while self.limit is None or attempt < self.limit:
            attempt += 1
            self._wait(self.rng() * min(self.cap, self.base * 2 ** min(attempt - 1, 30)))
            if self.stopping():
                break
            try:
                result = self.queue.reconnect() if again is None else again()
            except ConnectionLost as failed:
                self.log.debug("worker %s: reconnect attempt %d failed: %s", self.name, attempt, failed)
                continue
            self.log.warning(
                "worker %s: reconnected after %d attempt(s), %.1f s",
                self.name,
                attempt,
                time.monotonic() - began,
            )
            return result
        raise lost

    def _wait(self, seconds: float) -> None:
        """Sleep in short steps, so a stop signal is not held up by a long backoff."""
        end = time.monotonic() + seconds
        while not self.stopping() and (left := end - time.monotonic()) > 0:
            self.sleep(min(left, 0.2))


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
