"""A worker's settings, declared once.

Each field of WorkerSettings is one option of every worker process (`python -m
labqueue.worker`, which `labqueue worker` starts): its name, type, default, help and,
where one stands in for it, its LABQUEUE_* variable. PoolSettings holds the options of
the supervisor alone (`labqueue worker --concurrency ...`). Everything else derives from
the fields:

- add_options(parser): the command line's options, each help naming its variable;
- variables(): the LABQUEUE_* variables (labqueue.environment reads them);
- from_args(args): the settings back from parsed arguments;
- as_json() and from_json(): the settings whole, as a worker process started by a
  supervisor receives them with its name, lease and idle exit (WorkerStart, one JSON value
  in its environment: labqueue.procs.worker_environment);
- the worker loop (labqueue.worker), WorkerPool and the chaos harness take a WorkerSettings.

Adding a worker option is adding a field here (and using it in the loop): it reaches the
command line, its variable and every worker process with nothing else written.

Two idle exits, on purpose: worker.run, WorkerPool, start_worker and ``python -m
labqueue.worker`` leave after DEFAULT_IDLE_EXIT seconds with nothing to do, because code
that starts workers (a test, a notebook, a script draining a queue) wants them to end
once the work is done, as rq's burst mode does; ``labqueue worker``, the operator's
service, runs until stopped unless given --idle-exit, because a service that leaves when
the queue is empty for a moment would only be restarted by its systemd unit or container.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import validate
from .arguments import (
    batch_size,
    concurrency,
    every_option,
    module_name,
    queues_option,
    reconnect_limit,
    sync_level,
    whole_number,
)
from .durations import duration, positive_duration
from .errors import InvalidArgument
from .fairness import parse_queues
from .joblog import LOG_FORMATS
from .queue import DEFAULT_SYNCHRONOUS, SYNCHRONOUS_LEVELS
from .schedule import Every, parse_every
from .validate import DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP, DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS

DEFAULT_IDLE_EXIT = 2.0  # the library's; `labqueue worker` runs until stopped (see above)
DEFAULT_POLL = 0.05
# Group commit: a worker claims up to BATCH ready jobs at once and reports them (and claims
# the next batch) in one write transaction. A crash re-runs at most one batch.
DEFAULT_BATCH = 10
# A finished job is done only once its transaction commits. Within a batch the worker
# commits what has finished whenever this much time has passed since its last commit,
# so slow jobs are reported about as soon as they finish and only fast ones are grouped.
DEFAULT_COMMIT_INTERVAL = 0.05
# With --purge-after, how often a worker purges (each worker of a pool does; a purge that
# finds nothing costs one read).
DEFAULT_PURGE_EVERY = 60.0
DEFAULT_CONCURRENCY = 1
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_LOG_LEVEL = "INFO"
DEFAULT_LOG_FORMAT = "text"


# -- how a field is an option ------------------------------------------------------------


class Repeatable(argparse.Action):
    """argparse's "append", except that the first value given replaces the default (what a
    LABQUEUE_* variable says, labqueue.environment) instead of adding to it."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        given = getattr(namespace, self.dest, None)
        items = [] if given is None or given is self.default else list(given)
        setattr(namespace, self.dest, [*items, values])


@dataclass(frozen=True)
class Option:
    """The command-line side of a settings field. A bool field is a switch (its flag sets
    the opposite of the default); a tuple field is repeatable (its variable, comma-separated)."""

    flag: str
    help: str
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # text to value, raising ArgumentTypeError
    env: str | None = None  # the LABQUEUE_* variable that stands in for it
    choices: tuple[str, ...] | None = None


def option(default: Any, flag: str, help: str, **how: Any) -> Any:
    """A settings field: its default, and how the command line (and environment) give it."""
    return field(default=default, metadata={"option": Option(flag, help, **how)})


S = TypeVar("S", bound="Settings")


