"""labqueue health, metrics and dashboard: a probe, a Prometheus endpoint, a web page."""

from __future__ import annotations

import argparse
import signal
import sqlite3
from pathlib import Path
from typing import Any

from .. import environment, metrics
from ..backends import is_postgres_url
from ..errors import LabqueueError
from ..health import judge
from ..joblog import configure_logging
from ..queue import writable
from ..redaction import guard_logging, redact
from ..signals import stop_on
from . import UsageError, open_existing

# How long a dashboard page waits for a lock (a file being migrated, a locked table) before
# it shows an error page instead: a page, not a worker.
DASHBOARD_TIMEOUT = 2.0


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
    from ..dashboard import Dashboard, check_exposure, serve

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
