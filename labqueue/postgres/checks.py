"""The argument checks PgJobQueue shares with JobQueue, so both backends refuse the same
input with the same error: labqueue.validate's functions, or (before that module existed)
labqueue.queue's private helpers under the same names."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InvalidArgument
from ..queue import _to_json as to_json

__all__ = [
    "attempts",
    "claim_limit",
    "job_id",
    "kind",
    "optional_text",
    "positive",
    "read_limit",
    "states",
    "text",
    "to_json",
]

try:
    from ..validate import (
        attempts,
        claim_limit,
        job_id,
        kind,
        optional_text,
        positive,
        read_limit,
        states,
        text,
    )
except ImportError:  # labqueue.queue before labqueue/validate.py
    from ..queue import _attempts as attempts
    from ..queue import _positive as positive
    from ..queue import _states as states
    from ..queue import _whole_id as job_id

    def claim_limit(value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidArgument(f"limit must be a whole number of at least 1, got {value!r}")
        return value

    def read_limit(value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidArgument(f"limit must be a whole number of zero or more, or None, got {value!r}")
        return value

    def text(name: str, value: object, *, empty: bool = False) -> str:
        if not isinstance(value, str) or (not value and not empty):
            raise InvalidArgument(f"{name} must be a {'' if empty else 'non-empty '}string, got {value!r}")
        if "\x00" in value:
            raise InvalidArgument(f"{name} must not contain a NUL character, got {value!r}")
        return value

    def kind(value: object) -> str:
        return text("kind", value)

    def optional_text(name: str, value: object) -> str | None:
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string or None, got {value!r}")
        return None if value is None else text(name, value, empty=True)


def job_ids(values: Iterable[object]) -> list[int]:
    """requeue_dead's ids: whole numbers, the first bad one named."""
    values = list(values)
    bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise InvalidArgument(f"ids must be whole numbers, got {bad[0]!r}")
    return [job_id(v) for v in values]
