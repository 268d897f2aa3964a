"""Notebook 14's exercise beyond the checks every exercise gets (test_exercises.py, and the
notebook's folded answer in test_exercise_answers_in_notebooks.py): wrong clauses of every
sort say NOT YET without raising, the package's own clause passes, and the prepared queue
holds every fate the checker relies on."""

from __future__ import annotations

import pytest

from labqueue import JobQueue
from labqueue.lab.exercises import nb14 as module


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
    from labqueue.drivers.sqlite import sql

    assert module.check_purge_where(sql.PURGE_WHERE)


def test_the_prepared_queue_has_every_fate(tmp_path):
    module.prepare(tmp_path / "q.db")
    with JobQueue(tmp_path / "q.db", wake=False) as q:
        states = [job.state for job in q.jobs()]
        finished = [job.finished_at for job in q.jobs()]
    letters = {
        "D": "done",
        "B": "done",
        "d": "done",
        "X": "dead",
        "C": "cancelled",
        "R": "running",
        "Q": "queued",
    }
    assert states == [letters[f] for f in module.FATES]
    for fate, at in zip(module.FATES, finished, strict=True):
        if fate == "B":
            assert at == module.BEFORE
        elif fate in "DXC":
            assert at < module.BEFORE
        elif fate == "d":
            assert at > module.BEFORE
        else:
            assert at is None
    assert all(module.FATES[i - 1] == "D" for i in range(module.BATCH, len(module.FATES), module.BATCH))


# Each wrong version in module.WRONG, with words its message must hold: the mistake it made.
WINDOW = "WHERE id > :after AND id <= :after + :batch"
MISTAKES = {
    "WHERE state = 'done' AND finished_at <= :before": ["reads more than one window"],
    f"{WINDOW} AND finished_at <= :before": ["test the state", "has a finished_at too"],
    "WHERE id > :after AND id < :after + :batch AND state = 'done' AND finished_at <= :before": [
        "the last id of each window",
        "cover every id",
    ],
    f"{WINDOW} AND state = 'done'": ["finished after the cut-off", "test finished_at"],
    f"{WINDOW} AND state = 'done' AND finished_at < :before": [
        "exactly at the cut-off",
        "leaves that moment out",
    ],
    "WHERE id > :after": ["reads more than one window"],
}


def _expected(where: str) -> list[str]:
    return MISTAKES[" ".join(where.split())]


@pytest.mark.parametrize(
    "wrong", module.WRONG["purge_where"], ids=lambda w: " ".join(w["where"].split())[6:70]
)
def test_each_wrong_clause_is_told_its_mistake(wrong):
    verdict = module.check_purge_where(**wrong)
    assert not verdict
    for words in _expected(wrong["where"]):
        assert words in verdict.message, verdict.message


def test_a_strict_cut_off_is_refused_for_the_job_finished_at_the_cut_off_alone():
    verdict = module.check_purge_where(module.ANSWER.replace("<= :before", "< :before"))
    assert not verdict and "cut-off" in verdict.message and "window" not in verdict.message
