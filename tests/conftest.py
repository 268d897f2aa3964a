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


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture(params=sorted(BACKENDS))
def make_queue(request, tmp_path, clock) -> Iterator[Callable[..., JobQueue]]:
    """Open queues on one backend's store; every one is closed after the test."""
    opened: list[JobQueue] = []

    def factory(**overrides) -> JobQueue:
        settings = dict(
            lease_seconds=30,
            max_attempts=3,
            backoff_base=2.0,
            backoff_cap=60.0,
            clock=clock,
            rng=lambda: 1.0,
        )
        settings.update(overrides)
        queue = BACKENDS[request.param](tmp_path, **settings)
        opened.append(queue)
        return queue

    yield factory
    for queue in opened:
        queue.close()


@pytest.fixture
def q(make_queue) -> JobQueue:
    return make_queue()
