"""A clock that advances only when told to, which makes lease and backoff timing exact and repeatable."""

from __future__ import annotations


class FakeClock:
    """Pass as ``clock=`` to JobQueue; read ``.now`` or set it, or call ``advance``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move the clock by `seconds` (negative steps it back) and return the new time."""
        self.now += seconds
        return self.now

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now})"
