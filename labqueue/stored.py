"""What a job row keeps: the row read back (JobRecord), and its values as text every backend
stores: a payload (and a return value) as
JSON that reads back as it went in, an error message bounded and without passwords, and
why a stored row cannot be read back as a job."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import PayloadNotSerializable
from .redaction import redact
from .validate import DEFAULT_QUEUE

# The most characters of an error message a job keeps.
MAX_ERROR_CHARS = 500
# The deepest nesting of lists and dicts a payload may have. Python's json decodes far
# deeper, but not without limit: a payload enqueue accepts must always be readable.
MAX_PAYLOAD_DEPTH = 100


@dataclass(frozen=True)
class JobRecord:
    """A job's row as stored, read back for a person or a test (not a lease: use claim()).
    `payload` is the stored JSON text, undecoded, so any row can be read."""

    id: int
    kind: str
    payload: str
    state: str
    attempts: int
    max_attempts: int
    visible_at: float
    lease_token: str | None
    worker: str | None
    last_error: str | None
    dedupe_key: str | None
    created_at: float
    finished_at: float | None
    priority: int = 0
    queue: str = DEFAULT_QUEUE
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    started_at: float | None = None  # when the current (or last) attempt's claim leased it
    result: str | None = None  # the return value as JSON text; NULL: None, or none yet
    attempt_log: str | None = None  # the ended attempts but a done one, a JSON array



def stored_error(error: str, *locations: object) -> str:
    """An error message as every backend can store it: no password in it (any URL's, any
    password parameter's, and those of `locations`: labqueue.redaction.redact), its first
    MAX_ERROR_CHARS characters, text UTF-8 cannot encode (a lone surrogate) and NUL as
    escapes. Masked before it is cut, so a cut never leaves half a password behind."""
    return stored_error_text(redact(error[: 4 * MAX_ERROR_CHARS], *locations)[:MAX_ERROR_CHARS])


def stored_error_text(text: str) -> str:
    """Text as every backend can store it: a lone surrogate and NUL as escapes."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


# JSONDecoder.__init__ sets scan_once (the C scanner); typeshed does not declare it
_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decode_payload(text: str) -> Any:
    """json.loads(text), with json.loads's own results and errors, at a fraction of its
    cost for text that is one JSON value and nothing around it (what labqueue stores):
    the decoder's C scanner is called directly, and only text it does not read to the
    end (whitespace around the value, or no value at all) goes through json.loads."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


class Unreadable:
    """A stored value a driver could not decode as text, standing in for it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def describe_unreadable(kind: object, payload: object) -> str:
    """Why a claimed row cannot become a Job."""
    if isinstance(kind, Unreadable):
        return f"its kind is {kind.reason}"
    if type(kind) is not str:
        return f"its kind is stored as {type(kind).__name__} {kind!r:.80}, not text"
    if isinstance(payload, Unreadable):
        return f"its payload is {payload.reason}"
    if isinstance(payload, bytes):
        return f"its payload is stored as a BLOB ({len(payload)} bytes), not JSON text"
    if type(payload) is not str:
        return f"its payload is stored as {type(payload).__name__} {payload!r:.80}, not JSON text"
    try:
        json.loads(payload)
    except RecursionError:
        return "its payload is JSON nested too deeply for Python to decode"
    except ValueError as exc:
        return f"its payload is not valid JSON ({exc}): {payload[:80]!r}"
    return "its payload cannot be decoded"


def to_json(payload: Any) -> str:
    """The payload as JSON text that json.loads() turns back into the same value (tuples
    become lists), or PayloadNotSerializable saying why not."""
    try:
        body = json.dumps(payload, allow_nan=False)
    except RecursionError:
        raise PayloadNotSerializable(
            f"payload is nested deeper than MAX_PAYLOAD_DEPTH = {MAX_PAYLOAD_DEPTH} levels "
            "(or contains itself)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise PayloadNotSerializable(f"payload is not JSON-serialisable: {exc}") from None
    if body.count("[") + body.count("{") > MAX_PAYLOAD_DEPTH:  # cheap: most payloads stop here
        _check_depth(payload)
    if "{" in body and not _string_keys_only(payload):  # only dicts have keys
        problem = _key_problem(payload)
        if problem:
            raise PayloadNotSerializable(problem)
    return body


_CONTAINERS = (dict, list, tuple)


def _string_keys_only(value: Any) -> bool:
    """The fast check (nesting is bounded by now): every dict key is exactly a str."""
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) in _CONTAINERS and not _string_keys_only(item):
                return False
    elif type(value) in (list, tuple):
        for item in value:
            if type(item) in _CONTAINERS and not _string_keys_only(item):
                return False
    return True


def _check_depth(payload: Any) -> None:
    stack = [(payload, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list, tuple)):
            depth += 1
            if depth > MAX_PAYLOAD_DEPTH:
                raise PayloadNotSerializable(
                    f"payload is nested deeper than MAX_PAYLOAD_DEPTH = {MAX_PAYLOAD_DEPTH} levels"
                )
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth) for item in items)


def _key_problem(payload: Any) -> str | None:
    """The first dict key JSON would change (any key that is not a string), or None."""
    stack = [(payload, "payload")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    as_json = next(iter(json.loads(json.dumps({key: 0}))))
                    clash = as_json in value
                    return (
                        f"{where} has the {type(key).__name__} key {key!r}: JSON stores every key as a "
                        f"string, so it would come back as {as_json!r}"
                        + (f" and collide with the key {as_json!r} already there" if clash else "")
                        + "; use string keys"
                    )
                stack.append((item, f"{where}[{key!r}]"))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None
