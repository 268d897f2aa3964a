"""What one drain came to and the machine it ran on, said the same way by every bench, and
the round-robin every bench races its contenders in."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
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


def race_rounds(
    rounds: int,
    procs: Sequence[int],
    keys: Sequence[str],
    race: Callable[[str, int], dict[str, Any]],
    progress: Callable[[str], object] = lambda line: None,
) -> list[dict[str, Any]]:
    """race(key, procs) for every key at every process count, `rounds` times: round r
    starts the order r places further on, so no contender always runs first or last (two
    swap places each round). Each run is tagged with its round, and reported as it ends."""
    width = max(map(len, keys), default=0)
    runs = []
    for r in range(rounds):
        shift = r % len(keys)
        order = [*keys[shift:], *keys[:shift]]
        for n in procs:
            for key in order:
                run = race(key, n)
                run["round"] = r + 1
                runs.append(run)
                progress(
                    f"round {r + 1}/{rounds}  {n} proc  {key:<{width}}  "
                    f"{run['jobs_per_s'] or 0:>9,.0f} jobs/s  {run['deliveries']} deliveries"
                )
    return runs
