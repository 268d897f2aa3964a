"""Notebook 02's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

from labqueue.lab.exercises import nb02 as module


def test_the_exercise_edits_the_very_condition_the_tutorial_claims_with():
    from labqueue.tutorial import jobqueue

    assert jobqueue.CLAIM.count(module.READY) == 1
    assert module.claim_statement(module.READY) == jobqueue.CLAIM


def test_the_first_claim_walks_the_learners_queue_class():
    from labqueue.tutorial import jobqueue

    class NeverReclaims(jobqueue.JobQueue):  # a claim that forgot expired leases
        def claim(self, worker, *, limit=1):
            return [] if self.clock() > 1000 else super().claim(worker, limit=limit)

    assert module.check_first_claim_at(1045, jobqueue.JobQueue)
    verdict = module.check_first_claim_at(1045, NeverReclaims)
    assert not verdict and "never got the job" in verdict.message


def test_the_first_claim_follows_the_lease_length():
    assert module.first_claim(30)[0] == 1030  # the tutorial's lease: visible_at <= now at 1030
    assert module.first_claim(45)[0] == 1045


def test_a_wrong_condition_is_told_what_it_took():
    verdict = module.check_ready_where("state = 'queued'")
    assert "delayed (until 1140)" in verdict.message and "lease expired" in verdict.message
