"""The worked answers folded into notebooks 08-17 pass their checkers, and the starting
points the notebooks ship with do not: the answers a learner reveals cannot rot.

Each "Your turn" in a notebook is one or more code cells with the starting point, a code
cell that calls the checker, and a markdown cell whose folded Answer holds a python block.
This test runs the notebook's first code cell (its imports), then for each exercise the
starting point and the checker, and then the answer and the checker again."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
OWN = [
    "08_claim_index",
    "09_throughput",
    "10_ops",
    "11_testing",
    "12_chaos",
    "13_your_queue_and_labqueue",
    "14_retention",
    "15_priorities_and_fairness",
    "16_cancel_schedule_wake",
    "17_postgresql",
]
ANSWER_BLOCK = re.compile(r"<summary>Answer</summary>.*?```python\n(.*?)```", re.S)


def your_turn(name: str) -> tuple[str, list[tuple[list[str], str, str]]]:
    """The notebook's first code cell, and for each exercise after "## Your turn": the code
    cells to run first (starting point, imports, sources shown), the checker call, and the
    folded answer."""
    cells = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
    imports = next(c.source for c in cells if c.cell_type == "code")
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## Your turn" in c.source)
    found, setup, checker = [], [], None
    for cell in cells[start:]:
        if cell.cell_type == "code" and ".check_" in cell.source:
            checker = cell.source.strip()
        elif cell.cell_type == "code":
            setup.append(cell.source)
        elif match := ANSWER_BLOCK.search(cell.source):
            assert checker, f"{name}: an answer with no checker cell before it"
            found.append((setup, checker, match.group(1)))
            setup, checker = [], None
    return imports, found


def run_checker(cell: str, namespace: dict):
    """Run a checker cell (its import, then the call on its last line) and return the verdict."""
    *before, last = cell.strip().splitlines()
    exec("\n".join(before), namespace)
    return eval(last, namespace)


@pytest.mark.parametrize("name", OWN)
def test_each_folded_answer_passes_and_the_starting_point_does_not(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    imports, found = your_turn(name)
    assert found, f"{name} has a 'Your turn' with a folded answer"
    namespace: dict = {}
    exec(imports, namespace)
    for setup, checker, answer in found:
        for source in setup:
            exec(source, namespace)
        start = run_checker(checker, namespace)
        assert not start, f"{name}: the starting point already passes"
        assert start.word == "YOUR TURN", f"{name}: the unchanged starting point reads {start}"
        exec(answer, namespace)
        verdict = run_checker(checker, namespace)
        assert verdict, f"{name}: the folded answer does not pass: {verdict}"


@pytest.mark.parametrize("name", OWN)
def test_committed_checker_output_says_your_turn(name):
    """After Run All an exercise not yet tried invites the learner; it does not read as a failure."""
    cells = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
    calls = [c for c in cells if c.cell_type == "code" and re.search(r"^nb\d\d\.check_", c.source, re.M)]
    assert calls
    for cell in calls:
        shown = " ".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
        assert "YOUR TURN" in shown and "NOT YET" not in shown, f"{name}: {shown[:200]}"
