"""The labqueue command: run workers, add jobs, look at the queue, put dead jobs back.

    labqueue worker jobs.db --concurrency 4 --handlers myapp.jobs
    labqueue enqueue jobs.db email '{"to": "ada@example.com"}'
    labqueue stats jobs.db --watch
    labqueue jobs jobs.db --state dead
    labqueue job jobs.db 42
    labqueue requeue-dead jobs.db --kind email
    labqueue cancel jobs.db 42
    labqueue purge jobs.db --older-than 1w --reclaim
    labqueue health jobs.db --max-oldest-ready 5m --max-dead 10
    labqueue metrics jobs.db --port 9187
    labqueue dashboard jobs.db --allow-actions

One function per command; its docstring is its help. Bad arguments get a one-line usage
error and exit code 2; labqueue's own errors a one-line message and exit code 1. The
commands that take an existing queue (every one but worker and enqueue) never create a
file. Durations take a unit: 90s, 15m, 2h, 1d, 1w (or plain seconds). LABQUEUE_*
environment variables stand in for some options (labqueue.environment). bench and
chaos hand their arguments to the tools, imported only when asked for.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import __version__, environment, listing, metrics
from . import handlers as registry
from .arguments import (
    allowed_host,
    concurrency_key,
    count,
    job_id,
    kind,
    listen_host,
    max_attempts,
    port,
    priority,
    queue_name,
    whole_number,
)
from .backends import is_postgres_url, open_queue
from .durations import duration, positive_duration
from .errors import (
    CannotCancel,
    InvalidArgument,
    JobNotFound,
    LabqueueError,
    QueueNotFound,
    is_database_error,
)
from .health import judge
from .joblog import configure_logging
from .pool import StopSignals, WorkerPool
from .queue import STATES, JobQueue, writable
from .redaction import ArgumentParser, guard_logging, redact
from .settings import PoolSettings, WorkerSettings
from .signals import StopEvent, stop_on
from .validate import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, FINISHED_STATES

PROG = "labqueue"
DEFAULT_WATCH = 2.0
DEFAULT_METRICS_PORT = 9187
DEFAULT_DASHBOARD_PORT = 9188
EVERY_INTERFACE = "0.0.0.0 or :: for every interface"
# How long a dashboard page waits for a lock (a file being migrated, a locked table) before
# it shows an error page instead: a page, not a worker.
DASHBOARD_TIMEOUT = 2.0
TOOLS = {
    "bench": ("labqueue.bench.run", "the benchmark: labqueue against other Python queues", "bench"),
    "chaos": ("labqueue.chaos.supervisor", "the chaos run: workers killed and frozen at random", "notebooks"),
}


class UsageError(LabqueueError):
    """A bad argument found after parsing: reported like argparse's own, exit code 2 (a
    LabqueueError, so a dashboard page shows its sentence: "no such file: ...")."""


# -- worker -------------------------------------------------------------------------


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


# -- enqueue ------------------------------------------------------------------------


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


# -- reading ------------------------------------------------------------------------


def open_existing(location: str, *, read_only: bool = False, **settings: Any) -> Any:
    """The queue at `location` for a command that reads or changes it: never creates a file
    or a queue and never writes its schema (a queue of an older schema is refused, naming
    `labqueue migrate`), and refuses a location that holds no queue, as a usage error.
    `settings` go to the queue (the dashboard's shorter timeout); `read_only` opens a file
    for reading only (the dashboard of a file this user may not write)."""
    try:
        if is_postgres_url(location):
            return open_queue(location, create=False, **settings)
        if not Path(location).exists():
            raise UsageError(f"no such file: {redact(location)} (nothing was created)")
        return JobQueue(location, create=False, read_only=read_only, **settings)
    except QueueNotFound as exc:
        raise UsageError(str(exc)) from None


def stats(args: argparse.Namespace) -> int:
    """Print what to watch on the queue DB. Jobs queued, running, ready now, the age of the
    oldest ready job, and dead jobs; then the same per named queue (live jobs only).
    --watch refreshes every few seconds until Ctrl-C. --format json prints one JSON object
    per reading, with "at" (seconds since the epoch) and "at_utc"; --format prometheus the
    Prometheus text exposition (labqueue metrics serves it over HTTP)."""
    output = "json" if args.json else args.format
    # Ctrl-C (or SIGTERM) only sets a flag that the loop reads between readings: an interrupt
    # raised inside SQLite's callbacks could be swallowed there and the watch would go on.
    stop = stop_on(signal.SIGINT, signal.SIGTERM) if args.watch is not None else StopEvent()
    with open_existing(args.db) as q:
        while not stop.is_set():
            if output == "prometheus":
                print(metrics.prometheus_text(metrics.read(q)), end="", flush=True)
            else:
                at = time.time()
                numbers = q.stats()
                per_queue = q.queue_stats()
                paused = q.paused()
                waiting = q.waiting_on_keys()
                if output == "json":
                    stamp = {"at": round(at, 3), "at_utc": listing.iso_utc(at)}
                    whole = {
                        **stamp,
                        **numbers,
                        "queues": per_queue,
                        "paused": paused,
                        "waiting_on_keys": waiting,
                    }
                    print(json.dumps(whole), flush=True)
                else:
                    if args.watch is not None:
                        clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else "\n"  # a screen, or a log
                        every = f"every {args.watch:g} s; Ctrl-C to stop"
                        where = listing.printable(redact(args.db))
                        print(f"{clear}{where} at {listing.utc(at)} UTC ({every})")
                    width = max(map(len, numbers))
                    lines = [f"{name:<{width}}  {value:>8}" for name, value in numbers.items()]
                    lines += [
                        f"paused: {listing.printable(name)} since {listing.utc(info['paused_at'])} UTC"
                        + (f" ({listing.printable(str(info['reason']))})" if info["reason"] else "")
                        for name, info in paused.items()
                    ]
                    lines += _key_waits(waiting)
                    print("\n".join(lines + _queue_table(per_queue)), flush=True)
            if args.watch is None or stop.wait(args.watch):
                break
    return 0


SHOWN_KEYS = 5  # the keys with most jobs waiting that stats names


def _key_waits(waiting: dict[str, int]) -> list[str]:
    """stats' line on jobs held back by a full concurrency key: how many, and the keys
    with most of them."""
    if not waiting:
        return []
    most = ", ".join(
        f"{listing.printable(listing.cut(k, 40))} {n}" for k, n in list(waiting.items())[:SHOWN_KEYS]
    )
    more = f", and {len(waiting) - SHOWN_KEYS} more keys" if len(waiting) > SHOWN_KEYS else ""
    return [f"waiting on a full concurrency key: {sum(waiting.values())} ({most}{more})"]


def _queue_table(per_queue: dict[str, dict[str, float | int]]) -> list[str]:
    """stats' second table: one line per named queue with live jobs."""
    if not per_queue:
        return []
    heads = ("queue", "queued", "running", "ready_now", "oldest_ready_age_s")
    rows = [heads] + [(listing.printable(name), *map(str, row.values())) for name, row in per_queue.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(heads))]
    lines = [""]
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        lines.append("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in pairs))
    return lines


def jobs(args: argparse.Namespace) -> int:
    """List the jobs stored in the queue DB, newest first. --oldest: oldest first;
    filtered by --state, --kind, --queue and --key: a table with when each was created and
    finished (UTC), or with --json one JSON object per line, its payload as JSON.
    'labqueue job DB ID' shows one job whole."""
    with open_existing(args.db) as q:
        read = q.jobs if args.oldest else q.latest_jobs
        records = read(
            state=args.state or None,
            kind=args.kind,
            queue=args.queue,
            limit=args.limit,
            concurrency_key=args.key,
        )
    if args.json:
        for record in records:
            print(listing.as_json(record))
    else:
        print("\n".join(listing.table(records)))
    return 0


def job(args: argparse.Namespace) -> int:
    """Show one job of the queue DB whole. Every field, times in UTC, the payload as
    indented JSON and the last error in full (--json: one JSON object). An unknown id
    is an error (exit code 1)."""
    with open_existing(args.db) as q:
        record = q.job(args.id)
    if record is None:
        raise JobNotFound(f"no job has id {args.id} (it never existed, or a purge removed it)")
    print(listing.as_json(record) if args.json else "\n".join(listing.whole(record)))
    return 0


def _check_selection(args: argparse.Namespace) -> None:
    """A bulk command names its jobs by ID, or selects them with --queue/--kind/--all: one
    of the two, before the queue is opened."""
    filters = args.queue is not None or args.kind is not None
    if args.ids and (filters or args.all):
        raise UsageError("name jobs by ID or select them with --queue/--kind/--all, not both")
    if not (args.ids or filters or args.all):
        raise UsageError("say which jobs: their IDs, --queue NAME and/or --kind KIND, or --all")


def _selected(args: argparse.Namespace, q: Any, states: Sequence[str]) -> list[int] | None:
    """The ids a bulk command acts on when none were named: the jobs in `states` that
    --queue/--kind/--all select (None when IDs were named: the caller reports on each)."""
    if args.ids:
        return None
    return [r.id for r in q.jobs(state=list(states), kind=args.kind, queue=args.queue)]


def requeue_dead(args: argparse.Namespace) -> int:
    """Put dead jobs of the queue DB back in the queue. Their attempts are reset; the
    ones with the given IDs, those of --queue and/or --kind, or --all. Prints the ids
    requeued, one per line. A named job that was not requeued (not dead, or no such
    job) gets a line on stderr and the exit code is 1, as for cancel."""
    _check_selection(args)
    with open_existing(args.db) as q:
        selected = _selected(args, q, ["dead"])
        done = q.requeue_dead(args.ids if selected is None else selected)
        missed = sorted(set(args.ids) - set(done))
        for job_id in missed:
            record = q.job(job_id)
            why = "no job has this id" if record is None else f"it is {record.state}, not dead"
            print(f"{PROG} requeue-dead: job {job_id} not requeued: {why}", file=sys.stderr)
    for job_id in done:
        print(job_id)
    if selected is not None and not done:
        print("no dead job matched: nothing was requeued", file=sys.stderr)
    return 1 if missed else 0


def cancel(args: argparse.Namespace) -> int:
    """Cancel jobs of the queue DB. The ones with the given IDs, or the queued and
    running jobs of --queue and/or --kind, or --all of them. A queued job will never
    run; a running job's worker is refused at its next heartbeat or report, and its
    effect never commits. Prints each id and the state it was cancelled in. A named job
    that is finished or unknown gets a line on stderr and is left as it was (exit
    code 1, as for requeue-dead)."""
    _check_selection(args)
    failed = False
    with open_existing(args.db) as q:
        selected = _selected(args, q, ["queued", "running"])
        for job_id in args.ids if selected is None else selected:
            try:
                print(f"{job_id} cancelled (was {q.cancel(job_id)})")
            except (CannotCancel, JobNotFound) as exc:
                print(f"{PROG} cancel: {exc}", file=sys.stderr)
                failed = failed or selected is None  # a job selected by filter may just have finished
        if selected == []:
            print("no queued or running job matched: nothing was cancelled", file=sys.stderr)
    return 1 if failed else 0


def purge(args: argparse.Namespace) -> int:
    """Remove old finished jobs from the queue DB. Those that finished more than
    --older-than ago (90s, 15m, 2h, 1d, 1w or seconds): done jobs, and dead or cancelled ones only when
    named with --state. Each batch of rows is a short transaction of its own, so workers
    carry on meanwhile. The newest row is always kept, so that ids are never handed out
    twice; purge says so when it kept one. --reclaim then hands the freed pages back to
    the file system (files made by labqueue; --vacuum rebuilds an older file once so
    that it can, and needs the queue quiet)."""
    states = args.state or ["done"]
    with open_existing(args.db) as q:
        result = q.purge(args.older_than, states=states, batch=args.batch, archive=args.archive)
        kept = " (archived in jobs_archive)" if args.archive else ""
        print(
            f"removed {result.removed} job(s){kept} in {result.batches} transaction(s), "
            f"the longest {result.longest_hold_s * 1000:.1f} ms"
        )
        newest = q.latest_jobs(limit=1)
        cut = q.server_time() - args.older_than
        last = newest[0] if newest else None
        if (
            last is not None
            and last.state in states
            and last.finished_at is not None
            and last.finished_at <= cut
        ):
            print(f"kept the newest row, id {newest[0].id}, so ids are never reused")
        if args.vacuum:
            q.vacuum()
            print("vacuumed: the file was rebuilt")
        if args.reclaim or args.vacuum:
            freed = q.reclaim_space()
            space = q.space()
            pages, size = space["page_count"], space["page_size"]
            print(f"freed {freed} page(s); the file has {pages} pages of {size} bytes")
    return 0


def pause(args: argparse.Namespace) -> int:
    """Pause a named queue, so that workers leave its jobs alone.

    No worker takes a job of --queue until `labqueue resume`. Jobs running now finish;
    queued ones wait, untouched; producers can still enqueue. Every worker sees the pause
    within a second. Exits 1 if the queue was paused already."""
    with open_existing(args.db) as q:
        if not q.pause(args.queue, reason=args.reason):
            since = listing.utc(q.paused()[args.queue]["paused_at"])
            print(
                f"{PROG} pause: queue {args.queue!r} was paused already (since {since} UTC)", file=sys.stderr
            )
            return 1
    print(f"paused queue {args.queue!r}: workers leave its jobs alone until '{PROG} resume'")
    return 0


def resume(args: argparse.Namespace) -> int:
    """Resume a paused queue, so that workers take its jobs again.

    Idle workers are woken. Exits 1 if --queue was not paused."""
    with open_existing(args.db) as q:
        if not q.resume(args.queue):
            print(f"{PROG} resume: queue {args.queue!r} was not paused", file=sys.stderr)
            return 1
    print(f"resumed queue {args.queue!r}")
    return 0


def health(args: argparse.Namespace) -> int:
    """Check the queue DB's health, for a probe. A container HEALTHCHECK or a Kubernetes
    exec probe gets exit code 0 and "healthy: ..." when it opens, answers and every threshold given
    holds; exit code 1 and "unhealthy: <why>" otherwise, a missing or unreadable queue
    included. --max-oldest-ready: the longest a ready job may wait (workers are down or
    too few); --max-waiting: the longest any queued job may wait since it was created,
    whatever keeps it (a kind no running worker handles, a paused queue, retries); --max-dead:
    the most dead jobs allowed."""
    try:
        with open_existing(args.db) as q:
            waiting = q.longest_waiting() if args.max_waiting is not None else None
            verdict = judge(
                q.stats(),
                max_oldest_ready=args.max_oldest_ready,
                max_dead=args.max_dead,
                max_waiting=args.max_waiting,
                longest_waiting=waiting,
            )
    except (UsageError, LabqueueError, sqlite3.Error) as exc:
        print(f"unhealthy: cannot read the queue: {redact(exc, args.db)}")
        return 1
    print(verdict.line)
    return 0 if verdict.healthy else 1


def metrics_server(args: argparse.Namespace) -> int:
    """Serve the queue DB's metrics over HTTP for Prometheus. At /metrics, in the
    text exposition format ('stats --format prometheus' prints the same): live jobs per
    queue and state, ready jobs, the oldest ready job's age, dead jobs, and jobs
    finished in the last minute. Each scrape opens the queue, reads it and closes it.
    Listens on 127.0.0.1 unless --host says otherwise; runs until SIGTERM or Ctrl-C."""
    open_existing(args.db).close()  # a missing queue is a usage error now, not a 503 later
    stop = stop_on(signal.SIGINT, signal.SIGTERM)

    def ready(server: Any) -> None:
        host, port = server.server_address[:2]
        host = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
        print(f"serving metrics of {redact(args.db)} at http://{host}:{port}/metrics", flush=True)

    try:
        metrics.serve(
            lambda: open_existing(args.db),
            args.host,
            args.port,
            ready=ready,
            stop=stop,
            allow_hosts=args.allow_host,
        )
    except OSError as exc:
        raise LabqueueError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
    return 0


def dashboard(args: argparse.Namespace) -> int:
    """Serve a web dashboard of the queue DB. Pages: the overview per named queue (ready,
    running, scheduled, dead, the oldest ready job's age, jobs finished in the last minute,
    pauses and why) with the last hour's throughput as a chart; the jobs, newest first,
    filtered by state, queue and kind; one job whole; the dead letters; the running jobs
    and how much of each lease is left. Every read is a short read-only transaction, stopped
    after a second; a missing or broken queue gives an error page and the server keeps going.
    A file this user may only read is served read-only (its actions say why they are off).

    Read-only unless --allow-actions: then its forms requeue dead jobs (one, filtered or
    all), cancel a job, pause and resume a queue (POST, with a token made afresh by each
    process against cross-site requests). With --token (or LABQUEUE_DASHBOARD_TOKEN, which
    ps does not show; 32 characters at least), every request needs it: open /?token=... once
    and a cookie carries it. Listening beyond 127.0.0.1 without a token is refused; a request
    sent to a host name it does not serve gets 421 (--allow-host). Runs until SIGTERM or Ctrl-C."""
    from .dashboard import Dashboard, check_exposure, serve

    token = args.token if args.token is not None else environment.dashboard_token()
    check_exposure(args.host, token)  # before the queue is opened or anything listens
    # A file this user may only read is served read-only: every page, no action.
    read_only = not is_postgres_url(args.db) and Path(args.db).exists() and not writable(args.db)
    open_existing(args.db, read_only=read_only).close()  # a missing queue is a usage error now
    configure_logging("INFO")
    guard_logging(args.db)
    board = Dashboard(
        lambda: open_existing(args.db, read_only=read_only, timeout=DASHBOARD_TIMEOUT),
        where=redact(args.db),
        location=args.db,
        allow_actions=args.allow_actions,
        actions_off=f"this user may only read {Path(args.db).name}" if read_only else None,
        token=token,
        allow_hosts=args.allow_host,
    )
    stop = stop_on(signal.SIGINT, signal.SIGTERM)

    def ready(server: Any) -> None:
        host, port = server.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        mode = "actions on" if board.allow_actions else "read-only"
        if read_only:
            mode = f"read-only: this user may only read {Path(args.db).name}"
        needs = "; open it once with ?token=... (the token is not shown)" if token else ""
        print(f"dashboard of {redact(args.db)} at http://{host}:{port}/ ({mode}{needs})", flush=True)

    try:
        serve(board, args.host, args.port, ready=ready, stop=stop)
    except OSError as exc:
        raise LabqueueError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
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


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(  # argparse's, its usage errors redacted (labqueue.redaction)
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        epilog=f"'{PROG} COMMAND --help' documents each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        fn: Callable[[argparse.Namespace], int], name: str | None = None, *, db_from_env: bool = False
    ) -> argparse.ArgumentParser:
        doc = fn.__doc__ or ""
        sub = commands.add_parser(
            name or fn.__name__,
            help=doc.split("\n\n")[0].split(". ")[0].replace("\n", " ").rstrip("."),
            description=doc.replace("\n    ", "\n"),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(run=fn, parser=sub)
        if db_from_env:  # the only positional argument, so it may come from LABQUEUE_DB
            sub.add_argument(
                "db",
                metavar="DB",
                nargs="?",
                help=f"the queue's SQLite file, or a postgresql:// URL (default ${environment.DB_VARIABLE})",
            )
        else:
            sub.add_argument("db", metavar="DB", help="the queue's SQLite file, or a postgresql:// URL")
        return sub

    def selection(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--queue", type=queue_name, metavar="NAME", help=f"{what} of this named queue")
        p.add_argument("--kind", type=kind, help=f"{what} of this kind")
        p.add_argument("--all", action="store_true", help=f"every one of the {what}")

    p = command(worker, db_from_env=True)
    PoolSettings.add_options(p)
    WorkerSettings.add_options(p)
    environment.worker_defaults(p)

    p = command(enqueue)
    p.add_argument("kind", type=kind, metavar="KIND", help="the job's kind, as registered with @handler")
    p.add_argument("payload", metavar="PAYLOAD_JSON", help="the payload as JSON; '-': JSON lines on stdin")
    p.add_argument("--delay", type=duration, default=0.0, metavar="DURATION", help="ready after this long")
    p.add_argument(
        "--max-attempts",
        type=max_attempts,
        metavar="N",
        help=f"attempts before it is dead (default {DEFAULT_MAX_ATTEMPTS})",
    )
    p.add_argument("--dedupe-key", metavar="KEY", help="add nothing if a job with this key is already stored")
    p.add_argument("--priority", type=priority, default=0, metavar="N", help="higher runs first (default 0)")
    p.add_argument("--queue", type=queue_name, default=DEFAULT_QUEUE, metavar="NAME", help="the named queue")

    p = command(stats, db_from_env=True)
    p.add_argument(
        "--format",
        choices=("table", "json", "prometheus"),
        default="table",
        help="a table (default), one JSON object per reading, or Prometheus text",
    )
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument(
        "--watch",
        type=positive_duration,
        nargs="?",
        const=DEFAULT_WATCH,
        metavar="DURATION",
        help=f"refresh every DURATION (default {DEFAULT_WATCH:g} s) until Ctrl-C",
    )

    p = command(jobs, db_from_env=True)
    p.add_argument("--state", action="append", choices=STATES, help="only jobs in this state (repeatable)")
    p.add_argument("--kind", type=kind, help="only jobs of this kind")
    p.add_argument("--queue", type=queue_name, metavar="NAME", help="only jobs of this named queue")
    p.add_argument("--key", type=concurrency_key, metavar="KEY", help="only jobs of this concurrency key")
    p.add_argument("--limit", type=count, metavar="N", help="at most N jobs (default: all)")
    p.add_argument("--oldest", action="store_true", help="oldest first (default: newest first)")
    p.add_argument("--json", action="store_true", help="one JSON object per job and line")

    p = command(job)
    p.add_argument("id", type=job_id, metavar="ID", help="the job's id")
    p.add_argument("--json", action="store_true", help="one JSON object, its payload as JSON")

    p = command(requeue_dead, "requeue-dead")
    p.add_argument("ids", nargs="*", type=job_id, metavar="ID", help="these dead jobs")
    selection(p, "dead jobs")

    p = command(cancel)
    p.add_argument("ids", nargs="*", type=job_id, metavar="ID", help="the jobs to cancel")
    selection(p, "queued and running jobs")

    p = command(purge, db_from_env=True)
    p.add_argument(
        "--older-than",
        type=duration,
        required=True,
        metavar="DURATION",
        help="remove jobs that finished at least this long ago (90s, 15m, 2h, 1d, 1w or seconds)",
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

    for fn in (pause, resume):
        p = command(fn, db_from_env=True)
        p.add_argument("--queue", type=queue_name, required=True, metavar="NAME", help="the named queue")
        if fn is pause:
            p.add_argument("--reason", help="why, shown by labqueue stats")

    p = command(health, db_from_env=True)
    p.add_argument(
        "--max-oldest-ready",
        type=duration,
        metavar="DURATION",
        help="unhealthy when the oldest ready job has waited longer (e.g. 5m)",
    )
    p.add_argument(
        "--max-waiting",
        type=duration,
        metavar="DURATION",
        help="unhealthy when a queued job was created longer ago than this, whatever keeps it (e.g. 1h)",
    )
    p.add_argument("--max-dead", type=count, metavar="N", help="unhealthy with more dead jobs than this")

    def listening(p: argparse.ArgumentParser, default_port: int, beyond: str) -> None:
        p.add_argument(
            "--host",
            type=listen_host,
            default="127.0.0.1",
            help=f"the address to listen on (default 127.0.0.1; {beyond})",
        )
        p.add_argument(
            "--port",
            type=port,
            default=default_port,
            help=f"the port (default {default_port}; 0: any free one)",
        )
        p.add_argument(
            "--allow-host",
            action="append",
            default=[],
            type=allowed_host,
            metavar="NAME",
            help="answer requests sent to this host name too (repeatable): a name the server is "
            "reached by, or a proxy that forwards its own Host, as JupyterLab's /proxy/PORT/ does; "
            "* for any (a dashboard then needs a token). Without it only localhost, the loopback "
            "addresses and --host are answered (and any IP address when --host is 0.0.0.0 or ::); "
            "other names get 421, so a DNS-rebinding web page reads nothing",
        )

    listening(command(metrics_server, "metrics", db_from_env=True), DEFAULT_METRICS_PORT, EVERY_INTERFACE)
    p = command(dashboard, db_from_env=True)
    listening(p, DEFAULT_DASHBOARD_PORT, f"{EVERY_INTERFACE}, with a token")
    p.add_argument(
        "--allow-actions", action="store_true", help="let the pages requeue, cancel, pause and resume"
    )
    p.add_argument(
        "--token",
        help="every request must carry this token, 32 characters at least "
        "(default $LABQUEUE_DASHBOARD_TOKEN, which ps does not show)",
    )

    p = command(migrate, db_from_env=True)
    p.add_argument("--dry-run", action="store_true", help="print the steps it would take; change nothing")
    p.add_argument("--status", action="store_true", help="print what is applied and pending; change nothing")
    p.add_argument(
        "--contract",
        action="store_true",
        help="also the steps older labqueue versions cannot run beside (once none runs)",
    )
    p.add_argument(
        "--lock-timeout",
        type=positive_duration,
        default=5.0,
        metavar="DURATION",
        help="how long a step waits for a lock before it backs off and tries again (default 5 s)",
    )
    p.add_argument("--schema", metavar="NAME", help="PostgreSQL: the queue's schema (default labqueue)")

    for name, (_, help_text, _) in TOOLS.items():
        commands.add_parser(
            name,
            help=f"{help_text} ('{PROG} {name} --help' for its options)",
            add_help=False,
        )
    return parser


def migrate(args: argparse.Namespace) -> int:
    """Upgrade the queue's schema DB to this labqueue's, while it runs. Opening a queue
    never migrates it: a queue older than this labqueue runs on is refused, naming this
    command. Each step waits at most --lock-timeout for a lock, then backs off and tries
    again; on PostgreSQL indexes are built CONCURRENTLY and each version is recorded in the
    schema's labqueue_migrations table. --dry-run prints what it would do, --status what is
    applied and pending. Expand steps (the default) leave the queue usable by the labqueue
    version before this one; --contract also takes the steps that do not, once every
    producer and worker runs this version (docs/package/howto/upgrades.md)."""
    from . import migrate as migrating

    if args.status or args.dry_run:
        plan = migrating.migrate(args.db, dry_run=True, contract=args.contract, schema=args.schema)
        for line in plan.lines():
            print(redact(line, args.db))
        return 0
    plan = migrating.migrate(
        args.db,
        contract=args.contract,
        lock_timeout=args.lock_timeout,
        schema=args.schema,
        say=lambda line: print(redact(line, args.db), flush=True),
    )
    print(redact(plan.summary(), args.db))
    return 0




def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        return tool(argv[0], argv[1:])
    # LABQUEUE_* variables are read here, by the command that uses them, when its command line
    # does not give their option (labqueue.environment): a bad one is a usage error naming it.
    args = build_parser().parse_args(argv)
    if args.db is None:
        args.db = environment.db_from_env()
        if args.db is None:
            args.parser.error(f"the following arguments are required: DB (or set {environment.DB_VARIABLE})")
    try:
        return args.run(args)
    except (UsageError, InvalidArgument) as exc:  # a bad argument, found by us or by the queue
        parser: argparse.ArgumentParser = args.parser
        parser.error(redact(exc, args.db))  # exits with code 2
    except LabqueueError as exc:
        print(f"{PROG} {args.command}: error: {redact(exc, args.db)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not is_database_error(exc):
            raise
        # A database error labqueue has no name for: one line, never a traceback.
        detail = redact(" ".join(str(exc).split()), args.db) or type(exc).__name__
        where = redact(args.db)
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
