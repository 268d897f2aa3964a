"""Numbers and error texts: numbers have bounds and never overflow; every error text a row
keeps stays within its bound; an exception that cannot print itself still fails its job."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument, JobQueue
from labqueue import worker as worker_loop
from labqueue.drivers.sqlite.sql import LAST_ATTEMPT_EXPIRED
from labqueue.queue import MAX_CLAIM_LIMIT, MAX_ERROR_CHARS

BIGGEST = 2**63 - 1  # the largest integer SQLite stores
LEASE = 30.0


@pytest.fixture
def q(tmp_path, clock):
    """A queue on SQLite, every random draw at its maximum."""
    with JobQueue(tmp_path / "jobs.db", clock=clock, rng=lambda: 1.0, lease_seconds=LEASE) as queue:
        yield queue


def raises(exc: BaseException):
    def handler(job, q):
        raise exc

    return handler


# -- backoff ------------------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [1025, 5000, 10**6, BIGGEST, 10**40])
def test_backoff_past_any_float_exponent_is_the_cap(q, attempts):
    assert q.backoff_delay(attempts) == q.backoff_cap


@pytest.mark.parametrize(("base", "cap"), [(1e-300, 1e300), (1e-300, 1e-299), (1e300, 1.7e308), (5.0, 1.0)])
def test_backoff_with_extreme_settings_stays_between_zero_and_the_cap(tmp_path, base, cap):
    with JobQueue(tmp_path / "b.db", backoff_base=base, backoff_cap=cap, rng=lambda: 1.0) as q:
        delays = [q.backoff_delay(n) for n in (-(10**30), -5, 0, 1, 2, 500, 1100, 2100, 5000, BIGGEST)]
    assert all(0 <= d <= cap for d in delays), delays
    assert delays[-1] == cap and delays[3] == min(base, cap)


def test_a_job_failing_on_attempt_5000_is_retried_after_the_cap(q, clock):
    q.enqueue("t", {}, max_attempts=10_000)
    q.db.execute("UPDATE jobs SET attempts = 4999")
    job = q.claim("w")[0]
    assert job.attempts == 5000
    assert worker_loop.handle(q, job, {"t": raises(RuntimeError("again"))}) == "queued"
    assert q.job(1).visible_at == clock() + q.backoff_cap


def test_the_largest_max_attempts_works_end_to_end(tmp_path, clock):
    with JobQueue(tmp_path / "big.db", max_attempts=BIGGEST, clock=clock, rng=lambda: 1.0) as q:
        q.enqueue("t", {})
        q.enqueue("t", {}, max_attempts=BIGGEST)
        first, second = q.claim("w", limit=2)
        assert (first.max_attempts, second.max_attempts) == (BIGGEST, BIGGEST)
        assert q.fail(first, "boom") == "queued"
        q.db.execute("UPDATE jobs SET attempts = ? WHERE id = 2", (BIGGEST - 1,))
        clock.advance(LEASE + 1)  # second's lease runs out: claimed again, on its very last attempt
        (again,) = [job for job in q.claim("w", limit=5) if job.id == 2]
        assert again.attempts == BIGGEST
        assert q.fail(again, "last") == "dead"


@pytest.mark.parametrize("value", [2**63, 2**64, 10**100])
def test_max_attempts_sqlite_cannot_store_is_refused_at_the_call(tmp_path, value):
    refused = rf"max_attempts must be a whole number from 1 to {BIGGEST}.*{value}"
    with pytest.raises(InvalidArgument, match=refused):
        JobQueue(tmp_path / "q.db", max_attempts=value)
    assert not (tmp_path / "q.db").exists()
    with JobQueue(tmp_path / "q.db") as q:
        with pytest.raises(InvalidArgument, match="max_attempts"):
            q.enqueue("t", {}, max_attempts=value)
        assert q.counts()["queued"] == 0


@pytest.mark.parametrize("setting", ["lease_seconds", "backoff_base", "backoff_cap", "timeout"])
def test_an_integer_too_large_for_a_float_is_refused_by_name(tmp_path, setting):
    with pytest.raises(InvalidArgument, match=setting):
        JobQueue(tmp_path / "q.db", **{setting: 10**400})


@pytest.mark.parametrize("limit", [MAX_CLAIM_LIMIT + 1, 2**63, 10**30])
def test_a_claim_limit_past_the_documented_maximum_is_refused(q, limit):
    q.enqueue("t", {})
    with pytest.raises(InvalidArgument, match=rf"limit must be a whole number from 1 to {MAX_CLAIM_LIMIT}"):
        q.claim("w", limit=limit)
    assert q.counts()["queued"] == 1


def test_a_claim_of_the_documented_maximum_works(q):
    q.enqueue_many("t", [{}] * 3)
    assert len(q.claim("w", limit=MAX_CLAIM_LIMIT)) == 3


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 10**30])
def test_ids_sqlite_cannot_store_are_refused(q, bad):
    with pytest.raises(InvalidArgument, match="64-bit"):
        q.job(bad)
    with pytest.raises(InvalidArgument, match="64-bit"):
        q.requeue_dead([1, bad])
    with pytest.raises(InvalidArgument, match="limit"):
        q.jobs(limit=abs(bad))


def test_the_largest_id_is_simply_not_found(q):
    assert q.job(BIGGEST) is None
    assert q.requeue_dead([BIGGEST]) == []


# -- error texts stay bounded ----------------------------------------------------------------


def expire_last_attempt_then_requeue(q: JobQueue, clock, claim) -> None:
    """One cycle: the only job (max_attempts=1) is claimed, its lease runs out, the next
    claim retires it as dead with the prefix, and an operator requeues it."""
    assert claim() is not None
    clock.advance(LEASE + 1)
    assert not claim()  # retires it instead
    assert q.requeue_dead() == [1]


@pytest.mark.parametrize("path", ["claim", "claim_next"])
def test_last_error_stays_bounded_over_50_expire_and_requeue_cycles(q, clock, path):
    q.enqueue("t", {}, max_attempts=1)
    job = q.claim("w")[0]
    q.fail(job, "E" * 10_000)
    q.requeue_dead()
    claim = (lambda: q.claim("w")) if path == "claim" else (lambda: q.claim_next("w"))
    for cycle in range(50):
        expire_last_attempt_then_requeue(q, clock, claim)
        error = q.job(1).last_error
        assert len(error) <= MAX_ERROR_CHARS, (cycle, len(error))
    twice = f"{LAST_ATTEMPT_EXPIRED}; previous error: " * 2
    assert error.startswith(twice)
    assert len(error) == MAX_ERROR_CHARS


def test_an_error_with_a_lone_surrogate_is_kept_as_an_escape(q):
    q.enqueue("t", {})
    job = q.claim("w")[0]
    assert q.fail(job, "bad byte \udcff in a file name", retry=False) == "dead"
    assert q.job(1).last_error == "bad byte \\udcff in a file name"


# -- an exception whose str() raises ---------------------------------------------------------


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class StrNotText(Exception):
    def __str__(self):  # type: ignore[override]
        return 42


class NothingPrints(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (StrRaises("x"), "StrRaises: StrRaises('x') (its str() raised RuntimeError)"),
        (StrNotText(), "StrNotText: StrNotText() (its str() raised TypeError)"),
        (NothingPrints(), "NothingPrints: <its str() raised RuntimeError, and so did its repr()>"),
        (ValueError("plain"), "ValueError: plain"),
    ],
)
def test_error_text_never_raises(exc, text):
    assert worker_loop.error_text(exc) == text


@pytest.mark.parametrize("exc", [StrRaises("x"), StrNotText(), NothingPrints()])
def test_a_handler_raising_an_unprintable_exception_fails_its_job(q, exc):
    q.enqueue("t", {})
    job = q.claim("w")[0]
    assert worker_loop.handle(q, job, {"t": raises(exc)}) == "queued"
    assert q.job(1).last_error.startswith(type(exc).__name__ + ": ")
