"""The argument checks PgJobQueue shares with JobQueue, so both backends refuse the same
input with the same error: labqueue.validate's functions, plus requeue_dead's id list."""

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


def job_ids(values: Iterable[object]) -> list[int]:
    """requeue_dead's ids: whole numbers, the first bad one named."""
    values = list(values)
    bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise InvalidArgument(f"ids must be whole numbers, got {bad[0]!r}")
    return [job_id(v) for v in values]
