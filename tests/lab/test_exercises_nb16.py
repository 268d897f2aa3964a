"""Notebook 16's exercise: the racing checker, and the folded answer in the notebook itself."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labqueue.lab.exercises import nb16

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "16_cancel_schedule_wake.ipynb"
ANSWER_BLOCK = re.compile(r"<summary>Answer</summary>.*?```python\n(.*?)```", re.S)


@pytest.mark.parametrize(
    ("kwargs", "passes"),
    [(nb16.ANSWERS["period_key"], True), (nb16.STARTERS["period_key"], False)]
    + [(wrong, False) for wrong in nb16.WRONG["period_key"]],
)
def test_only_the_answer_passes(kwargs, passes):
    assert bool(nb16.check_period_key(**kwargs)) is passes


@pytest.mark.parametrize(
    "nonsense", [None, 42, lambda name, seconds: "x", lambda n, s, t: 1 / 0, lambda n, s, t: 7]
)
def test_nonsense_is_not_yet_and_never_raises(nonsense):
    verdict = nb16.check_period_key(nonsense)
    assert not verdict and verdict.message


# Each wrong version in nb16.WRONG, with words its message must hold: the mistake it made.
MISTAKES = {
    "wrong_period_key_no_name": ["no job at all", "the other schedule", "must name its schedule"],
    "wrong_period_key_rounded": ["A tick late in the period", "not to the nearest one"],
    "wrong_period_key_no_period": ["no job at all", "in an earlier period", "must change from one period"],
    "wrong_period_key_fixed_minute": ["'cleanup' (every 90 s)", "its period length is fixed", "`seconds`"],
}


@pytest.mark.parametrize("wrong", nb16.WRONG["period_key"], ids=lambda w: w["period_key"].__name__)
def test_each_wrong_key_is_told_its_mistake(wrong):
    verdict = nb16.check_period_key(**wrong)
    assert not verdict
    for words in MISTAKES[wrong["period_key"].__name__]:
        assert words in verdict.message, verdict.message
    assert "the period's start is the key" not in verdict.message


def test_the_starting_point_is_told_its_key_changes_with_every_tick():
    message = nb16.check_period_key(nb16.starter_period_key).message
    assert "changes from one moment to the next" in message and "fixed" not in message


def test_a_period_index_that_follows_seconds_passes_and_a_hard_coded_minute_does_not():
    assert nb16.check_period_key(lambda name, seconds, now: f"every:{name}:{int(now // seconds)}")
    assert not nb16.check_period_key(lambda name, seconds, now: f"every:{name}:{int(now) // 60}")


def test_the_notebooks_answer_passes_and_its_starting_point_does_not():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## Your turn" in c.source)
    starter = next(c.source for c in cells[start:] if c.cell_type == "code")
    answer = next(m.group(1) for c in cells[start:] if (m := ANSWER_BLOCK.search(c.source)))
    namespace: dict = {}
    exec(starter, namespace)
    assert not nb16.check_period_key(namespace["period_key"])
    exec(answer, namespace)
    assert nb16.check_period_key(namespace["period_key"])
    checker = next(c for c in cells[start:] if c.cell_type == "code" and "nb16.check_" in c.source)
    shown = " ".join(o.get("data", {}).get("text/html", "") for o in checker.outputs)
    assert "YOUR TURN" in shown, "the committed notebook shows the starting point's verdict"