class Settings:
    """What the settings types share: every field an option (see `option`)."""

    @classmethod
    def options(cls) -> list[tuple[dataclasses.Field, Option]]:
        """Each field with its option (flag, help, variable), in declaration order."""
        return [(f, f.metadata["option"]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser, *, variables: bool = True) -> None:
        """Each field as an option of `parser` (its dest the field's name); the help says
        the default and, for a command that reads them (`variables`), names the variable."""
        for f, opt in cls.options():
            named = f" [env var: {opt.env}]" if opt.env and variables else ""
            common: dict[str, Any] = {"dest": f.name, "help": opt.help + named}
            if opt.parse is not None:
                common["type"] = opt.parse
            if isinstance(f.default, bool):
                parser.add_argument(opt.flag, action="store_false" if f.default else "store_true", **common)
            elif isinstance(f.default, tuple):
                parser.add_argument(opt.flag, action=Repeatable, default=None, metavar=opt.metavar, **common)
            else:
                parser.add_argument(
                    opt.flag,
                    default=f.default,
                    choices=opt.choices,
                    metavar=opt.metavar,
                    **common,
                )

    @classmethod
    def variables(cls) -> dict[str, str]:
        """variable: the name of the field (and the option's dest) it stands in for."""
        return {opt.env: f.name for f, opt in cls.options() if opt.env}

    @classmethod
    def from_args(cls: type[S], args: argparse.Namespace) -> S:
        """The settings parsed into `args` (by a parser add_options() was given; the
        parser reads the variables: labqueue.environment.worker_defaults)."""
        values = {}
        for f, _ in cls.options():
            value = getattr(args, f.name)
            values[f.name] = tuple(value or ()) if isinstance(f.default, tuple) else value
        return cls(**values)

    def replace(self: S, **changes: Any) -> S:
        """These settings with `changes` (field names), checked like new ones."""
        self.refuse_unknown(changes)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    @classmethod
    def refuse_unknown(cls, names: Iterable[str]) -> None:
        """InvalidArgument naming any of `names` that is not a setting of these."""
        unknown = sorted(set(names) - {f.name for f in dataclasses.fields(cls)})  # type: ignore[arg-type]
        if unknown:
            raise InvalidArgument(f"{cls.__name__} has no setting {', '.join(map(repr, unknown))}")

    def as_json(self) -> dict[str, Any]:
        """Every field as JSON holds it: a repeatable one as a list, a schedule made in code
        as its fields."""
        fields = dataclasses.asdict(self)  # type: ignore[call-overload]
        return {name: list(value) if isinstance(value, tuple) else value for name, value in fields.items()}

    @classmethod
    def from_json(cls: type[S], value: object) -> S:
        """The settings as_json() wrote, each value checked as its option's text would be;
        a field missing takes its default."""
        if not isinstance(value, dict):
            raise InvalidArgument(f"{cls.__name__} must be a JSON object, got {value!r}")
        cls.refuse_unknown(value)
        fields = {f.name: (f, opt) for f, opt in cls.options()}
        return cls(**{name: _from_json(name, *fields[name], item) for name, item in value.items()})


def _from_json(name: str, f: dataclasses.Field, opt: Option, value: Any) -> Any:
    """One field's JSON value as the field holds it, refused unless it is what the option
    would read from its text (a number for --batch, never "4"). A repeatable option comes
    as a list, and a schedule made in code as an object of its fields."""
    if isinstance(f.default, tuple):
        if not isinstance(value, list):
            raise InvalidArgument(f"{name}: expected a JSON list, got {value!r}")
        return tuple(
            _schedule(name, item) if isinstance(item, dict) else _typed(name, opt, item) for item in value
        )
    if isinstance(f.default, bool) or value is None:
        if type(value) is not type(f.default) and f.default is not None:
            raise InvalidArgument(f"{name}: expected a value like {f.default!r}, got {value!r}")
        return value
    return _typed(name, opt, value)


def _typed(name: str, opt: Option, value: Any) -> Any:
    same = _parsed(name, opt, value) == value if opt.parse is not None else isinstance(value, str)
    if not same or isinstance(value, (bool, list, dict)):
        raise InvalidArgument(f"{name}: expected what {opt.flag} takes, got {value!r}")
    return value


def _schedule(name: str, fields: dict[str, Any]) -> Every:
    try:
        return Every(**fields)
    except TypeError as exc:
        raise InvalidArgument(f"{name}: not a schedule's fields ({exc}): {fields!r}") from None


@dataclass(frozen=True)
class WorkerSettings(Settings):
    """The options of every worker process, `labqueue worker`'s and a pool's alike."""

    handlers: tuple[str, ...] = option(
        (), "--handlers", "import this module of your own handlers (repeatable)",
        metavar="MODULE", parse=module_name, env="LABQUEUE_HANDLERS",
    )  # fmt: skip
    poll: float = option(
        DEFAULT_POLL, "--poll", f"seconds between looks for work when idle (default {DEFAULT_POLL})",
        metavar="DURATION", parse=positive_duration,
    )  # fmt: skip
    max_attempts: int | None = option(
        None, "--max-attempts",
        f"attempts for jobs that the handlers enqueue (default: the queue's, {DEFAULT_MAX_ATTEMPTS})",
        metavar="N", parse=whole_number,
    )  # fmt: skip
    backoff_base: float | None = option(
        None, "--backoff-base",
        "retry backoff ceiling after the first failure; it doubles per attempt "
        f"(default {DEFAULT_BACKOFF_BASE:g})",
        metavar="DURATION", parse=positive_duration,
    )  # fmt: skip
    backoff_cap: float | None = option(
        None, "--backoff-cap", f"the largest retry backoff ceiling (default {DEFAULT_BACKOFF_CAP:g})",
        metavar="DURATION", parse=positive_duration,
    )  # fmt: skip
    synchronous: str | None = option(
        None, "--synchronous",
        f"SQLite's synchronous level: {', '.join(SYNCHRONOUS_LEVELS)} (default {DEFAULT_SYNCHRONOUS})",
        metavar="LEVEL", parse=sync_level,
    )  # fmt: skip
    batch: int = option(
        DEFAULT_BATCH, "--batch",
        f"most jobs claimed and reported in one write transaction (default {DEFAULT_BATCH}); "
        "a crash re-runs at most one batch",
        metavar="N", parse=batch_size,
    )  # fmt: skip
    commit_interval: float = option(
        DEFAULT_COMMIT_INTERVAL, "--commit-interval",
        "within a batch, commit what has finished once this much time has passed "
        f"(default {DEFAULT_COMMIT_INTERVAL})",
        metavar="DURATION", parse=duration,
    )  # fmt: skip
    queues: str | None = option(
        None, "--queues",
        "take jobs from these named queues only (default: every queue); with several, "
        "take turns between them, weighted (default weight 1)",
        metavar="NAME[:WEIGHT],...", parse=queues_option, env="LABQUEUE_QUEUES",
    )  # fmt: skip
    strict: bool = option(
        False, "--strict",
        "with several --queues, take the highest priority across them instead of turns "
        "(a flood in one queue can then starve the others)",
    )  # fmt: skip
    every: tuple[str | Every, ...] = option(
        (), "--every",
        "enqueue one KIND job per period of DURATION, exactly once however many workers "
        "tick (repeatable; missed periods are skipped)",
        metavar="KIND=DURATION", parse=every_option,
    )  # fmt: skip
    purge_after: float | None = option(
        None, "--purge-after",
        "remove done jobs that finished this long ago, every --purge-every seconds (default: keep them)",
        metavar="DURATION", parse=duration,
    )  # fmt: skip
    purge_every: float = option(
        DEFAULT_PURGE_EVERY, "--purge-every",
        f"how often --purge-after runs (default {DEFAULT_PURGE_EVERY:g})",
        metavar="DURATION", parse=positive_duration,
    )  # fmt: skip
    reconnect_limit: int | None = option(
        None, "--reconnect-limit",
        "after a lost connection to a database server, try to reconnect at most N times "
        "(with capped, jittered backoff) before the worker exits with an error; 0 never reconnects "
        "(default: keep trying until the server is back)",
        metavar="N", parse=reconnect_limit,
    )  # fmt: skip
    job_timeout: float | None = option(
        None, "--job-timeout",
        "fail a job whose handler runs longer than this (a kind's own @handler(kind, timeout=...) "
        "wins): 'timed out after N s', retried elsewhere after a backoff, and the worker process is "
        "replaced (default: no limit)",
        metavar="DURATION", parse=positive_duration, env="LABQUEUE_JOB_TIMEOUT",
    )  # fmt: skip
    wake: bool = option(
        True, "--no-wake", "poll every --poll seconds when idle instead of waiting for producers' hints",
    )  # fmt: skip
    log_level: str = option(
        DEFAULT_LOG_LEVEL, "--log-level",
        f"the least important log records shown (default {DEFAULT_LOG_LEVEL})",
        parse=str.upper, choices=LOG_LEVELS, env="LABQUEUE_LOG_LEVEL",
    )  # fmt: skip
    log_format: str = option(
        DEFAULT_LOG_FORMAT, "--log-format",
        f"text lines, or one JSON object per line (default {DEFAULT_LOG_FORMAT})",
        choices=LOG_FORMATS, env="LABQUEUE_LOG_FORMAT",
    )  # fmt: skip
    log_success: bool = option(
        False, "--log-success",
        "log each job done at INFO (default: at DEBUG); every job line has job_id, kind, "
        "queue, attempt, worker and duration_ms",
    )  # fmt: skip

    def __post_init__(self) -> None:
        """The same checks as the command line's, for settings made in code: a list of
        names for `queues` is taken as written "a,b"."""
        if self.queues is not None and not isinstance(self.queues, str):
            object.__setattr__(self, "queues", ",".join(self.queues))
        for f, opt in self.options():
            value = getattr(self, f.name)
            if isinstance(f.default, tuple):  # one text, or any sequence: a tuple
                value = (value,) if isinstance(value, str) else tuple(value)
                object.__setattr__(self, f.name, value)
            if value is None or value == f.default or isinstance(f.default, bool):
                continue
            items = value if isinstance(f.default, tuple) else (value,)
            for item in items:
                if not isinstance(item, Every):  # checked when it was made
                    _check(f.name, opt, item)
        if self.turn_weights and self.strict:
            raise InvalidArgument(
                "--strict orders jobs by priority across --queues; weights (NAME:WEIGHT) only set turns, "
                f"got --queues {self.queues}"
            )
        if self.turn_weights and len(self.queue_names or ()) < 2:
            raise InvalidArgument(
                f"weights (NAME:WEIGHT) set turns between several queues; --queues {self.queues} names one"
            )

    @property
    def queue_names(self) -> list[str] | None:
        """The named queues to take jobs from, in order (None: every queue)."""
        return None if self.queues is None else parse_queues(self.queues)[0]

    @property
    def turn_weights(self) -> dict[str, int]:
        """The weights written in `queues` (a queue written without one has weight 1)."""
        return {} if self.queues is None else parse_queues(self.queues)[1]

    @property
    def schedules(self) -> list[Every]:
        """`every` as schedules: KIND=DURATION as written, or an Every made in code (which
        may carry a payload, a name, a priority and a queue)."""
        return [item if isinstance(item, Every) else parse_every(item) for item in self.every]

    def queue_options(self) -> dict[str, Any]:
        """What the JobQueue a worker opens takes from these settings (those given)."""
        given = {
            "max_attempts": self.max_attempts,
            "backoff_base": self.backoff_base,
            "backoff_cap": self.backoff_cap,
            "synchronous": self.synchronous,
        }
        return {name: value for name, value in given.items() if value is not None}


def _check(name: str, opt: Option, value: Any) -> None:
    """A value given in code, read as its option's text would be (`str(value)`): the same
    refusal, as InvalidArgument naming the setting."""
    if opt.parse is not None:
        _parsed(name, opt, value)
    if opt.choices is not None and value not in opt.choices:
        raise InvalidArgument(f"{name}: expected one of {', '.join(opt.choices)}, got {value!r}")


def _parsed(name: str, opt: Option, value: Any) -> Any:
    """`value` read as its option's text would be (opt.parse(str(value))): a refusal is
    InvalidArgument naming the setting."""
    assert opt.parse is not None
    try:
        return opt.parse(str(value))
    except argparse.ArgumentTypeError as exc:
        raise InvalidArgument(f"{name}: {exc}") from None


@dataclass(frozen=True)
class PoolSettings(Settings):
    """The supervisor's options of `labqueue worker` (its worker processes get the lease and
    idle exit in their WorkerStart, and never the rest)."""

    id: str | None = option(
        None, "--id", "this worker's name, stored on the jobs it claims (default HOST:PID)"
    )  # fmt: skip
    lease: float = option(
        DEFAULT_LEASE, "--lease",
        f"how long each claim holds a job before another worker may take it (default {DEFAULT_LEASE:g} s)",
        metavar="DURATION", parse=positive_duration, env="LABQUEUE_LEASE",
    )  # fmt: skip
    idle_exit: float | None = option(
        None, "--idle-exit", "leave after this long with nothing to do (default: run until stopped)",
        metavar="DURATION", parse=duration,
    )  # fmt: skip
    concurrency: int = option(
        DEFAULT_CONCURRENCY, "--concurrency",
        f"run N supervised worker processes (default {DEFAULT_CONCURRENCY})",
        metavar="N", parse=concurrency, env="LABQUEUE_CONCURRENCY",
    )  # fmt: skip
    grace: float | None = option(
        None, "--grace",
        "after a warm stop was asked for, stop the workers at once after this long "
        "(default: wait for the current jobs, or a second signal)",
        metavar="DURATION", parse=duration, env="LABQUEUE_GRACE",
    )  # fmt: skip


def worker_settings(given: WorkerSettings | None = None, **changes: Any) -> WorkerSettings:
    """`given` (default settings when None) with `changes`, for functions that take both."""
    settings = given if given is not None else WorkerSettings()
    return settings.replace(**changes) if changes else settings


@dataclass(frozen=True)
class WorkerStart:
    """What a supervisor tells each worker process it starts, whole: its name, lease, idle
    exit (None: run until stopped) and settings. It travels as one JSON value in the
    process's environment (labqueue.procs.worker_environment), never on its command line,
    and every field of WorkerSettings goes with it."""

    worker_id: str
    lease_seconds: float
    idle_exit: float | None = DEFAULT_IDLE_EXIT
    settings: WorkerSettings = field(default_factory=WorkerSettings)

    def __post_init__(self) -> None:
        validate.text("worker_id", self.worker_id)
        validate.positive("lease_seconds", self.lease_seconds)
        if self.idle_exit is not None:
            validate.positive("idle_exit", self.idle_exit, allow_zero=True)
        if not isinstance(self.settings, WorkerSettings):
            raise InvalidArgument(f"settings must be a WorkerSettings, got {self.settings!r}")

    def to_json(self) -> str:
        whole = {**dataclasses.asdict(self), "settings": self.settings.as_json()}
        try:
            return json.dumps(whole, allow_nan=False)
        except (TypeError, ValueError) as exc:  # a schedule's payload JSON cannot hold
            raise InvalidArgument(f"these settings cannot go to a worker process as JSON: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> WorkerStart:
        """The value to_json() wrote; anything else is InvalidArgument naming what is wrong."""
        try:
            whole = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"not JSON ({exc}): {text[:60]!r}") from None
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(whole, dict) or sorted(whole) != sorted(names):
            raise InvalidArgument(f"expected a JSON object of {', '.join(names)}, got {text[:60]!r}")
        return cls(**{**whole, "settings": WorkerSettings.from_json(whole["settings"])})
