"""Every notebook's "Your turn" exercises (labqueue.lab.exercises.nbNN): each checker accepts the
worked answer and rejects the starting point and every wrong version, and never raises on a
wrong answer or on nonsense. Tests particular to one notebook's exercises are in
test_exercises_nbNN.py."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from labqueue.lab import exercises
from labqueue.lab.exercises import Verdict

# Every notebook's module, nb01.py onwards: a notebook added later is checked without a change here.
NUMBERS = sorted(p.stem[2:] for p in Path(exercises.__file__).parent.glob("nb[0-9][0-9].py"))
# Checkers that run real processes or threads for a few seconds.
SLOW = {"03", "06", "17"}
MODULES = {n: importlib.import_module(f"labqueue.lab.exercises.nb{n}") for n in NUMBERS}


def _param(n: str, *values: object, id: str) -> object:
    return pytest.param(n, *values, id=id, marks=[pytest.mark.slow] if n in SLOW else [])


CASES = [
    _param(n, name, what, kwargs, id=f"nb{n}-{name}-{what}")
    for n, module in MODULES.items()
    for name in module.CHECKERS
    for what, kwargs in [
        ("answer", module.ANSWERS[name]),
        ("starter", module.STARTERS[name]),
        *((f"wrong {i}", wrong) for i, wrong in enumerate(module.WRONG[name])),
    ]
]


@pytest.mark.parametrize(("n", "name", "what", "kwargs"), CASES)
def test_checker_accepts_only_the_answer(n, name, what, kwargs):
    verdict = MODULES[n].CHECKERS[name](**kwargs)
    assert isinstance(verdict, Verdict) and verdict.message
    assert verdict.passed == (what == "answer"), str(verdict)
    # The starting point left as it came invites; a change that does not work yet says so.
    assert verdict.word == {"answer": "PASS", "starter": "YOUR TURN"}.get(what, "NOT YET"), str(verdict)


@pytest.mark.parametrize("n", NUMBERS)
def test_every_exercise_has_a_starter_an_answer_and_a_wrong_version(n):
    module = MODULES[n]
    assert module.CHECKERS, f"notebook {n} has no exercise"
    assert set(module.CHECKERS) == set(module.STARTERS) == set(module.ANSWERS) == set(module.WRONG)
    assert all(module.WRONG[name] for name in module.CHECKERS)


@pytest.mark.parametrize(
    ("n", "name"),
    [_param(n, name, id=f"nb{n}-{name}") for n, module in MODULES.items() for name in module.CHECKERS],
)
def test_checker_says_not_yet_to_nonsense(n, name):
    module = MODULES[n]
    assert not module.CHECKERS[name](**dict.fromkeys(module.STARTERS[name]))


def test_an_unchanged_starting_point_is_told_apart_from_a_change():
    def starter(x):
        return x + 1  # the comment and the name do not count

    def copy_of_it(x):
        return x + 1

    def changed(x):
        return x + 2

    assert exercises.unchanged(copy_of_it, starter)
    assert not exercises.unchanged(changed, starter)
    assert exercises.unchanged("SELECT  1\n FROM jobs", "SELECT 1 FROM jobs")
    assert not exercises.unchanged("SELECT 2 FROM jobs", "SELECT 1 FROM jobs")
    assert exercises.unchanged({"A": None}, {"A": None}) and not exercises.unchanged({"A": "x"}, {"A": None})
    assert not exercises.unchanged(1, True)  # equal, but not what the exercise handed out


def test_each_word_has_its_own_colour_in_the_notebook():
    shown = {
        v.word: v._repr_html_()
        for v in (Verdict(True, "ok"), Verdict(False, "no"), Verdict(False, "start", started=False))
    }
    assert set(shown) == {"PASS", "NOT YET", "YOUR TURN"}
    assert len({re.search(r"solid (#\w+)", h)[1] for h in shown.values()}) == 3
