"""Notebook 09's exercise checks the learner's JobQueue: the level it opens at is read back."""

from __future__ import annotations

from labqueue.lab.exercises import nb09
from labqueue.tutorial.jobqueue import JobQueue


class AlwaysNormal(JobQueue):
    """A queue whose connection runs at NORMAL whatever it is asked for."""

    def __init__(self, path, *, synchronous="NORMAL", **kwargs):
        super().__init__(path, synchronous="NORMAL", **kwargs)


def test_the_answer_passes_on_the_tutorials_queue():
    verdict = nb09.check_durability("FULL", dict(nb09.TRUTH), JobQueue)
    assert verdict.passed and "synchronous = FULL" in str(verdict)


def test_a_queue_that_ignores_the_level_is_named():
    verdict = nb09.check_durability("FULL", dict(nb09.TRUTH), AlwaysNormal)
    assert not verdict.passed and "you asked for FULL, and SQLite runs at NORMAL" in str(verdict)
