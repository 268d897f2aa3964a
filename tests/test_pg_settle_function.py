"""PostgreSQL's one-call settle (sql.SETTLE): the same claim as the transaction path, the
batch rule and the concurrency rule rendered in PL/pgSQL held to core's Python, and the
function installed with the schema, by the open of an older queue, or not at all."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labqueue import FakeClock
from labqueue.core import Finished, Scope

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
from labqueue.drivers.postgres import sql as pg  # noqa: E402
from labqueue.postgres import PgJobQueue, drop_schema  # noqa: E402

NOW = 10_000.0


@pytest.fixture(scope="module")
def queue(pg_url):
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with PgJobQueue(pg_url, schema=schema, lease_seconds=30, clock=FakeClock(NOW)) as q:
        yield q
    drop_schema(pg_url, schema)


# A job as the test stores it: attempts made, state, whether its lease (if running) is
# live, its concurrency key (None, or one of three) and the key's limit, its priority.
JOBS = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from(["queued", "running", "done"]),
        st.booleans(),
        st.sampled_from([None, None, "a", "b", "c"]),
        st.integers(1, 3),
        st.integers(0, 1),
        st.sampled_from(["default", "mail", "reports"]),
    ),
    max_size=25,
)
SCOPES = st.sampled_from(
    [
        Scope("all"),
        Scope("default"),
        Scope("one", queue="mail"),
        Scope("some", queues=["mail", "reports"]),
        Scope("some_default", queues=["default", "reports"]),
        Scope("all_but", paused=["mail"]),
    ]
)


def store(q, jobs) -> None:
    q.db.execute("DELETE FROM jobs")
    for n, (attempts, state, live, key, limit, priority, queue_name) in enumerate(jobs):
        running = state == "running"
        q.db.execute(
            "INSERT INTO jobs (kind, payload, state, attempts, max_attempts, visible_at, lease_token,"
            " created_at, priority, concurrency_key, concurrency_limit, queue)"
            " VALUES ('t', '{}', %s, %s, 3, %s, %s, 0, %s, %s, %s, %s)",
            (
                state,
                max(attempts, 1) if running else attempts,
                NOW + (30 if live else -1) if running else NOW - 100 + n,
                "old" if running else None,
                priority,
                key,
                None if key is None else limit,
                queue_name,
            ),
        )


def outcome(q) -> list[tuple]:
    columns = "id, state, attempts, visible_at, lease_token, worker, last_error, finished_at"
    return q.db.execute(f"SELECT {columns} FROM jobs ORDER BY id").fetchall()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=JOBS, limit=st.integers(1, 12), scope=SCOPES)
def test_the_function_claims_what_the_transaction_path_claims(queue, jobs, limit, scope):
    """Stored jobs of every kind the rules look at (retried ones, exhausted leases, keys at
    and under their limits, priorities, queues) in every scope: the one call leases
    exactly the rows, and retires exactly the leases, that the look-then-claim
    transaction leases and retires."""
    q, d = queue, queue._d
    store(q, jobs)
    claim = q._claim_params("w", limit, scope)
    with d.transaction():
        by_transaction = sorted(row[0] for row in d.claim(claim, batch=True))
        after_transaction = outcome(q)
        raise psycopg.Rollback()  # undone: the one call starts from the same rows
    done, rows = d.settle_in_one_call([], claim.now, claim)
    assert done == []
    assert sorted(row[0] for row in rows) == by_transaction
    assert outcome(q) == after_transaction


def test_completions_and_the_claim_come_back_apart(queue):
    """The call's completions are fenced per token; the claim's rows carry a kind."""
    q = queue
    q.db.execute("DELETE FROM jobs")
    q.enqueue_many("t", [{"n": n} for n in range(5)])
    last = max(record.id for record in q.jobs())
    first = q.claim_batch("w", 2)
    other = q.claim_batch("w", 2)
    pairs = [(job.id, job.lease_token) for job in first] + [(other[0].id, "not its token")]
    claim = q._claim_params("w", 10, Scope("all"))
    done, rows = q._d.settle_in_one_call(pairs, claim.now, claim)
    assert sorted(done) == [job.id for job in first]
    assert [row[0] for row in rows] == [last] and rows[0][1] == "t"
    assert q.job(other[0].id).state == "running"  # the wrong token changed nothing
    assert q._d.settle_in_one_call([(other[1].id, other[1].lease_token)], None, None) == ([other[1].id], [])


def test_opening_an_older_queue_installs_the_function(pg_url):
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with PgJobQueue(pg_url, schema=schema) as q:
            q.db.execute(f"DROP FUNCTION {pg.SETTLE_FUNCTION}({pg.SETTLE_ARGUMENTS})")
        with PgJobQueue(pg_url, schema=schema) as q:
            assert q._d.one_call
            q.enqueue("t", {})
            (job,) = q.claim_batch("w", 10)
            assert q.settle([Finished(job)], claim_for="w") == (["done"], [])
    finally:
        drop_schema(pg_url, schema)


def test_a_role_that_may_not_create_uses_the_queue_through_transactions(pg_url, caplog):
    """The schema's owner made the queue before the function existed; a worker's role may
    read and write its tables but not create in its schema: it opens the queue without
    the function, and settles in a transaction of several statements."""
    schema, role = f"t_{uuid.uuid4().hex[:12]}", f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        try:
            with PgJobQueue(pg_url, schema=schema) as q:
                q.db.execute(f"DROP FUNCTION {pg.SETTLE_FUNCTION}({pg.SETTLE_ARGUMENTS})")
            admin.execute(f"CREATE ROLE {role} LOGIN")
            admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
            admin.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
            info = {**psycopg.conninfo.conninfo_to_dict(pg_url), "user": role, "password": None}
            url = psycopg.conninfo.make_conninfo(**{k: v for k, v in info.items() if v is not None})
            try:
                psycopg.connect(url).close()
            except psycopg.OperationalError as exc:
                pytest.skip(f"this server does not let a new role log in without a password ({exc})")
            with PgJobQueue(url, schema=schema) as q:  # a worker's open: it would install the function
                assert not q._d.one_call
                said = [r.getMessage() for r in caplog.records if r.name == "labqueue.postgres"]
                assert len(said) == 1 and "five round trips instead of one" in said[0], said
                assert role in said[0] or schema in said[0]
                q.enqueue_many("t", [{}, {}])
                jobs = q.claim_batch("w", 1)
                outcomes, jobs = q.settle([Finished(jobs[0])], claim_for="w")
                assert outcomes == ["done"] and len(jobs) == 1
            assert admin.execute(
                pg.SETTLE_EXISTS, {"signature": f"{schema}.{pg.SETTLE_FUNCTION}({pg.SETTLE_ARGUMENTS})"}
            ).fetchone() == (False,)
        finally:
            drop_schema(pg_url, schema)
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_current_queue_opens_without_the_schemas_lock_and_an_older_one_waits_for_it(pg_url):
    """Workers that start together open a queue that needs nothing at once; a queue that
    needs its function installed is changed by one process at a time, under the lock."""
    import threading

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        PgJobQueue(pg_url, schema=schema).close()
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(hashtext(%s))", (schema,))  # as a migrating process
            with PgJobQueue(pg_url, schema=schema) as q:  # current: opened while the lock is held
                assert q._d.one_call
                q.db.execute(f"DROP FUNCTION {pg.SETTLE_FUNCTION}({pg.SETTLE_ARGUMENTS})")
            opened: list[bool] = []

            def open_it() -> None:
                with PgJobQueue(pg_url, schema=schema) as other:
                    opened.append(other._d.one_call)

            opener = threading.Thread(target=open_it)
            opener.start()
            opener.join(timeout=0.5)
            assert opener.is_alive() and not opened  # it waits for the lock before installing
            holder.execute("SELECT pg_advisory_unlock(hashtext(%s))", (schema,))
            opener.join(timeout=30)
            assert opened == [True]
    finally:
        drop_schema(pg_url, schema)
