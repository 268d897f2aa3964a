"""Settings from ``LABQUEUE_*`` environment variables, for containers and unit files.

One mapping, in one place: each variable stands in for one command-line option, and an
option given on the command line wins over its variable. A variable is read only by the
command that has its option, and only when the command line does not give the option: a
bad LABQUEUE_CONCURRENCY cannot break `labqueue stats`, nor a bad LABQUEUE_LEASE a worker
started with --lease. A bad value is refused like the option's own bad value, naming the
option and the variable.

    LABQUEUE_DB           the queue (file or postgresql:// URL) for worker, stats, jobs,
                          purge, health, metrics and dashboard when DB is not given
    LABQUEUE_DASHBOARD_TOKEN
                          the dashboard's access token, when --token is not given
    LABQUEUE_HANDLERS, LABQUEUE_CONCURRENCY, LABQUEUE_LEASE, ...
                          the worker's options: each is declared with its option in
                          labqueue.settings, and `labqueue worker --help` names it
    LABQUEUE_WORKER_SETTINGS
                          set by a supervisor for each worker process it starts: its
                          name, lease, idle exit and settings, whole, as JSON

This module is the one place that reads them (os.environ) for the commands and workers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from .errors import InvalidArgument
from .settings import PoolSettings, Repeatable, WorkerSettings, WorkerStart

DB_VARIABLE = "LABQUEUE_DB"
DASHBOARD_TOKEN_VARIABLE = "LABQUEUE_DASHBOARD_TOKEN"
# A worker process's settings, whole, as its supervisor passes them (labqueue.procs).
WORKER_SETTINGS_VARIABLE = "LABQUEUE_WORKER_SETTINGS"


def worker_variables() -> dict[str, str]:
    """variable: the `labqueue worker` option (its dest) it stands in for, as labqueue.settings
    declares them."""
    return {**PoolSettings.variables(), **WorkerSettings.variables()}


class FromVariable(str):
    """A variable's text standing as its option's default. argparse converts a default that
    is a string with the option's type only when the parsed command has the option and its
    command line does not give it: then, and only then, is the variable read."""

    variable: str

    def __new__(cls, text: str, variable: str) -> FromVariable:
        made = super().__new__(cls, text)
        made.variable = variable
        return made


def worker_defaults(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Make the worker options' variables their defaults (FromVariable), each checked when
    it is used by the option's own type and choices: a bad one is a usage error naming the
    option and the variable, and the command line wins."""
    environ = os.environ if environ is None else environ
    actions = {action.dest: action for action in parser._actions}
    defaults = {}
    for variable, dest in worker_variables().items():
        raw = environ.get(variable)
        if raw is None or raw == "":
            continue
        actions[dest].type = _reading_variables(actions[dest])
        defaults[dest] = FromVariable(raw, variable)
    parser.set_defaults(**defaults)


def _reading_variables(action: argparse.Action) -> Callable[[str], Any]:
    """The option's type, which also reads a FromVariable: by the same type and choices,
    naming the variable when its value is bad. A repeatable option's variable is a list,
    comma-separated (LABQUEUE_HANDLERS=myapp.jobs,other.jobs)."""
    convert = action.type if callable(action.type) else None
    choices = action.choices

    def one(variable: str, raw: str) -> Any:
        try:
            value = raw if convert is None else convert(raw)
        except (argparse.ArgumentTypeError, ValueError, InvalidArgument) as exc:
            raise argparse.ArgumentTypeError(f"{variable}={raw!r}: {exc}") from None
        if choices is not None and value not in choices:
            raise argparse.ArgumentTypeError(f"{variable}={raw!r}: expected one of {', '.join(choices)}")
        return value

    def typed(text: str) -> Any:
        if not isinstance(text, FromVariable):
            return text if convert is None else convert(text)
        if isinstance(action, Repeatable):
            return [one(text.variable, part.strip()) for part in text.split(",") if part.strip()]
        return one(text.variable, str(text))

    typed.__name__ = getattr(convert, "__name__", "str")  # argparse names a bad value by its type
    return typed


def db_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """LABQUEUE_DB, or None when unset or empty."""
    return _given(DB_VARIABLE, environ)


def dashboard_token(environ: Mapping[str, str] | None = None) -> str | None:
    """LABQUEUE_DASHBOARD_TOKEN, or None when unset or empty."""
    return _given(DASHBOARD_TOKEN_VARIABLE, environ)


def _given(variable: str, environ: Mapping[str, str] | None) -> str | None:
    return (os.environ if environ is None else environ).get(variable) or None


def take_worker_start(environ: MutableMapping[str, str] | None = None) -> WorkerStart | None:
    """The settings a supervisor passed this worker process whole (None: none were), taken
    out of the environment, so that no process a handler starts inherits them. A bad value
    is InvalidArgument naming the variable."""
    environ = os.environ if environ is None else environ
    text = environ.pop(WORKER_SETTINGS_VARIABLE, None)
    if text is None:
        return None
    try:
        return WorkerStart.from_json(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{WORKER_SETTINGS_VARIABLE}: {exc}") from None
