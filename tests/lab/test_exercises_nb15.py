"""Notebook 15's exercises: each wrong version a checker knows is told its own mistake."""

from __future__ import annotations

import pytest

from labqueue.lab.exercises import nb15

# Each wrong version in nb15.WRONG, with words its message must hold: the mistake it made.
MISTAKES = {
    "priority, visible_at, id": ["job 8 has priority -3, job 7 priority 10", "highest priority first"],
    "priority DESC, id": ["both have priority 10", "ready longest goes first"],
    "-priority, visible_at, id": ["the order is right", "sorts every ready row"],
    "mail,webhooks,reports:9": ["mail at least 30%", "webhooks at least 15%"],
    "mail:3,reports:4": ["leaves out webhooks"],
    "mail:3,webhooks:0,reports:4": ["from 1 to 1000, got 0"],
}

CASES = [(name, wrong) for name, wrongs in nb15.WRONG.items() for wrong in wrongs]


@pytest.mark.parametrize(("name", "wrong"), CASES, ids=[next(iter(w.values())) for _, w in CASES])
def test_each_wrong_version_is_told_its_mistake(name, wrong):
    verdict = nb15.CHECKERS[name](**wrong)
    assert not verdict
    for words in MISTAKES[next(iter(wrong.values()))]:
        assert words in verdict.message, verdict.message


def test_a_tie_broken_the_wrong_way_is_named():
    apart = nb15._why_apart(3, 2)  # jobs 2 and 3: priority 5, but 3 is ready later
    assert "ready longest" in apart
    jobs = nb15.scenario_jobs()
    assert jobs[7][0] == jobs[4][0] == 10 and jobs[7][1] < jobs[4][1], "job 4's retry is ready after job 7"
