"""Notebook 11's exercises: each checker accepts the worked answer and rejects the starting
point and the wrong versions, and never raises on a wrong answer."""

from __future__ import annotations

import pytest

from labqueue.lab.exercises import Verdict
from labqueue.lab.exercises import nb11 as module

CASES = [
    *((name, "answer", module.ANSWERS[name]) for name in module.CHECKERS),
    *((name, "starter", module.STARTERS[name]) for name in module.CHECKERS),
    *(
        (name, f"wrong {i}", kwargs)
        for name in module.CHECKERS
        for i, kwargs in enumerate(module.WRONG[name])
    ),
]


@pytest.mark.parametrize(("name", "what", "kwargs"), CASES, ids=[f"{n}-{w}" for n, w, _ in CASES])
def test_checker_accepts_only_the_answer(name, what, kwargs):
    verdict = module.CHECKERS[name](**kwargs)
    assert isinstance(verdict, Verdict) and verdict.message
    assert verdict.passed == (what == "answer"), str(verdict)


def test_every_exercise_has_a_starter_an_answer_and_a_wrong_version():
    assert set(module.CHECKERS) == set(module.STARTERS) == set(module.ANSWERS) == set(module.WRONG)
    assert all(module.WRONG[name] for name in module.CHECKERS)


@pytest.mark.parametrize("name", list(module.CHECKERS))
def test_checker_says_not_yet_to_nonsense(name):
    assert not module.CHECKERS[name](**dict.fromkeys(module.STARTERS[name]))
