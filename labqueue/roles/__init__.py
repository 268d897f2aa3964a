"""The queue, put together from its roles over one driver. Each role is a class of its
own, for who calls it:

    producing   Producing   enqueue, enqueue_many, every, wake_workers
    working     Claiming    claim, claim_batch, claim_next, any_ready, next_due, wait_for_jobs
                Reporting   complete, fail, heartbeat, extend, release, put_back
                Settling    settle: a batch's reports and the next claim in one transaction
    operating   Operating   pause, resume, cancel, requeue_dead, purge, reclaim_space
    reading     Reading     stats, jobs, latest_jobs, job, result, wait, throughput, counts

Each stands on QueueBase (labqueue.roles.base: the driver, the settings, transactions and
reads). The rules they apply are functions of labqueue.core, which every driver shares.
"""

from __future__ import annotations

from .base import QueueBase
from .claiming import Claiming
from .operating import Operating
from .producing import Producing
from .reading import Reading
from .reporting import Reporting
from .settling import Settling

__all__ = ["Claiming", "Operating", "Producing", "Queue", "QueueBase", "Reading", "Reporting", "Settling"]


class Queue(Producing, Settling, Operating, Reading):
    """A durable job queue over one driver: leases, fencing tokens, retries with
    full-jitter backoff, dead letters, heartbeats, group commit, cancel, purge.

    Every deadline (a job's run time, the end of its lease, its retry time) is an
    absolute reading of the queue's clock taken when it was set, compared with the clock
    at each claim. A step in the clock therefore moves all deadlines at once. Forward by
    d: every lease and delay is d shorter, so a live job may be claimed by a second
    worker, whose new token fences the first one out. Back by d: they all last d longer.
    Either way nothing is lost or finished twice: complete, fail and heartbeat check the
    token, and a heartbeat renews the lease from the clock's reading. A job with a
    concurrency key is the exception: its lease also holds a place of its key, which the
    claim gives away when the lease ends, so past its deadline its holder's reports are
    refused too (a keyed job's deadline is part of its fence)."""
