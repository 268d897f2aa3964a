"""Notebook 09's exercise checks the learner's JobQueue: the level it opens at is read back."""

from __future__ import annotations

from labqueue.lab.exercises import nb09
from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue


class AlwaysNormal(TutorialQueue):
    """A queue whose connection runs at NORMAL whatever it is asked for."""

    def __init__(self, path, *, synchronous="NORMAL", **kwargs):
        super().__init__(path, synchronous="NORMAL", **kwargs)


def test_the_answer_passes_on_the_tutorials_queue():
    verdict = nb09.check_durability("FULL", dict(nb09.TRUTH), TutorialQueue)
    assert verdict.passed and "synchronous = FULL" in str(verdict)


def test_a_queue_that_ignores_the_level_is_named():
    verdict = nb09.check_durability("FULL", dict(nb09.TRUTH), AlwaysNormal)
    assert not verdict.passed and "you asked for FULL, and SQLite runs at NORMAL" in str(verdict)


def test_the_cost_never_says_full_is_cheaper_whatever_the_noise():
    """A loaded machine once timed FULL at 0.55 ms and NORMAL at 0.62 ms per commit; the medians'
    words must not turn round: within the noise they say so, beyond it FULL is the dearer."""
    close = nb09.cost_line(normal=0.00062, full=0.00055)
    assert "within noise" in close and "times as much" not in close
    assert "within noise" in nb09.cost_line(normal=0.00055, full=0.00062)
    dear = nb09.cost_line(normal=0.0001, full=0.002)
    assert "20.0 times as much with FULL" in dear


def test_the_timing_takes_the_median_of_rounds_in_turn(tmp_path):
    costs = nb09.commit_costs(tmp_path, TutorialQueue, rounds=3)
    assert {level: reported for level, (reported, _) in costs.items()} == {"NORMAL": "NORMAL", "FULL": "FULL"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["round0", "round1", "round2"]


def test_each_wrong_answer_is_told_its_own_mistake():
    believes_normal_survives, chose_normal, chose_off = (
        str(nb09.check_durability(**wrong, queue_class=TutorialQueue)) for wrong in nb09.WRONG["durability"]
    )
    assert "('NORMAL', 'power loss')" in believes_normal_survives
    assert "Your predictions are right" in chose_normal and "synchronous = NORMAL" in chose_normal
    assert chose_off == "NOT YET: synchronous must be one of NORMAL, FULL, got 'OFF'"
