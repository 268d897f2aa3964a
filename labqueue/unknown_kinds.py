"""What a worker does with a job whose kind it has no handler for: it gives it back.

A fleet may run workers with different handler modules (a new kind deployed to some
workers first, or a worker started with the wrong ``--handlers``). A job such a worker
claims is not its to judge: it is given back with ``put_back``, queued again with the
claim's attempt returned (so it can never be dead-lettered this way) and hidden for
UNKNOWN_KIND_DELAY seconds, so neither this worker nor any other claims it in a tight
loop. A worker that knows the kind runs it once the delay is over; until then its
``last_error`` says which worker gave it back and why. Keep kinds apart with named
queues (``--queues``) to avoid the delay altogether.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .joblog import job_fields, queue_of

# Long enough that a worker without the handler costs at most one claim and one write
# per job every this many seconds; short enough that a job waiting for a worker that
# knows its kind is not held up for long.
UNKNOWN_KIND_DELAY = 10.0

log = logging.getLogger("labqueue.worker")


def give_back_unknown(
    q: Any,
    jobs: Sequence[Any],
    handlers: Mapping[str, Any],
    *,
    worker: str | None = None,
    delay: float = UNKNOWN_KIND_DELAY,
) -> list[Any]:
    """Give back the claimed `jobs` whose kind `handlers` lacks (put_back, attempt
    returned, hidden `delay` seconds) and return the others, in their order."""
    for job in jobs:
        if job.kind not in handlers:
            break
    else:  # every kind known: the worker's usual case, checked once per job
        return list(jobs)
    unknown = [job for job in jobs if job.kind not in handlers]
    for kind in sorted({job.kind for job in unknown}):
        note = (
            f"no handler for kind {kind!r} on worker {worker or '?'}: given back for {delay:g} s, "
            "attempt not counted"
        )
        mine = [job for job in unknown if job.kind == kind]
        q.put_back(mine, delay, note)
        for job in mine:
            extra = job_fields(job, worker=worker, queue=queue_of(q, job.id))
            log.warning("job %d (%s): %s", job.id, kind, note, extra=extra)
    return [job for job in jobs if job.kind in handlers]

