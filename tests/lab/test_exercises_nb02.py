"""Notebook 02's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

from labqueue.lab.exercises import nb02 as module


def test_the_exercise_edits_the_very_condition_the_queue_claims_with():
    from labqueue import sql

    assert sql.CLAIM.count(module.READY) == 1
    assert module.claim_statement(module.READY) == sql.CLAIM


def test_the_first_claim_follows_the_lease_length():
    assert module.first_claim(30)[0] == 1030  # the tutorial's lease: visible_at <= now at 1030
    assert module.first_claim(45)[0] == 1045


def test_a_wrong_condition_is_told_what_it_took():
    verdict = module.check_ready_where("state = 'queued'")
    assert "delayed (until 1140)" in verdict.message and "lease expired" in verdict.message
