"""labqueue.bench.delay_proxy: the benchmark's stand-in for a network between the workers and
PostgreSQL. Each byte arrives `delay` late each way, in order, so a round trip takes at least
twice the delay; the URL it hands out reaches the same database."""

from __future__ import annotations

import time

import pytest

from labqueue.bench.delay_proxy import DelayProxy, target_of, via


def test_the_url_through_the_proxy_keeps_user_password_database_and_parameters():
    url = "postgresql://app:p%40ss@db.example:6543/jobs?host=/tmp/sock&sslmode=disable&port=7"
    assert via(url, 40001) == "postgresql://app:p%40ss@127.0.0.1:40001/jobs?sslmode=disable"
    assert target_of("postgresql://postgres:@/postgres?host=/tmp/x/data") == "/tmp/x/data/.s.PGSQL.5432"
    assert target_of("postgresql://app@db.example:6543/jobs") == ("db.example", 6543)


def test_a_negative_delay_is_refused():
    with pytest.raises(ValueError, match="delay must be 0 or more seconds"):
        DelayProxy("postgresql://app@db.example/jobs", -1)


def test_queries_go_through_and_each_round_trip_pays_the_delay_twice(pg_url):
    import psycopg

    with DelayProxy(pg_url, 0.005) as proxy, psycopg.connect(proxy.url, autocommit=True) as db:
        assert db.execute("SELECT current_database()").fetchone()[0] == psycopg.conninfo.conninfo_to_dict(
            pg_url
        ).get("dbname", "postgres")
        began = time.perf_counter()
        for _ in range(5):
            assert db.execute("SELECT 1").fetchone() == (1,)
        assert (time.perf_counter() - began) / 5 >= 0.010
