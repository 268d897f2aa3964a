"""Every notebook's "Your turn" exercises (labqueue.lab.exercises.nbNN): each checker accepts the
worked answer and rejects the starting point and every wrong version, and never raises on a
wrong answer or on nonsense. Tests particular to one notebook's exercises are in
test_exercises_nbNN.py."""

from __future__ import annotations

import importlib
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
