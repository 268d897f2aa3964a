"""Settings from ``LABQUEUE_*`` environment variables, for containers and unit files.

One mapping, in one place: each variable stands in for one command-line option, and an
option given on the command line wins over its variable. A bad value is refused like
the option's own bad value, naming the variable.

    LABQUEUE_DB           the queue (file or postgresql:// URL) for worker, stats, jobs,
                          purge, health and metrics when DB is not given
    LABQUEUE_HANDLERS     --handlers, comma-separated modules
    LABQUEUE_CONCURRENCY  --concurrency
    LABQUEUE_LEASE        --lease
    LABQUEUE_GRACE        --grace
    LABQUEUE_QUEUES       --queues
    LABQUEUE_LOG_LEVEL    --log-level
    LABQUEUE_LOG_FORMAT   --log-format
    LABQUEUE_JOB_TIMEOUT  --job-timeout
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from .errors import InvalidArgument

DB_VARIABLE = "LABQUEUE_DB"
HANDLERS_VARIABLE = "LABQUEUE_HANDLERS"
# variable: the destination of the `labqueue worker` option it stands in for
WORKER_VARIABLES = {
    "LABQUEUE_CONCURRENCY": "concurrency",
    "LABQUEUE_LEASE": "lease",
    "LABQUEUE_GRACE": "grace",
    "LABQUEUE_QUEUES": "queues",
    "LABQUEUE_LOG_LEVEL": "log_level",
    "LABQUEUE_LOG_FORMAT": "log_format",
    "LABQUEUE_JOB_TIMEOUT": "job_timeout",
}


def worker_defaults(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Make the worker options' variables their defaults, each checked by the option's own
    type and choices (InvalidArgument naming the variable), so the command line wins."""
    environ = os.environ if environ is None else environ
    actions = {action.dest: action for action in parser._actions}
    defaults = {}
    for variable, dest in WORKER_VARIABLES.items():
        raw = environ.get(variable)
        if raw is None or raw == "":
            continue
        action = actions[dest]
        try:
            value = action.type(raw) if callable(action.type) else raw
        except (argparse.ArgumentTypeError, ValueError, InvalidArgument) as exc:
            raise InvalidArgument(f"{variable}={raw!r}: {exc}") from None
        if action.choices is not None and value not in action.choices:
            raise InvalidArgument(f"{variable}={raw!r}: expected one of {', '.join(action.choices)}")
        defaults[dest] = value
    parser.set_defaults(**defaults)


def handlers_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """LABQUEUE_HANDLERS as a list of modules (empty when unset)."""
    environ = os.environ if environ is None else environ
    return [name.strip() for name in environ.get(HANDLERS_VARIABLE, "").split(",") if name.strip()]


def db_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """LABQUEUE_DB, or None when unset or empty."""
    environ = os.environ if environ is None else environ
    return environ.get(DB_VARIABLE) or None
