"""The handler `labqueue worker` runs in the wake-up benchmark's real-worker mode
(`--handlers labqueue.bench.wakeup_handlers`): it notes when the job reached it and
records that with the completion, in the same transaction."""

from __future__ import annotations

import functools
import time
from typing import Any

from .wakeup import KIND, record_pickup


def picked_up(job: Any, queue: Any) -> Any:
    return functools.partial(record_pickup, job.id, time.time())


HANDLERS = {KIND: picked_up}
