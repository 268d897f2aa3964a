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


def test_a_wrong_key_gets_a_direction():
    assert "the same key" in nb16.check_period_key(nb16.wrong_period_key_rounded).message
    assert "other schedule" in nb16.check_period_key(nb16.wrong_period_key_no_name).message


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
