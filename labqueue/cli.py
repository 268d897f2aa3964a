"""The ``labqueue`` command: run workers, add jobs, look at the queue, put dead jobs back.

    labqueue worker jobs.db --concurrency 4 --handlers myapp.jobs
    labqueue enqueue jobs.db email '{"to": "ada@example.com"}'
    labqueue stats jobs.db --watch
    labqueue jobs jobs.db --state dead
    labqueue requeue-dead jobs.db
    labqueue cancel jobs.db 42
    labqueue purge jobs.db --older-than 86400 --reclaim

One function per command; its docstring is its help. Bad arguments get a one-line usage
error and exit code 2; labqueue's own errors a one-line message and exit code 1. The
commands that take an existing queue (stats, jobs, requeue-dead, cancel, purge) never
create a file. ``bench`` and ``chaos``
hand their arguments to the tools, imported only when asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import handlers as registry
from .backends import is_postgres_url, open_queue, redact
from .errors import CannotCancel, InvalidArgument, JobNotFound, LabqueueError, QueueNotFound
from .pool import StopSignals, WorkerPool
from .queue import STATES, JobQueue, JobRecord
from .validate import DEFAULT_QUEUE, FINISHED_STATES
from .worker import (
    ForcedShutdown,
    StopFlag,
    add_settings,
    configure_logging,
    loop_settings,
    positive_seconds,
    queue_settings,
    run,
    seconds,
    settings_options,
    whole_number,
)

PROG = "labqueue"
DEFAULT_LEASE = 30.0
DEFAULT_WATCH = 2.0
TOOLS = {
    "bench": ("labqueue.bench.run", "the benchmark: labqueue against other Python queues", "bench"),
    "chaos": ("labqueue.chaos.supervisor", "the chaos run: workers killed and frozen at random", "notebooks"),
}


class UsageError(Exception):
    """A bad argument found after parsing: reported like argparse's own, exit code 2."""


# -- worker -------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    """Run a worker on the queue DB: claim jobs, run their handlers, record the outcome.

    With --concurrency N, a supervisor runs N worker processes, restarts any that crashes,
    and passes a warm stop to all of them on the first SIGTERM or Ctrl-C (each finishes
    its current job); a second signal stops them at once. Without --idle-exit, workers
    run until stopped."""
    worker_id = args.id if args.id is not None else f"{socket.gethostname()}:{os.getpid()}"
    if not worker_id or worker_id.startswith("-"):
        raise UsageError(f"argument --id: a worker id must not be empty or start with '-', got {worker_id!r}")
    loop = loop_settings(args)
    if args.strict and loop["weights"]:
        raise UsageError(
            "--strict orders jobs by priority across --queues; weights (NAME:WEIGHT) only set turns"
        )
    configure_logging(args.log_level, args.log_format)
    for module in args.handlers:
        try:
            registry.load_module(module)
        except ImportError as exc:
            raise UsageError(f"argument --handlers: cannot import {module!r} ({exc})") from None
    if args.concurrency == 1:
        stop = StopFlag()
        stop.install()
        try:
            run(
                args.db,
                worker_id,
                args.lease,
                args.idle_exit,
                poll=args.poll,
                stop=stop,
                **queue_settings(args),
                **loop,
            )
        except ForcedShutdown:
            return 1
        return 0
    open_queue(args.db, lease_seconds=args.lease, **_given(queue_settings(args))).close()  # fail here, once
    options = settings_options(args)
    if args.idle_exit is None:
        options.append("--no-idle-exit")
    pool = WorkerPool(
        args.db,
        args.concurrency,
        lease_seconds=args.lease,
        idle_exit=args.idle_exit,
        options=options,
        names=lambda n: f"{worker_id}/{n}",
        quiet=False,
        new_session=True,
    )
    signals = StopSignals()
    signals.install()
    try:
        return pool.supervise(signals)
    finally:
        pool.kill_all()  # nothing is left running, whatever happened


def _given(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if v is not None}


# -- enqueue ------------------------------------------------------------------------


def enqueue(args: argparse.Namespace) -> int:
    """Add a job of KIND with the JSON payload PAYLOAD_JSON to the queue DB, and print its id
    (or 'duplicate' when a job with the --dedupe-key is already stored).

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


