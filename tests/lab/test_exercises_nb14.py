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
