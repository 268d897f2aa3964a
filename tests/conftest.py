"""Shared fixtures: a fresh database in tmp_path, a FakeClock, and a queue factory.

Behavioural tests take `make_queue` (or `q`), and run once per backend in BACKENDS
(as huey's StorageTests do): SQLite in a file under tmp_path, and PostgreSQL in a
schema of its own on one throwaway server per session, dropped after the test. A test
about SQLite itself (files, WAL, PRAGMAs, query plans) is marked `sqlite_only`.

PostgreSQL tests skip, with the reason, only when the `postgres` extra is not
installed and LABQUEUE_PG_URL is unset; a server that fails to start is an error."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from labqueue import FakeClock, JobQueue


def sqlite_backend(request, tmp_path) -> Callable[..., Any]:
    """Queues on one SQLite file in the test's folder."""
    return lambda **settings: JobQueue(tmp_path / "jobs.db", **settings)


def postgres_backend(request, tmp_path) -> Callable[..., Any]:
    """Queues in one fresh schema on the session's server, dropped after the test."""
    url = request.getfixturevalue("pg_url")
    from labqueue.postgres import PgJobQueue, drop_schema

    schema = f"test_{uuid.uuid4().hex[:12]}"
    request.addfinalizer(lambda: drop_schema(url, schema))
    return lambda **settings: PgJobQueue(url, schema=schema, **settings)


BACKENDS: dict[str, Callable[..., Callable[..., Any]]] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}

# Short numbers that are easy to check by hand: a retry after attempt n waits exactly
# min(60, 2 * 2**(n-1)) seconds, because every random draw is pinned to its maximum.
TEST_SETTINGS = {"lease_seconds": 30, "backoff_cap": 60.0, "backoff_base": 2.0, "max_attempts": 3}


def pinned_draw() -> float:
    return 1.0


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "sqlite_only: about SQLite itself; runs on the sqlite backend only")


def pytest_generate_tests(metafunc) -> None:
    """Every test that takes make_queue (or q) runs once per backend; sqlite_only ones on SQLite."""
    if "make_queue" in metafunc.fixturenames:
        only_sqlite = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("make_queue", ["sqlite"] if only_sqlite else sorted(BACKENDS), indirect=True)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A postgresql:// URL: LABQUEUE_PG_URL, or one throwaway server for the whole session."""
    try:
        from labqueue.postgres.server import NoServer, throwaway_server
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need the extra: pip install 'labqueue[postgres]' ({exc})")
    try:
        with throwaway_server() as url:
            yield url
    except NoServer as exc:
        if isinstance(exc.__cause__, ImportError):
            pytest.skip(str(exc))
        raise


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def make_queue(request, tmp_path, clock) -> Iterator[Callable[..., Any]]:
    """Open queues on one backend's store; every one is closed after the test."""
    opened: list[Any] = []
    open_one = BACKENDS[request.param](request, tmp_path)

    def factory(**overrides) -> Any:
        settings = {**TEST_SETTINGS, "clock": clock, "rng": pinned_draw, **overrides}
        queue = open_one(**settings)
        opened.append(queue)
        return queue

    yield factory
    for queue in opened:
        queue.close()


@pytest.fixture
def q(make_queue) -> Any:
    return make_queue()
