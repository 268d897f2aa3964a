"""Notebook 13's exercise: the checks every exercise gets (as test_exercises.py gives notebooks
01-12), the folded answer in the notebook, and the prepared queue itself."""

from __future__ import annotations

import pytest
from test_exercise_answers_in_notebooks import run_checker, your_turn

from labqueue import JobQueue
from labqueue.lab.exercises import Verdict
from labqueue.lab.exercises import nb13 as module

CASES = [
    pytest.param(name, what, kwargs, id=f"nb13-{name}-{what}")
    for name in module.CHECKERS
    for what, kwargs in [
        ("answer", module.ANSWERS[name]),
        ("starter", module.STARTERS[name]),
        *((f"wrong {i}", wrong) for i, wrong in enumerate(module.WRONG[name])),
    ]
]


@pytest.mark.parametrize(("name", "what", "kwargs"), CASES)
def test_checker_accepts_only_the_answer(name, what, kwargs):
    verdict = module.CHECKERS[name](**kwargs)
    assert isinstance(verdict, Verdict) and verdict.message
    assert verdict.passed == (what == "answer"), str(verdict)


def test_every_exercise_has_a_starter_an_answer_and_a_wrong_version():
    assert module.CHECKERS
    assert set(module.CHECKERS) == set(module.STARTERS) == set(module.ANSWERS) == set(module.WRONG)
    assert all(module.WRONG[name] for name in module.CHECKERS)


@pytest.mark.parametrize("name", list(module.CHECKERS))
def test_checker_says_not_yet_to_nonsense(name):
    assert not module.CHECKERS[name](**dict.fromkeys(module.STARTERS[name]))


@pytest.mark.parametrize(
    "where",
    [
        "WHERE id > :after",
        "WHERE 1; DROP TABLE jobs",
        "WHERE id > :x",
        "WHERE (id > :after AND id <= :after + :batch) OR state = 'dead'",
        "just text",
    ],
)
def test_checker_says_not_yet_and_never_raises(where):
    assert not module.check_purge_where(where)


def test_the_package_statement_passes():
    from labqueue import sql

    assert module.check_purge_where(sql.PURGE_WHERE)


def test_the_prepared_queue_has_every_fate(tmp_path):
    module.prepare(tmp_path / "q.db")
    with JobQueue(tmp_path / "q.db", wake=False) as q:
        states = [job.state for job in q.jobs()]
        finished = [job.finished_at for job in q.jobs()]
    letters = {"D": "done", "d": "done", "X": "dead", "C": "cancelled", "R": "running", "Q": "queued"}
    assert states == [letters[f] for f in module.FATES]
    for fate, at in zip(module.FATES, finished, strict=True):
        if fate in "DXC":
            assert at <= module.BEFORE
        elif fate == "d":
            assert at > module.BEFORE
        else:
            assert at is None
    assert all(module.FATES[i - 1] == "D" for i in range(module.BATCH, len(module.FATES), module.BATCH))


def test_the_notebook_answer_passes_and_its_starting_point_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    imports, found = your_turn("13_retention")
    assert found, "notebook 13 has a 'Your turn' with a folded answer"
    namespace: dict = {}
    exec(imports, namespace)
    for setup, checker, answer in found:
        for source in setup:
            exec(source, namespace)
        assert not run_checker(checker, namespace), "the starting point already passes"
        exec(answer, namespace)
        verdict = run_checker(checker, namespace)
        assert verdict, f"the folded answer does not pass: {verdict}"