# -- reading ------------------------------------------------------------------------


def open_existing(location: str) -> Any:
    """The queue at `location` for a command that reads or changes it: never creates a file
    or a queue (a queue of an older schema is upgraded in place, as every opening does),
    and refuses a location that holds no queue, as a usage error."""
    try:
        if is_postgres_url(location):
            return open_queue(location, create=False)
        if not Path(location).exists():
            raise UsageError(f"no such file: {location} (nothing was created)")
        return JobQueue(location, create=False)
    except QueueNotFound as exc:
        raise UsageError(str(exc)) from None


def stats(args: argparse.Namespace) -> int:
    """Print what to watch on the queue DB: jobs queued, running, ready now, the age of the
    oldest ready job, and dead jobs; then the same per named queue (live jobs only).
    --watch refreshes every few seconds until Ctrl-C."""
    # Ctrl-C (or SIGTERM) only sets a flag that the loop reads between readings: an interrupt
    # raised inside SQLite's callbacks could be swallowed there and the watch would go on.
    stop = threading.Event()
    if args.watch is not None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: stop.set())
    with open_existing(args.db) as q:
        while not stop.is_set():
            numbers = q.stats()
            per_queue = q.queue_stats()
            if args.json:
                print(json.dumps({**numbers, "queues": per_queue}), flush=True)
            else:
                if args.watch is not None:
                    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else "\n"  # a screen, or a log
                    now = time.strftime("%H:%M:%S")
                    print(f"{clear}{args.db} at {now} (every {args.watch:g} s; Ctrl-C to stop)")
                width = max(map(len, numbers))
                lines = [f"{name:<{width}}  {value:>8}" for name, value in numbers.items()]
                print("\n".join(lines + _queue_table(per_queue)), flush=True)
            if args.watch is None or stop.wait(args.watch):
                break
    return 0


