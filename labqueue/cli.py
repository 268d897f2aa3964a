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

One function per command (labqueue.commands), its docstring its help; here the parser
and the dispatch. Bad arguments get a one-line usage error and exit code 2; labqueue's
own errors a one-line message and exit code 1. The commands that take an existing queue
(every one but worker and enqueue) never create a file. Durations take a unit: 90s, 15m,
2h, 1d, 1w (or plain seconds). LABQUEUE_* environment variables stand in for some
options (labqueue.environment). bench and chaos hand their arguments to the tools,
imported only when asked for.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from . import __version__, environment
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
from .commands import PROG, UsageError, open_existing  # noqa: F401 (labqueue.cli's API)
from .commands.operating import cancel, migrate, pause, purge, requeue_dead, resume
from .commands.reading import job, jobs, stats
from .commands.serving import dashboard, health, metrics_server
from .commands.working import enqueue, worker
from .durations import duration, positive_duration
from .errors import (
    InvalidArgument,
    LabqueueError,
    is_database_error,
)
from .queue import STATES
from .redaction import ArgumentParser, redact
from .settings import PoolSettings, WorkerSettings
from .validate import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, FINISHED_STATES

DEFAULT_WATCH = 2.0
DEFAULT_METRICS_PORT = 9187
DEFAULT_DASHBOARD_PORT = 9188
EVERY_INTERFACE = "0.0.0.0 or :: for every interface"
TOOLS = {
    "bench": ("labqueue.bench.run", "the benchmark: labqueue against other Python queues", "bench"),
    "chaos": ("labqueue.chaos.supervisor", "the chaos run: workers killed and frozen at random", "notebooks"),
}


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
