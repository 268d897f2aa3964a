"""Notebook 04's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

import pytest

from labqueue.lab.exercises import nb04 as module
from labqueue.tutorial.jobqueue import FAIL
from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue


@pytest.mark.parametrize("statement", ["DELETE FROM jobs WHERE id = :id", "DROP TABLE jobs", "SELECT 1"])
@pytest.mark.parametrize("name", list(module.CHECKERS))
def test_a_statement_that_wrecks_the_job_is_not_yet_not_an_error(name, statement):
    assert not module.CHECKERS[name](statement=statement)


class _UnfencedFail(TutorialQueue):
    """The tutorial's queue with a fail() that forgot the token (the state check stays)."""

    def fail(self, job, error):
        rows = self.db.execute(
            FAIL.replace("lease_token = :token AND ", ""),
            {
                "retry_at": self.clock(),
                "now": self.clock(),
                "error": error,
                "id": job.id,
            },
        ).fetchall()
        return rows[0]["state"] if rows else None


class _UnfencedComplete(TutorialQueue):
    """The tutorial's queue with a complete() that finds the job by id and state alone."""

    def complete(self, job, effect=None):
        with self._tx() as db:
            sql = "UPDATE jobs SET state = 'done', lease_token = NULL WHERE id = ? AND state = 'running'"
            if db.execute(sql, (job.id,)).rowcount != 1:
                return False
            if effect is not None:
                effect(db)
        return True


def test_the_answers_pass_on_the_learners_own_queue_class():
    assert module.check_fenced_fail(module.FAIL_ANSWER, queue_class=TutorialQueue)
    assert module.check_unfenced_complete(module.COMPLETE_ANSWER, queue_class=TutorialQueue)


def test_a_fenced_statement_does_not_pass_when_the_learners_fail_is_unfenced():
    verdict = module.check_fenced_fail(module.FAIL_ANSWER, queue_class=_UnfencedFail)
    assert not verdict and "your JobQueue's own fail() is not" in verdict.message


def test_breaking_the_statement_does_not_pass_when_the_learners_complete_is_unfenced():
    verdict = module.check_unfenced_complete(module.COMPLETE_ANSWER, queue_class=_UnfencedComplete)
    assert not verdict and "your JobQueue's own complete() accepted" in verdict.message
