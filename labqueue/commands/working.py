"""labqueue worker and labqueue enqueue: run workers on a queue, add jobs to it."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any, NoReturn

from .. import handlers as registry
from ..backends import open_queue
from ..errors import InvalidArgument
from ..joblog import configure_logging
from ..pool import StopSignals, WorkerPool
from ..redaction import guard_logging
from ..settings import PoolSettings, WorkerSettings
from . import UsageError


def worker(args: argparse.Namespace) -> int:
    """Run workers on the queue DB. They claim jobs, run their handlers, record the outcome.

    A supervisor runs --concurrency worker processes (default 1) and restarts any that
    crashes; the job a crashed worker was running gets "worker crashed (exit code N / signal
    S) while running this job" in its last_error, the rest of its batch "... while holding
    this job, not running it", and the supervisor's log names the jobs.
    The first SIGTERM or Ctrl-C is a warm stop: each worker finishes its current job and
    gives back the rest of its batch; a second signal, or --grace after the first, stops
    them at once (a job cut short goes to another worker when its lease ends).

    --handlers modules are imported with the current folder first on sys.path; with no
    handler registered the worker refuses to start. A job of a kind no handler here
    knows is given back with its attempt returned, hidden for 10 s, for a worker that
    knows it: it is never dead-lettered for that. Without --idle-exit, workers run until
    stopped."""
    pool_settings = PoolSettings.from_args(args)
    worker_id = pool_settings.id if pool_settings.id is not None else f"{socket.gethostname()}:{os.getpid()}"
    if not worker_id or worker_id.startswith("-"):
        raise UsageError(f"argument --id: a worker id must not be empty or start with '-', got {worker_id!r}")
    try:
        settings = WorkerSettings.from_args(args)
    except InvalidArgument as exc:  # weights with --strict
        raise UsageError(str(exc)) from None
    configure_logging(settings.log_level, settings.log_format, log_success=settings.log_success)
    guard_logging(args.db)  # the supervisor's log never shows the location's password
    try:
        registry.load_for_worker(list(settings.handlers))
    except ImportError as exc:  # HandlersNotLoaded: the module and the cause, on one line
        raise UsageError(f"argument --handlers: {exc}") from None
    lease = pool_settings.lease
    open_queue(args.db, lease_seconds=lease, **settings.queue_options()).close()  # fail here, once
    single = pool_settings.concurrency == 1
    pool = WorkerPool(
        args.db,
        pool_settings.concurrency,
        lease_seconds=lease,
        idle_exit=pool_settings.idle_exit,
        settings=settings,
        # one worker keeps the name it was given; a restart, or one of several, gets /n
        names=lambda n: worker_id if single and n == 0 else f"{worker_id}/{n}",
        quiet=False,
        new_session=True,
        note_crashes=True,
    )
    signals = StopSignals()
    signals.install()
    try:
        return pool.supervise(signals, grace=pool_settings.grace)
    finally:
        pool.kill_all()  # nothing is left running, whatever happened


def enqueue(args: argparse.Namespace) -> int:
    """Add a job to the queue DB. The job has KIND and the JSON payload PAYLOAD_JSON; its id
    is printed (or 'duplicate' when a job with the --dedupe-key is already stored).

    A PAYLOAD_JSON of '-' reads one JSON payload per line from stdin and adds them all in
    one transaction (all or none), printing how many were added."""
    options = {} if args.max_attempts is None else {"max_attempts": args.max_attempts}
    where = {"priority": args.priority, "queue": args.queue}
    if args.payload == "-":
        if args.delay or args.dedupe_key is not None:
            raise UsageError("--delay and --dedupe-key apply to one job, not to a batch read from stdin")
        payloads = [_json(line, f"stdin line {n}") for n, line in enumerate(sys.stdin, 1) if line.strip()]
        with open_queue(args.db, **options) as q:
            count = q.enqueue_many(args.kind, payloads, **where)
        print(f"enqueued {count} job(s)")
        return 0
    payload = _json(args.payload, "PAYLOAD_JSON")
    with open_queue(args.db) as q:
        job_id = q.enqueue(
            args.kind,
            payload,
            delay=args.delay,
            max_attempts=args.max_attempts,
            dedupe_key=args.dedupe_key,
            **where,
        )
    print("duplicate" if job_id is None else job_id)
    return 0


def _json(text: str, where: str) -> Any:
    def refuse(name: str) -> NoReturn:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise UsageError(f"{where} is not valid JSON ({exc}): {text.strip()[:60]!r}") from None
