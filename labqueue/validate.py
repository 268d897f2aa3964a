"""Checks on the arguments the queue is given, in one place.

Each function returns the value it accepts (converted where that is its job) or
raises InvalidArgument naming the argument and the value, before anything is written.
The bounds are the ones SQLite and the queue can honour: a number SQLite cannot store
would otherwise fail later, as an OverflowError, after a transaction had begun.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

from .errors import InvalidArgument
from .redaction import redact

# SQLite stores integers as signed 64-bit numbers.
MAX_SQLITE_INT = 2**63 - 1
# The most jobs one claim() may lease: a batch a worker can plausibly run before its lease ends.
MAX_CLAIM_LIMIT = 10_000

STATES = ("queued", "running", "done", "dead", "cancelled")
# States a job cannot leave on its own: what purge() may remove.
FINISHED_STATES = ("done", "dead", "cancelled")
# Priorities fit PostgreSQL's INTEGER as well as SQLite's: the same job moves between backends.
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
DEFAULT_QUEUE = "default"
# A queue's defaults (JobQueue's and PgJobQueue's), stated here once: the command lines' help
# prints them from here.
DEFAULT_LEASE = 30.0
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BACKOFF_BASE = 1.0  # the first retry's backoff ceiling, in seconds; it doubles per attempt
DEFAULT_BACKOFF_CAP = 60.0
# The longest names (kind, queue, worker) and dedupe keys, in UTF-8 bytes, on every backend:
# each is an index key, and PostgreSQL refuses a B-tree entry over about 2,700 bytes, so a
# longer one would fail at the INSERT. Far above any real name or key.
MAX_NAME_BYTES = 255
MAX_KEY_BYTES = 1024
MAX_CONCURRENCY_LIMIT = 1_000_000
# Durations (leases, delays, periods, waits) every clock labqueue reads can honour. The longest
# is a century: a moment that far on is still a date Python can show, and a wait that long is
# within threading.TIMEOUT_MAX (292 years on Linux). A duration above zero is at least a
# microsecond: a time of today's epoch in float seconds steps by 0.24 us, so a shorter one is
# zero to the clock (and a period that short overflows the period arithmetic).
MAX_SECONDS = 100 * 365.25 * 86400
MIN_SECONDS = 1e-6
# The most worker processes one supervisor runs: far above the CPUs of any machine, and far
# below what would exhaust its descriptors and memory before the first worker started.
MAX_WORKERS = 1024


def positive(name: str, value: object, *, allow_zero: bool = False) -> float:
    """A finite number above zero (or zero too, with allow_zero), as a float."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    try:
        ok = ok and math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an int too large for a float
        ok = False
    if not ok or value < 0 or (value == 0 and not allow_zero):  # type: ignore[operator]
        need = "zero or more" if allow_zero else "more than zero"
        raise InvalidArgument(f"{name} must be a finite number {need}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    """A duration: positive(), and within the bounds every clock can honour (duration_bound)."""
    number = positive(name, value, allow_zero=allow_zero)
    bound = duration_bound(number, allow_zero=allow_zero)
    if bound is not None:
        raise InvalidArgument(f"{name} must be {bound}, got {value!r}")
    return number


def duration_bound(value: float, *, allow_zero: bool = True) -> str | None:
    """The bound a finite duration of `value` seconds (zero or more) breaks, in words, or
    None: the one statement of MAX_SECONDS and MIN_SECONDS, for seconds() and the duration
    parser."""
    if value > MAX_SECONDS:
        return f"at most {MAX_SECONDS:.0f} s (100 years)"
    if 0 < value < MIN_SECONDS:
        least = f"{'zero or ' if allow_zero else ''}at least {MIN_SECONDS:g} s"
        return f"{least} (a shorter duration is zero to the clock)"
    return None


def workers(name: str, value: object) -> int:
    """How many worker processes a supervisor runs: 0 to MAX_WORKERS."""
    return whole(name, value, low=0, high=MAX_WORKERS, why="MAX_WORKERS")


def whole(name: str, value: object, *, low: int, high: int = MAX_SQLITE_INT, why: str = "") -> int:
    """A whole number (not a bool) from `low` to `high`."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        limit = f"from {low} to {high}" + (f" ({why})" if why else "")
        raise InvalidArgument(f"{name} must be a whole number {limit}, got {value!r}")
    return value


def attempts(name: str, value: object) -> int:
    """max_attempts: at least 1, and storable by SQLite."""
    return whole(name, value, low=1, why="SQLite stores 64-bit integers")


def claim_limit(value: object) -> int:
    return whole("limit", value, low=1, high=MAX_CLAIM_LIMIT, why="MAX_CLAIM_LIMIT")


def read_limit(value: object) -> int:
    """jobs(limit=...): zero or more; None (no limit) is handled by the caller."""
    return whole("limit", value, low=0, why="or None for no limit")


def job_id(value: object) -> int:
    """A job id as SQLite can store it (a larger one cannot name any row)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"a job id must be a whole number, got {value!r}")
    if not -MAX_SQLITE_INT - 1 <= value <= MAX_SQLITE_INT:
        raise InvalidArgument(f"a job id must fit in SQLite's 64-bit integers, got {value!r}")
    return value


def job_ids(values: Iterable[object]) -> list[int]:
    values = list(values)
    bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise InvalidArgument(f"ids must be whole numbers, got {bad[0]!r}")
    return [job_id(v) for v in values]


def text(name: str, value: object, *, empty: bool = False) -> str:
    """A string SQLite and every tool reading the file can hold: valid UTF-8 (no lone
    surrogate) and no NUL character."""
    if not isinstance(value, str) or (not value and not empty):
        need = "a string" if empty else "a non-empty string"
        raise InvalidArgument(f"{name} must be {need}, got {value!r}")
    if "\x00" in value:
        raise InvalidArgument(f"{name} must not contain a NUL character, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{name} must be text that UTF-8 can encode, got {value!r} ({exc.reason} at {exc.start})"
        ) from None
    return value


def name(what: str, value: object, *, limit: int = MAX_NAME_BYTES) -> str:
    """A name (kind, queue, worker): text() of at most `limit` UTF-8 bytes."""
    value = text(what, value)
    size = len(value.encode("utf-8"))
    if size > limit:
        raise InvalidArgument(f"{what} must be at most {limit} bytes of UTF-8, got {size}: {value[:40]!r}...")
    return value


def kind(value: object) -> str:
    return name("kind", value)


def dedupe_key(value: object) -> str | None:
    """A dedupe key: None, or text of at most MAX_KEY_BYTES UTF-8 bytes (empty allowed)."""
    key = optional_text("dedupe_key", value)
    if key is not None and len(key.encode("utf-8")) > MAX_KEY_BYTES:
        size = len(key.encode("utf-8"))
        raise InvalidArgument(
            f"dedupe_key must be at most {MAX_KEY_BYTES} bytes of UTF-8, got {size}: {key[:40]!r}..."
        )
    return key


def concurrency_key(value: object) -> str | None:
    """A concurrency key: None, or non-empty text of at most MAX_KEY_BYTES UTF-8 bytes."""
    key = optional_text("concurrency_key", value)
    if key == "":
        raise InvalidArgument("concurrency_key must not be empty: give None for a job without one")
    if key is not None and len(key.encode("utf-8")) > MAX_KEY_BYTES:
        size = len(key.encode("utf-8"))
        raise InvalidArgument(
            f"concurrency_key must be at most {MAX_KEY_BYTES} bytes of UTF-8, got {size}: {key[:40]!r}..."
        )
    return key


def concurrency_limit(value: object) -> int:
    """How many jobs of one concurrency key may run at once: 1 to MAX_CONCURRENCY_LIMIT."""
    return whole("concurrency_limit", value, low=1, high=MAX_CONCURRENCY_LIMIT)


def priority(value: object) -> int:
    """A job's priority: a whole number, higher runs first (0 is the default)."""
    return whole("priority", value, low=MIN_PRIORITY, high=MAX_PRIORITY, why="a 32-bit integer")


def queue_name(value: object) -> str:
    return name("queue", value)


def queue_names(values: object) -> list[str] | None:
    """The queues a worker takes from: None (every queue), or a non-empty list of names
    without repeats."""
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidArgument(f"queues must be a list of queue names or None, got {values!r}")
    names = [queue_name(v) for v in values]
    if not names:
        raise InvalidArgument("queues must name at least one queue (None means every queue), got []")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidArgument(f"queues names {', '.join(repeated)} more than once, got {values!r}")
    return names


def finished_states(values: object) -> list[str]:
    """The states purge() removes: one or more of the finished states, never a live one."""
    chosen = [values] if isinstance(values, str) else values
    if not isinstance(chosen, Iterable):
        raise InvalidArgument(f"states must be one or more of {', '.join(FINISHED_STATES)}, got {values!r}")
    chosen = list(chosen)
    if not chosen or any(s not in FINISHED_STATES for s in chosen):
        raise InvalidArgument(
            f"states must be one or more of {', '.join(FINISHED_STATES)} (queued and running jobs "
            f"are never purged), got {values!r}"
        )
    return chosen


def flag(name: str, value: object) -> bool:
    """A setting that is True or False, and nothing else (not 0, not "no")."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, got {value!r}")
    return value


def optional_text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string or None, got {value!r}")
    return text(name, value, empty=True)


def states(state: str | Iterable[str] | None) -> list[str] | None:
    if state is None:
        return None
    chosen = [state] if isinstance(state, str) else list(state)
    unknown = [s for s in chosen if s not in STATES]
    if unknown or not chosen:
        raise InvalidArgument(f"state must be one or more of {', '.join(STATES)}, got {state!r}")
    return chosen


def db_path(path: Any) -> str:
    """A database path as text SQLite can open: no NUL, encodable as UTF-8."""
    try:
        name = os.fspath(path)
    except TypeError:
        raise InvalidArgument(f"path must be a str or os.PathLike, got {redact(repr(path))}") from None
    if isinstance(name, bytes):
        raise InvalidArgument(f"path must be text, not bytes, got {redact(repr(path))}")
    if "\x00" in name:
        raise InvalidArgument(f"path must not contain a NUL character, got {redact(repr(name))}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"path must be text that UTF-8 can encode (SQLite's), got {redact(repr(name))}"
        ) from None
    return name
