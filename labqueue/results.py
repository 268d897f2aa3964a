"""What a job gives back: a handler's return value (and its effect), kept as JSON under
the job's fence, and every attempt the job's log keeps, read back as a JobResult
(Queue.result, Queue.wait)."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgument, NoResult, PayloadNotSerializable, ResultNotSerializable
from .redaction import redact
from .stored import JobRecord, decode_payload, stored_error, stored_error_text, to_json

# A handler's writes, run in the transaction that completes its job: effect(connection).
Effect = Callable[[Any], Any]

# The longest return value a job keeps, as JSON text (characters): a result is a job's
# answer (a file name, a count, a small record), not its data.
MAX_RESULT_CHARS = 65_536
# The most characters of a failed attempt's traceback a job keeps: its last ones, where
# the exception was raised.
MAX_TRACEBACK_CHARS = 4_000


class Result:
    """What a handler returns to give its job both a return value and an effect:
    ``return labqueue.Result({"file": name}, effect=lambda db: db.execute(...))``. The
    value is stored as the job's result and the effect runs in the completing
    transaction, both under the job's fence. (A handler returning a callable alone
    returns an effect; any other value is its result.)"""

    __slots__ = ("effect", "value")

    def __init__(self, value: Any = None, *, effect: Effect | None = None) -> None:
        check_effect(effect)
        self.value = value
        self.effect = effect

    def __repr__(self) -> str:
        return f"Result({self.value!r:.80}, effect={self.effect!r:.60})"


def result_json(value: Any) -> str | None:
    """A return value as the JSON text a job keeps (None for None: a job done without a
    stored value returned None), or ResultNotSerializable saying why not: the payload's
    rules (JSON, no NaN, string keys, bounded nesting) and at most MAX_RESULT_CHARS."""
    if value is None:
        return None
    try:
        text = to_json(value)
    except PayloadNotSerializable as exc:
        raise ResultNotSerializable(str(exc).replace("payload", "return value")) from None
    if len(text) > MAX_RESULT_CHARS:
        raise ResultNotSerializable(
            f"the return value is {len(text)} characters as JSON, more than MAX_RESULT_CHARS = "
            f"{MAX_RESULT_CHARS}: store large output elsewhere and return where it is"
        )
    return text


def returned_parts(value: Any) -> tuple[Effect | None, Any]:
    """A handler's return value as (effect, result): a callable is the effect, a Result
    carries both, anything else is the result."""
    if value is None:
        return None, None
    if type(value) is Result:
        return value.effect, value.value
    if callable(value):
        return value, None
    return None, value


def split_return(value: Any) -> tuple[Effect | None, str | None]:
    """returned_parts(), the result as the JSON text a job keeps (result_json)."""
    effect, result = returned_parts(value)
    return effect, result_json(result)


@dataclass(frozen=True)
class Attempt:
    """One attempt at a job, as its attempt log keeps it: its number, the worker that held
    it, when its claim leased it and when it ended, and how (OUTCOMES). A failed or
    timed-out attempt keeps its exception's class path, message and traceback (bounded,
    passwords redacted); the names are Django's TaskError's."""

    attempt: int
    worker: str | None
    started_at: float | None
    finished_at: float | None
    outcome: str
    exception_class_path: str | None = None
    message: str | None = None
    traceback: str | None = None


def attempts_of(record: JobRecord) -> list[Attempt]:
    """Every attempt of a job, oldest first: the ended ones its log holds, then the one
    its row describes (the attempt that succeeded, or the one running now), which is never
    logged: the done attempt costs the worker no write. Entries the log cannot hold as
    attempts (another program's writing) are left out."""
    found: list[Attempt] = []
    try:
        logged = json.loads(record.attempt_log) if record.attempt_log else []
    except (TypeError, ValueError):
        logged = []
    names = {f.name for f in Attempt.__dataclass_fields__.values()}
    for entry in logged if isinstance(logged, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("attempt"), int) and entry.get("outcome"):
            found.append(Attempt(**{k: v for k, v in entry.items() if k in names}))
    last = found[-1] if found else None
    this_one_logged = last is not None and last.attempt == record.attempts and last.outcome == "lease lost"
    if record.state == "done" and record.attempts > 0:
        found.append(Attempt(record.attempts, record.worker, record.started_at, record.finished_at, "done"))
    elif record.state == "running" and not this_one_logged:
        found.append(Attempt(record.attempts, record.worker, record.started_at, None, "running"))
    return found


@dataclass(frozen=True)
class JobResult:
    """What became of a job (Queue.result): its state, its return value and its attempts.
    The field names are those of Django's TaskResult, so an adapter maps them one to one:
    `status` is the job's state, `errors` the attempts that raised, `attempts` how many
    attempts were made (`attempt_log` has them all), `worker_ids` who ran them."""

    id: int
    kind: str
    status: str
    enqueued_at: float
    started_at: float | None
    finished_at: float | None
    last_attempted_at: float | None
    attempts: int
    worker_ids: list[str]
    errors: list[Attempt]
    attempt_log: list[Attempt]
    result_text: str | None = field(repr=False, default=None)

    @property
    def finished(self) -> bool:
        """Whether the job has reached an end it stays at: done, dead or cancelled."""
        return self.status in ("done", "dead", "cancelled")

    @property
    def return_value(self) -> Any:
        """What the handler returned (None when it returned None). NoResult until the job
        is done, and for a job that ended dead or cancelled: no value is not None."""
        if self.status != "done":
            raise NoResult(f"job {self.id} is {self.status}: it has no return value")
        return None if self.result_text is None else decode_payload(self.result_text)


def job_result(record: JobRecord) -> JobResult:
    """A stored row as its JobResult."""
    log = attempts_of(record)
    return JobResult(
        id=record.id,
        kind=record.kind,
        status=record.state,
        enqueued_at=record.created_at,
        started_at=log[0].started_at if log else None,
        finished_at=record.finished_at,
        last_attempted_at=log[-1].started_at if log else None,
        attempts=len([a for a in log if a.outcome != "given back"]),
        worker_ids=[a.worker for a in log if a.worker is not None],
        errors=[a for a in log if a.exception_class_path is not None],
        attempt_log=log,
        result_text=record.result,
    )


def exception_details(
    exc: BaseException | None, error: str, *locations: object
) -> tuple[str | None, str, str | None]:
    """A failed attempt's (exception class path, message, traceback) for its log entry:
    the message bounded as last_error is, the traceback's last MAX_TRACEBACK_CHARS
    characters, both with the passwords of `locations` (the queue's database) redacted.
    Without an exception (a failure given as text), the text is the message."""
    if exc is None:
        return None, stored_error(redact(error, *locations)), None
    kind = type(exc)
    path = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    try:
        message = str(exc)
    except Exception:
        message = error
    text = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "...\n" + text[-MAX_TRACEBACK_CHARS:]
    return path, stored_error(redact(message, *locations)), stored_error_text(redact(text, *locations))


def check_effect(effect: object) -> None:
    if effect is not None and not callable(effect):
        raise InvalidArgument(f"effect must be a callable taking the connection, or None, got {effect!r:.80}")
