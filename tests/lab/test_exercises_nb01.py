"""Notebook 01's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

from labqueue.lab.exercises import nb01 as module


def test_the_starter_is_caught_by_the_replayed_interleaving_not_by_luck():
    verdict = module.check_guarded_take(module.TAKE_START)
    assert "went to both workers" in verdict.message


def test_the_answers_race_real_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    verdict = module.check_one_statement(module.ONE_ANSWER)
    assert f"raced {module.N_JOBS} jobs" in verdict.message and "0 duplicates" in verdict.message


def test_each_wrong_guarded_take_is_told_its_own_mistake():
    on_running, not_sql = (module.check_guarded_take(w["take"]).message for w in module.WRONG["guarded_take"])
    assert "could not claim a job with your UPDATE: it changed no row" in on_running
    assert not_sql.startswith("your statement did not run")


def test_each_wrong_one_statement_claim_is_told_its_own_mistake():
    """The reason given is the statement's: MAX over queued rows takes each job once, newest
    first, so it is not told to pick only queued jobs; no reason names the answer's text."""
    told = [module.check_one_statement(w["claim"]).message for w in module.WRONG["one_statement"]]
    no_returning, two_statements, newest_first, same_job, none_free = told
    assert "RETURNING id" in no_returning
    assert "no :id" in two_statements
    assert "[3, 2, 1, None]" in newest_first and "oldest first" in newest_first
    assert "still queued" not in newest_first
    assert "[3, 3, 3, 3]" in same_job and "already claimed" in same_job
    assert "finds no row" in none_free and "RETURNING" not in none_free
    assert not any("MIN(id)" in message or module.ONE_ANSWER.strip() in message for message in told)
