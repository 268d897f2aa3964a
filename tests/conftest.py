"""Shared fixtures: a fresh database in tmp_path, a FakeClock, and a queue factory.

Behavioural tests take `make_queue`, so a second backend only has to add a
factory to BACKENDS to run the same tests (as huey's StorageTests do)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from labqueue import FakeClock, JobQueue


def sqlite_backend(tmp_path, **kwargs) -> JobQueue:
    return JobQueue(tmp_path / "jobs.db", **kwargs)


BACKENDS: dict[str, Callable[..., JobQueue]] = {"sqlite": sqlite_backend}

# Short numbers that are easy to check by hand: a retry after attempt n waits exactly
# min(60, 2 * 2**(n-1)) seconds, because every random draw is pinned to its maximum.
TEST_SETTINGS = {"lease_seconds": 30, "backoff_cap": 60.0, "backoff_base": 2.0, "max_attempts": 3}


def pinned_draw() -> float:
    return 1.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture(params=sorted(BACKENDS))
def make_queue(request, tmp_path, clock) -> Iterator[Callable[..., JobQueue]]:
    """Open queues on one backend's store; every one is closed after the test."""
    opened: list[JobQueue] = []

    def factory(**overrides) -> JobQueue:
        settings = {**TEST_SETTINGS, "clock": clock, "rng": pinned_draw, **overrides}
        queue = BACKENDS[request.param](tmp_path, **settings)
        opened.append(queue)
        return queue

    yield factory
    for queue in opened:
        queue.close()


@pytest.fixture
def q(make_queue) -> JobQueue:
    return make_queue()
