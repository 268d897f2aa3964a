"""Durations as people write them: ``90s``, ``15m``, ``2h``, ``1d``, ``1w``, or plain seconds.

One parser for every option that takes a length of time (``--older-than``, ``--grace``,
``--lease``, ``--max-oldest-ready``, ...), so ``1w`` means the same everywhere and a bad
value gets the same one-line error naming it.
"""

from __future__ import annotations

import argparse
import math
import re

from .errors import InvalidArgument
from .validate import duration_bound

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"\s*(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[smhdw]?)\s*")


def parse_duration(text: str, *, allow_zero: bool = True) -> float:
    """Seconds in `text`: a number with an optional unit (s, m, h, d, w). Raises
    InvalidArgument naming the value for anything else (negative, NaN, inf, "5 years"), and
    for a duration no clock can honour (over 100 years, or above zero and under 1 us:
    labqueue.validate's MAX_SECONDS and MIN_SECONDS)."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgument(f"expected a duration such as 90, 90s, 15m, 2h, 1d or 1w, got {text!r}")
    value = float(match["number"]) * UNITS[match["unit"] or "s"]
    if not math.isfinite(value):
        raise InvalidArgument(f"expected a finite duration, got {text!r}")
    if value == 0 and not allow_zero:
        raise InvalidArgument(f"expected a duration above zero, got {text!r}")
    bound = duration_bound(value, allow_zero=allow_zero)
    if bound is not None:
        raise InvalidArgument(f"expected a duration of {bound}, got {text!r}")
    return value


def duration(text: str) -> float:
    """An argparse type: a duration of zero or more."""
    try:
        return parse_duration(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_duration(text: str) -> float:
    """An argparse type: a duration above zero."""
    try:
        return parse_duration(text, allow_zero=False)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_duration(seconds: float) -> str:
    """A short reading of a duration for people: 45s, 15m, 2h, 3d (rounded down)."""
    for unit in ("w", "d", "h", "m"):
        if seconds >= UNITS[unit] and seconds % UNITS[unit] == 0:
            return f"{int(seconds // UNITS[unit])}{unit}"
    return f"{seconds:g}s"
