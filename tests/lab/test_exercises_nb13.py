"""Notebook 13's exercise: each wrong look the checker knows is told its own mistake, and a
strict `<` (the claim compares with `<=`) is refused."""

from __future__ import annotations

import pytest

from labqueue.lab.exercises import nb13

# Each wrong version in nb13.WRONG, with words its message must hold: the mistake it made.
MISTAKES = {
    "state = 'queued'": ["a running job whose lease ended at 1030", "a claim would take it"],
    "state IN ('queued', 'running'))": ["a queued job delayed until 1140", "a claim would take nothing"],
    "COUNT(*) FROM jobs WHERE visible_at": ["a done job", "a dead job"],
    "visible_at < :now": ["exactly 1040", "leaves the moment itself out"],
    "UPDATE jobs": ["did not run as a read"],
}


def _expected(query: str) -> list[str]:
    (words,) = [words for marker, words in MISTAKES.items() if marker in query]
    return words


@pytest.mark.parametrize("wrong", nb13.WRONG["ready_query"], ids=lambda w: w["ready_query"][:60])
def test_each_wrong_look_is_told_its_mistake(wrong):
    verdict = nb13.check_ready_query(**wrong)
    assert not verdict
    for words in _expected(wrong["ready_query"]):
        assert words in verdict.message, verdict.message


def test_a_strict_comparison_is_refused_and_the_message_does_not_blame_the_state():
    strict = nb13.ANSWER.replace("<=", "<")
    verdict = nb13.check_ready_query(strict)
    assert not verdict
    assert "state" not in verdict.message and "exactly" in verdict.message


def test_the_scenes_include_jobs_due_at_exactly_now():
    assert {state for state, at, _ in nb13.SCENES.values() if at == nb13.NOW} == {"queued", "running"}
    assert all(claimable for _, at, claimable in nb13.SCENES.values() if at == nb13.NOW)
