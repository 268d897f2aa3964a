"""Notebook 06's exercise: keep a job that outlasts its lease from running twice.

The learner writes the handler, ``handler(path, job, lease, work)``: it must do its
work (sleep for ``work`` seconds, three times the lease) and keep the job's lease alive
while it does. The checker runs the notebook's two-worker experiment with it, on real
threads: w1 takes the job and runs the handler, w2 polls from 0.3 s on. The workers claim
and complete with the JobQueue class the notebook passes (the learner's, whose heartbeat the
learner's KeepAlive calls); without one, the tutorial's.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from ...tutorial.jobqueue import Job, JobQueue
from ...tutorial.keepalive import KeepAlive
from .. import heartbeat
from . import Verdict, not_yet, passed, starting_points

LEASE = 0.5
WORK = 1.5  # three leases


def starter_handler(path: Path, job: Job, lease: float, work: float) -> None:
    time.sleep(work)  # the work, three times as long as the lease


def answer_handler(path: Path, job: Job, lease: float, work: float) -> None:
    with KeepAlive(path, job, lease_seconds=lease):  # beats every lease / 3 while the work runs
        time.sleep(work)


def wrong_handler(path: Path, job: Job, lease: float, work: float) -> None:
    """One heartbeat before the work: the lease is pushed out once, then runs out anyway."""
    q = JobQueue(path, lease_seconds=lease, schema=None)
    q.heartbeat(job)
    q.db.close()
    time.sleep(work)


def check_handler(
    handler: object, queue_class: type | None = None, *, lease: float = LEASE, work: float = WORK
) -> Verdict:
    """Passes when the job ran once, w1's completion was accepted, and each run of the
    handler really worked for `work` seconds (a handler that skips the work proves nothing).
    The workers use `queue_class`, the learner's JobQueue (the tutorial's without one)."""
    if not callable(handler):
        return not_yet(f"handler must be a function handler(path, job, lease, work), got {handler!r}")
    durations: list[float] = []
    raised: list[Exception] = []
    lock = threading.Lock()

    def timed(path: Path, job: Job, lease_: float, work_: float) -> None:
        started = time.monotonic()
        try:
            handler(path, job, lease_, work_)
        except Exception as exc:
            raised.append(exc)
            raise
        finally:
            with lock:
                durations.append(time.monotonic() - started)

    try:
        with tempfile.TemporaryDirectory(prefix="nb06_") as scratch:
            run = heartbeat.scenario(
                False, lease=lease, work=work, folder=scratch, handler=timed, queue_class=queue_class
            )
    except Exception as exc:  # a checker reports, it never raises at the learner
        if exc in raised:
            return not_yet(f"your handler raised {type(exc).__name__}: {exc}")
        return not_yet(f"the experiment could not finish with your handler: {type(exc).__name__}: {exc}")
    said = (
        f"lease {lease:g} s, work {work:g} s: the handler ran {len(run.runs)} time(s) "
        f"({', '.join(run.runs)}); complete() returned {run.completes}"
    )
    if durations and min(durations) < 0.9 * work:
        return not_yet(f"{said}, but a run took only {min(durations):.2f} s: the handler must do its work.")
    if len(run.runs) != 1 or run.completes != {"w1": True}:
        return not_yet(f"{said}. The lease ran out while w1 was working, so w2 took the job over.")
    return passed(f"{said}. The heartbeat kept w1's lease ahead of the clock; w2 never got the job.")


CHECKERS = {"handler": check_handler}
STARTERS = {"handler": {"handler": starter_handler}}
ANSWERS = {"handler": {"handler": answer_handler}}
WRONG = {"handler": [{"handler": wrong_handler}, {"handler": lambda path, job, lease, work: None}]}

starting_points(__name__)
