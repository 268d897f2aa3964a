"""What one drain came to and the machine it ran on, said the same way by every bench."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any


def tally(seen: Sequence[int], jobs: int, seconds: float, left_in_store: int) -> dict[str, Any]:
    """Deliveries against distinct jobs (a job handed to two workers shows as a duplicate),
    what the store still holds unfinished, and jobs per second over `seconds`."""
    distinct = len(set(seen))
    return {
        "jobs": jobs,
        "deliveries": len(seen),
        "distinct": distinct,
        "duplicates": len(seen) - distinct,
        "missed": jobs - distinct,
        "left_in_store": left_in_store,
        "seconds": round(seconds, 4),
        "jobs_per_s": round(distinct / seconds, 1) if seconds > 0 else None,
    }


def machine() -> dict[str, Any]:
    """Where a run ran, for its results: figures move with the machine and its load."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # no load average on this platform
        load = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": load,
    }
