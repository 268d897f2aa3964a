"""The command lines' argument types: text to a value, or a one-line usage error naming it.

Each is an argparse `type=`: it raises argparse.ArgumentTypeError, whose sentence argparse
prints after the option's name ("argument --batch: expected ..."), exit code 2. The
`labqueue` command (labqueue.cli) and a worker's options (labqueue.settings) use them;
durations are labqueue.durations' (`duration`, `positive_duration`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from . import hosts, validate
from .errors import InvalidArgument
from .fairness import parse_queues
from .queue import SYNCHRONOUS_LEVELS
from .schedule import parse_every

T = TypeVar("T")


def refusing(convert: Callable[[str], T]) -> Callable[[str], T]:
    """`convert` as an argument type: its InvalidArgument becomes a usage error."""

    def typed(text: str) -> T:
        try:
            return convert(text)
        except InvalidArgument as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = convert.__name__
    return typed


def kept_as_written(check: Callable[[str], Any]) -> Callable[[str], str]:
    """An argument type that checks the text with `check` and keeps it as written."""

    def as_written(text: str) -> str:
        check(text)
        return text

    as_written.__name__ = check.__name__
    return refusing(as_written)


# -- numbers --------------------------------------------------------------------------------


def whole_number(text: str, *, low: int = 1, noun: str = "a whole number") -> int:
    """A whole number of at least `low` (1 unless told); `noun` names it in the error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
    if value < low:
        bound = "zero or more" if low == 0 else f"at least {low}"
        raise argparse.ArgumentTypeError(f"expected {noun} of {bound}, got {text!r}")
    return value


def count(text: str) -> int:
    """Zero or more (--limit, --max-dead)."""
    return whole_number(text, low=0)


def job_id(text: str) -> int:
    return whole_number(text, noun="a job id")


def priority(text: str) -> int:
    return whole_number(text, low=-(2**31), noun="a priority")


def max_attempts(text: str) -> int:
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def concurrency(text: str) -> int:
    """--concurrency: 1 to MAX_WORKERS worker processes."""
    value = whole_number(text, noun="a whole number of workers")
    if value > validate.MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"expected from 1 to {validate.MAX_WORKERS} workers (MAX_WORKERS), got {text!r}"
        )
    return value


def batch_size(text: str) -> int:
    """--batch: 1 to MAX_CLAIM_LIMIT jobs, refused here rather than by every worker started."""
    value = whole_number(text)
    if value > validate.MAX_CLAIM_LIMIT:
        raise argparse.ArgumentTypeError(
            f"expected at most {validate.MAX_CLAIM_LIMIT} jobs (MAX_CLAIM_LIMIT), got {text!r}"
        )
    return value


def reconnect_limit(text: str) -> int:
    """--reconnect-limit: a whole number of attempts, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of attempts, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def port(text: str) -> int:
    value = whole_number(text, low=0, noun="a port number")
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number up to 65535, got {text!r}")
    return value


# -- names ----------------------------------------------------------------------------------


def not_empty(noun: str) -> Callable[[str], str]:
    """An argument type for a name that may be anything but empty ("a job kind")."""

    def named(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError(f"{noun} cannot be empty")
        return text

    return named


kind = not_empty("a job kind")
concurrency_key = not_empty("a concurrency key")
queue_name = not_empty("a queue name")


def module_name(text: str) -> str:
    """--handlers MODULE: a name, never one that a command line would read as an option."""
    try:
        validate.text("handler module", text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not text or text.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"a handler module name cannot be empty or begin with '-', got {text!r}"
        )
    return text


def sync_level(text: str) -> str:
    level = text.upper()
    if level not in SYNCHRONOUS_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(SYNCHRONOUS_LEVELS)}, got {text!r}")
    return level


queues_option = kept_as_written(parse_queues)  # --queues mail:3,reports
every_option = kept_as_written(parse_every)  # --every report=60
allowed_host = refusing(hosts.allowed_name)  # --allow-host


def listen_host(text: str) -> str:
    """--host of metrics and dashboard."""
    from .metrics import listen_host as checked  # http.server: not imported by every worker process

    return refusing(checked)(text)