def _queue_table(per_queue: dict[str, dict[str, float | int]]) -> list[str]:
    """stats' second table: one line per named queue with live jobs."""
    if not per_queue:
        return []
    heads = ("queue", "queued", "running", "ready_now", "oldest_ready_age_s")
    rows = [heads] + [(name, *map(str, row.values())) for name, row in per_queue.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(heads))]
    lines = [""]
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        lines.append("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in pairs))
    return lines


JOB_COLUMNS = ("id", "kind", "queue", "state", "attempts", "worker", "last_error")


def jobs(args: argparse.Namespace) -> int:
    """List the jobs stored in the queue DB, oldest first, filtered by --state and --kind:
    a table, or one JSON object per line with --json."""
    with open_existing(args.db) as q:
        records = q.jobs(state=args.state or None, kind=args.kind, queue=args.queue, limit=args.limit)
    if args.json:
        for record in records:
            print(json.dumps(dataclasses.asdict(record)))
        return 0
    rows = [JOB_COLUMNS, *(_job_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(JOB_COLUMNS) - 1)]
    for row in rows:
        print("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip())
    return 0


def _job_row(r: JobRecord) -> tuple[str, ...]:
    error = (r.last_error or "").replace("\n", " ")
    return (
        str(r.id),
        r.kind,
        r.queue,
        r.state,
        f"{r.attempts}/{r.max_attempts}",
        r.worker or "",
        error if len(error) <= 60 else error[:59] + "…",
    )


def requeue_dead(args: argparse.Namespace) -> int:
    """Put dead jobs in the queue DB back in the queue with their attempts reset: the ones
    with the given IDs, or every dead job. Prints the ids requeued, one per line."""
    with open_existing(args.db) as q:
        done = q.requeue_dead(args.ids or None)
    for job_id in done:
        print(job_id)
    missed = sorted(set(args.ids) - set(done))
    if missed:
        print(f"not dead, so not requeued: {' '.join(map(str, missed))}", file=sys.stderr)
    return 0


def cancel(args: argparse.Namespace) -> int:
    """Cancel the jobs with the given IDs in the queue DB. A queued job will never run; a
    running job's worker is refused at its next heartbeat or report, and its effect never
    commits. Prints each id and the state it was cancelled in. A finished or unknown job
    is reported on stderr and left as it was (exit code 1)."""
    failed = False
    with open_existing(args.db) as q:
        for job in args.ids:
            try:
                print(f"{job} cancelled (was {q.cancel(job)})")
            except (CannotCancel, JobNotFound) as exc:
                print(f"{PROG} cancel: {exc}", file=sys.stderr)
                failed = True
    return 1 if failed else 0


def purge(args: argparse.Namespace) -> int:
    """Remove finished jobs from the queue DB that finished more than --older-than seconds
    ago: done jobs, and dead or cancelled ones only when named with --state. Each batch of
    rows is a short transaction of its own, so workers carry on meanwhile. --reclaim then
    hands the freed pages back to the file system (files made by labqueue; --vacuum rebuilds
    an older file once so that it can, and needs the queue quiet)."""
    with open_existing(args.db) as q:
        result = q.purge(
            args.older_than, states=args.state or ("done",), batch=args.batch, archive=args.archive
        )
        kept = " (archived in jobs_archive)" if args.archive else ""
        print(
            f"removed {result.removed} job(s){kept} in {result.batches} transaction(s), "
            f"the longest {result.longest_hold_s * 1000:.1f} ms"
        )
        if args.vacuum:
            q.vacuum()
            print("vacuumed: the file was rebuilt")
        if args.reclaim or args.vacuum:
            freed = q.reclaim_space()
            space = q.space()
            pages, size = space["page_count"], space["page_size"]
            print(f"freed {freed} page(s); the file has {pages} pages of {size} bytes")
    return 0


# -- the tools ------------------------------------------------------------------------


def tool(name: str, argv: Sequence[str]) -> int:
    """Hand the arguments to a tool's own command line, imported only now."""
    module_name, _, extra = TOOLS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(
            f"{PROG} {name}: cannot import {module_name} ({exc}); install the extras: "
            f"pip install 'labqueue[{extra}]'",
            file=sys.stderr,
        )
        return 1
    return module.main(list(argv))


# -- argument parsing ---------------------------------------------------------------------


def kind(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a job kind cannot be empty")
    return text


def job_id(text: str) -> int:
    return whole_number(text, noun="a job id")


def count(text: str) -> int:
    return whole_number(text, low=0)


def priority(text: str) -> int:
    return whole_number(text, low=-(2**31), noun="a priority")


def queue_name(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a queue name cannot be empty")
    return text


def concurrency(text: str) -> int:
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 worker, got {text!r}")
    return value


def max_attempts(text: str) -> int:
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(fn: Callable[[argparse.Namespace], int], name: str | None = None) -> argparse.ArgumentParser:
        doc = fn.__doc__ or ""
        sub = commands.add_parser(
            name or fn.__name__,
            help=doc.split("\n\n")[0].split(". ")[0].replace("\n", " ").rstrip("."),
            description=doc.replace("\n    ", "\n"),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(run=fn, parser=sub)
        sub.add_argument("db", metavar="DB", help="the queue's SQLite file, or a postgresql:// URL")
        return sub

    p = command(worker)
    p.add_argument("--id", help="this worker's name, stored on the jobs it claims (default HOST:PID)")
    p.add_argument(
        "--lease",
        type=positive_seconds,
        default=DEFAULT_LEASE,
        metavar="SECONDS",
        help=f"how long each claim holds a job before another worker may take it (default {DEFAULT_LEASE:g})",
    )
    p.add_argument(
        "--idle-exit",
        type=seconds,
        metavar="SECONDS",
        help="leave after this many seconds with nothing to do (default: run until stopped)",
    )
    p.add_argument(
        "--concurrency",
        type=concurrency,
        default=1,
        metavar="N",
        help="run N supervised worker processes (default 1: this process is the worker)",
    )
    add_settings(p)

    p = command(enqueue)
    p.add_argument("kind", type=kind, metavar="KIND", help="the job's kind, as registered with @handler")
    p.add_argument("payload", metavar="PAYLOAD_JSON", help="the payload as JSON; '-': JSON lines on stdin")
    p.add_argument("--delay", type=seconds, default=0.0, metavar="SECONDS", help="ready after this long")
    p.add_argument(
        "--max-attempts", type=max_attempts, metavar="N", help="attempts before it is dead (default 5)"
    )
    p.add_argument("--dedupe-key", metavar="KEY", help="add nothing if a job with this key is already stored")
    p.add_argument("--priority", type=priority, default=0, metavar="N", help="higher runs first (default 0)")
    p.add_argument("--queue", type=queue_name, default=DEFAULT_QUEUE, metavar="NAME", help="the named queue")

    p = command(stats)
    p.add_argument("--json", action="store_true", help="one JSON object (per refresh)")
    p.add_argument(
        "--watch",
        type=positive_seconds,
        nargs="?",
        const=DEFAULT_WATCH,
        metavar="SECONDS",
        help=f"refresh every SECONDS (default {DEFAULT_WATCH:g}) until Ctrl-C",
    )

    p = command(jobs)
    p.add_argument("--state", action="append", choices=STATES, help="only jobs in this state (repeatable)")
    p.add_argument("--kind", type=kind, help="only jobs of this kind")
    p.add_argument("--queue", type=queue_name, metavar="NAME", help="only jobs of this named queue")
    p.add_argument("--limit", type=count, metavar="N", help="at most N jobs (default: all)")
    p.add_argument("--json", action="store_true", help="one JSON object per job and line")

    p = command(requeue_dead, "requeue-dead")
    p.add_argument("ids", nargs="*", type=job_id, metavar="ID", help="only these dead jobs (default: all)")

    p = command(cancel)
    p.add_argument("ids", nargs="+", type=job_id, metavar="ID", help="the jobs to cancel")

    p = command(purge)
    p.add_argument(
        "--older-than",
        type=seconds,
        required=True,
        metavar="SECONDS",
        help="remove jobs that finished at least this long ago",
    )
    p.add_argument(
        "--state",
        action="append",
        choices=FINISHED_STATES,
        help="remove jobs in this finished state (repeatable; default: done only)",
    )
    p.add_argument("--batch", type=whole_number, default=1000, metavar="N", help="rows per transaction")
    p.add_argument("--archive", action="store_true", help="copy each removed row to jobs_archive first")
    p.add_argument("--reclaim", action="store_true", help="then give freed pages back to the file system")
    p.add_argument("--vacuum", action="store_true", help="then rebuild the file (VACUUM): quiet queues only")

    for name, (_, help_text, _) in TOOLS.items():
        commands.add_parser(
            name,
            help=f"{help_text} ('{PROG} {name} --help' for its options)",
            add_help=False,
        )
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labqueue")
    except PackageNotFoundError:
        return "(not installed)"


def _is_database_error(exc: BaseException) -> bool:
    """A driver's own error (sqlite3's, or psycopg's when it is installed)."""
    if isinstance(exc, sqlite3.Error):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        return tool(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, InvalidArgument) as exc:  # a bad argument, found by us or by the queue
        args.parser.error(str(exc))  # exits with code 2
    except LabqueueError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _is_database_error(exc):
            raise
        # A database error labqueue has no name for: one line, never a traceback.
        detail = " ".join(str(exc).split()) or type(exc).__name__
        where = redact(str(getattr(args, "db", "")))
        print(
            f"{PROG} {args.command}: error: {where}: {type(exc).__name__}: {detail}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (`labqueue stats --watch | head`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
