"""Notebook 04's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

import pytest

from labqueue.lab.exercises import nb04 as module


@pytest.mark.parametrize("statement", ["DELETE FROM jobs WHERE id = :id", "DROP TABLE jobs", "SELECT 1"])
@pytest.mark.parametrize("name", list(module.CHECKERS))
def test_a_statement_that_wrecks_the_job_is_not_yet_not_an_error(name, statement):
    assert not module.CHECKERS[name](statement=statement)
