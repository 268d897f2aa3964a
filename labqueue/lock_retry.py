"""A migration step that meets a lock held too long backs off and tries again: one loop for
both backends' migrations (labqueue.migrate on SQLite, drivers/postgres/schema.py), so
each step waits at most its lock timeout at a time and traffic goes on between tries."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
# The pause after the first refused try, doubled per try, and the longest pause.
FIRST_PAUSE = 0.25
LONGEST_PAUSE = 5.0


def with_lock_retries(
    action: Callable[[], T],
    *,
    locked: Callable[[BaseException], bool],
    attempts: int,
    waited: str,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`action()`, tried up to `attempts` times while it fails for a lock (`locked(exc)`):
    between tries `say(waited)` and a pause that doubles, at most LONGEST_PAUSE. The last
    try's error, and any other error, is raised as it is."""
    for attempt in range(1, attempts):
        try:
            return action()
        except Exception as exc:
            if not locked(exc):
                raise
            say(waited)
            sleep(min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (attempt - 1)))
    return action()
