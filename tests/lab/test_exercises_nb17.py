"""Notebook 17's exercise: each wrong locking clause the checker knows is told its own mistake,
a shared lock that passes the first moment fails the second, and no message gives the answer
away. Runs on a throwaway PostgreSQL (or the one LABQUEUE_PG_URL names)."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from labqueue.lab.exercises import nb17

pytestmark = pytest.mark.slow

# Each wrong version in nb17.WRONG, with words its message must hold: the mistake it made.
MISTAKES = {
    "FOR UPDATE": ["only after waiting for A's transaction"],
    "FOR UPDATE NOWAIT": ["gave up with LockNotAvailable"],
    "FOR SHARE SKIP LOCKED": ["two claims pick at the same moment", "a SHARE lock is shared", "deadlock"],
    "SKIP LOCKED": ["not a clause on its own"],
}


@pytest.mark.parametrize("wrong", nb17.WRONG["locking_clause"], ids=lambda w: w["locking"])
def test_each_wrong_clause_is_told_its_mistake_and_not_the_answer(wrong):
    verdict = nb17.check_locking_clause(**wrong)
    assert not verdict
    for words in MISTAKES[wrong["locking"]]:
        assert words in verdict.message, verdict.message
    assert nb17.ANSWER not in verdict.message.replace(f"{wrong['locking']}:", ""), verdict.message


def test_the_lock_its_update_takes_is_right_too():
    verdict = nb17.check_locking_clause("FOR NO KEY UPDATE SKIP LOCKED")
    assert verdict and "PgJobQueue's claim takes FOR UPDATE SKIP LOCKED" in verdict.message


def test_the_answer_is_the_package_claims_clause():
    from labqueue.drivers.postgres import sql

    assert nb17.ANSWER in " ".join(sql.CLAIM.split())


def test_a_shared_lock_is_refused_and_skip_locked_alone_is_not_given_the_answer():
    assert not nb17.check_locking_clause("FOR SHARE SKIP LOCKED")
    alone = nb17.check_locking_clause("SKIP LOCKED")
    assert not alone and "FOR UPDATE" not in alone.message
