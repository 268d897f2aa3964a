"""One duration parser for every option that takes a length of time."""

from __future__ import annotations

import argparse

import pytest

from labqueue.durations import duration as seconds
from labqueue.durations import format_duration, parse_duration
from labqueue.durations import positive_duration as positive_seconds
from labqueue.errors import InvalidArgument


@pytest.mark.parametrize(
    ("text", "value"),
    [("90", 90.0), ("0.5", 0.5), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("1d", 86400.0),
     ("1w", 604800.0), ("1.5h", 5400.0), (" 2m ", 120.0), ("0", 0.0)],
)  # fmt: skip
def test_durations_with_and_without_a_unit(text, value):
    assert parse_duration(text) == value
    assert seconds(text) == value


@pytest.mark.parametrize("text", ["", "-1", "1y", "nan", "inf", "1e400", "w", "5 minutes", "1h30m"])
def test_a_bad_duration_is_refused_naming_the_value(text):
    with pytest.raises(InvalidArgument, match=repr(text).replace("(", r"\(").replace(".", r"\.")):
        parse_duration(text)
    with pytest.raises(argparse.ArgumentTypeError):
        seconds(text)


def test_zero_is_refused_where_a_duration_must_be_above_zero():
    with pytest.raises(argparse.ArgumentTypeError, match="above zero, got '0s'"):
        positive_seconds("0s")


def test_format_duration_reads_back():
    assert [format_duration(v) for v in (604800, 7200, 900, 90, 0.5)] == ["1w", "2h", "15m", "90s", "0.5s"]


def test_every_takes_a_duration_too():
    from labqueue.schedule import parse_every

    assert parse_every("report=1h").seconds == 3600.0
    with pytest.raises(InvalidArgument, match=r"--every report: the period: .*got '0s'"):
        parse_every("report=0s")
