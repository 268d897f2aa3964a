"""What only the PostgreSQL backend has: a schema per queue, the server's clock, row
locks skipped by concurrent claimers, and open_queue choosing the backend by location.

The queue's rules themselves are tested once, for both backends, in test_queue.py and
the other files that take `make_queue`."""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator

import pytest

from labqueue import (
    FakeClock,
    ForeignJobsTable,
    InvalidArgument,
    JobQueue,
    PayloadNotSerializable,
    QueueBusy,
)
from labqueue.backends import BackendMissing, open_queue
from labqueue.errors import CannotOpen

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from labqueue.core import Finished  # noqa: E402
from labqueue.drivers.postgres import sql as pg  # noqa: E402
from labqueue.errors import EffectEndedTransaction, QueueNotFound  # noqa: E402
from labqueue.postgres import PgJobQueue, drop_schema  # noqa: E402
from labqueue.postgres.server import ENV_URL, throwaway_server  # noqa: E402


@pytest.fixture
def schema(pg_url) -> Iterator[str]:
    """A schema name of this test's own, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def pgq(pg_url, schema):
    with PgJobQueue(pg_url, schema=schema, lease_seconds=30) as q:
        yield q


# -- choosing the backend ---------------------------------------------------------------


def test_open_queue_picks_the_backend_by_location(tmp_path, pg_url, schema):
    with open_queue(tmp_path / "jobs.db", lease_seconds=5) as lite:
        assert type(lite) is JobQueue and lite.lease_seconds == 5
    with open_queue(pg_url, schema=schema, lease_seconds=5) as pgq:
        assert type(pgq) is PgJobQueue and (pgq.schema, pgq.lease_seconds) == (schema, 5)


def test_open_queue_refuses_an_unknown_scheme(tmp_path):
    with pytest.raises(InvalidArgument, match="mysql://"):
        open_queue("mysql://db/jobs")


def test_a_url_without_the_extra_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "labqueue.postgres", None)  # as if psycopg were not installed
    with pytest.raises(BackendMissing, match=r"labqueue\[postgres\]"):
        open_queue("postgresql://localhost/jobs")


def test_an_unreachable_server_is_cannot_open_without_the_password(tmp_path):
    url = f"postgresql://app:secret@/jobs?host={tmp_path / 'no-server-here'}"
    with pytest.raises(CannotOpen) as err:
        PgJobQueue(url)
    assert "secret" not in str(err.value) and "***" in str(err.value)


def test_a_throwaway_server_yields_the_given_url_when_one_is_set(monkeypatch):
    monkeypatch.setenv(ENV_URL, "postgresql://somewhere/else")
    with throwaway_server() as url:
        assert url == "postgresql://somewhere/else"


# -- the schema -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Jobs", "a-b", "x; DROP TABLE jobs", "1abc", "a" * 64, None])
def test_a_schema_name_must_be_a_plain_identifier(pg_url, name):
    with pytest.raises(InvalidArgument, match="schema"):
        PgJobQueue(pg_url, schema=name)


def test_each_schema_is_a_queue_of_its_own(pg_url, schema):
    with PgJobQueue(pg_url, schema=schema) as one, PgJobQueue(pg_url, schema=schema + "_b") as two:
        try:
            one.enqueue("a", {})
            assert (one.counts()["queued"], two.counts()["queued"]) == (1, 0)
            assert two.enqueue("b", {}) == 1  # ids are per queue
        finally:
            drop_schema(pg_url, schema + "_b")


def test_the_table_has_the_check_and_the_three_partial_indexes(pgq):
    found = dict(
        pgq.db.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'jobs'",
            (pgq.schema,),
        ).fetchall()
    )
    assert {"jobs_ready", "jobs_exhausted", "jobs_dead"} <= set(found)
    assert "WHERE (state = 'dead'::text)" in found["jobs_dead"]
    with pytest.raises(psycopg.errors.CheckViolation):
        pgq.enqueue("a", {})
        pgq.db.execute("UPDATE jobs SET state = 'paused'")


def test_dedupe_keys_are_unique_through_a_partial_index_that_keyless_jobs_stay_out_of(pgq):
    pgq.enqueue_many("t", [{}, {}])
    assert pgq.enqueue("t", {}, dedupe_key="k") == 3
    assert pgq.enqueue("t", {}, dedupe_key="k") is None
    found = "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = 'jobs_dedupe_key'"
    definition = pgq.db.execute(found, (pgq.schema,)).fetchone()[0]
    assert "UNIQUE" in definition and "WHERE (dedupe_key IS NOT NULL)" in definition


def test_the_dedupe_index_comes_beside_the_constraint_and_the_constraint_goes_on_contract(pg_url, schema):
    """Expand, then contract: a queue made with UNIQUE (dedupe_key), as labqueue 0.2 made
    it, is opened as it is; `migrate` adds the partial unique index beside the constraint
    (an older labqueue's ON CONFLICT (dedupe_key) still finds it), and only `migrate
    --contract` drops the constraint."""
    from labqueue.migrate import migrate

    with PgJobQueue(pg_url, schema=schema) as q:  # as a queue made before the index was
        q.enqueue("t", {}, dedupe_key="k")
        q.db.execute("DROP INDEX jobs_dedupe_key")
        q.db.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_dedupe_key_key UNIQUE (dedupe_key)")
        q.db.execute("DROP TABLE labqueue_migrations")  # made before versions were recorded

    def constraints(q) -> list:
        return q.db.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass AND contype = 'u'"
        ).fetchall()

    with PgJobQueue(pg_url, schema=schema) as q:  # opening changes nothing
        assert constraints(q) == [("jobs_dedupe_key_key",)]
        assert q.enqueue("t", {}, dedupe_key="k") is None
    plan = migrate(pg_url, schema=schema)
    assert [step[0] for step in plan.steps] == [7]  # the expand step only
    with PgJobQueue(pg_url, schema=schema) as q:
        assert constraints(q) == [("jobs_dedupe_key_key",)]
        assert q.db.execute("SELECT to_regclass('jobs_dedupe_key') IS NOT NULL").fetchone()[0]
        # an older labqueue's statement: its ON CONFLICT (dedupe_key) infers the constraint
        q.db.execute(
            "INSERT INTO jobs (kind, payload, visible_at, created_at, dedupe_key)"
            " VALUES ('t', '{}', 0, 0, 'old') ON CONFLICT (dedupe_key) DO NOTHING"
        )
        assert q.enqueue("t", {}, dedupe_key="old") is None
    assert [step[0] for step in migrate(pg_url, schema=schema, contract=True).steps] == [8]
    with PgJobQueue(pg_url, schema=schema) as q:
        assert constraints(q) == []
        assert q.enqueue("t", {}, dedupe_key="k") is None and q.enqueue("t", {}, dedupe_key="j") is not None
        applied = [row[0] for row in q.db.execute("SELECT version FROM labqueue_migrations ORDER BY version")]
        assert applied == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_foreign_jobs_table_is_refused_and_left_alone(pg_url, schema):
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'CREATE TABLE "{schema}".jobs (id int, title text)')
        db.execute(f'INSERT INTO "{schema}".jobs VALUES (1, %s)', ("mine",))
        with pytest.raises(ForeignJobsTable, match="kind"):
            PgJobQueue(pg_url, schema=schema)
        assert db.execute(f'SELECT title FROM "{schema}".jobs').fetchall() == [("mine",)]


def test_the_claim_is_one_statement_that_skips_locked_rows():
    assert pg.CLAIM.count("FOR UPDATE SKIP LOCKED") == 2  # the retire and the claim
    assert "WHERE id IN (SELECT id FROM jobs" in pg.CLAIM
    assert pg.CLAIM.strip().startswith("WITH retired AS (")


def _numbered(statement: str) -> str:
    """A statement with %(name)s parameters written as $1, $2 ... (each name one number)."""
    import re

    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, statement)


def test_the_worker_statements_generic_plans_walk_the_indexes(pgq):
    """The session runs prepared statements with one generic plan (PgDriver._session): the
    worker's per-batch statements must still walk jobs_ready in the claim's order, and the
    completions and the lease by id the primary key, with most of the table finished."""
    if pgq.db.info.server_version < 160000:
        pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
    assert pgq.db.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
    pgq.enqueue_many("t", ({"n": n} for n in range(3000)))
    pgq.db.execute("UPDATE jobs SET state = 'done', finished_at = 1 WHERE id <= 2900")
    pgq.db.execute("ANALYZE jobs")

    def plan(statement: str) -> str:
        rows = pgq.db.execute("EXPLAIN (GENERIC_PLAN) " + _numbered(statement), prepare=False)
        return "\n".join(row[0] for row in rows)

    for scope, index in (("all", "jobs_ready"), ("default", "jobs_ready"), ("one", "jobs_queue_ready")):
        found = plan(pg.BATCH_LOOK_IN[scope])
        assert f"Index Scan using {index} on jobs" in found and "Seq Scan" not in found, found
        assert "Sort" not in found.split("LockRows")[-1], found  # the index gives the order
    for statement in (pg.CLAIM_IDS, pg.COMPLETE_MANY):
        found = plan(statement)  # by id: the primary key, or the small partial index of live rows
        assert "Index Scan using" in found and "Seq Scan" not in found, found
    pgq.enqueue_many("t", ({"n": n} for n in range(20000)))  # a backlog: jobs_ready is big now
    pgq.db.execute("ANALYZE jobs")
    for statement in (pg.CLAIM_IDS, pg.COMPLETE_MANY):
        found = plan(statement)
        assert "Index Scan using jobs_pkey on jobs" in found and "Seq Scan" not in found, found
    found = plan(pg.BATCH_LOOK_IN["all"])
    assert "Index Scan using jobs_ready on jobs" in found and "Sort" not in found, found
    # An idle worker's look is never prepared: its answer depends on `now` (below).
    jobs = pgq.claim_batch("w", 10)
    for _ in range(8):  # the worker's statements are prepared from their sixth run; the look never
        assert pgq.any_ready()
        _, jobs = pgq.settle([Finished(job) for job in jobs], claim_for="w", limit=10)
    rows = pgq.db.execute("SELECT statement FROM pg_prepared_statements")
    prepared = [" ".join(text.split()) for (text,) in rows]
    # the batch's one call (its steps, BATCH_LOOK_IN's among them, are PL/pgSQL's plans)
    assert any(text.startswith(f"SELECT * FROM {pg.SETTLE_FUNCTION}(") for text in prepared), prepared
    assert not any(text.startswith("SELECT EXISTS") for text in prepared), prepared


def test_completions_go_by_the_key_past_a_backlog_the_table_has_no_statistics_for(pgq):
    """Ready jobs with distinct run times, never analyzed: the completions' generic plan
    looks each id up by the primary key and does not walk jobs_ready, whose entries it
    would have to pass one by one."""
    if pgq.db.info.server_version < 160000:
        pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
    pgq.db.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")  # no analyze meanwhile
    pgq.enqueue_many("t", ({"n": n} for n in range(20000)))
    pgq.db.execute("UPDATE jobs SET visible_at = visible_at - 100000 + id * 0.001")
    rows = pgq.db.execute("EXPLAIN (GENERIC_PLAN) " + _numbered(pg.COMPLETE_MANY), prepare=False)
    found = "\n".join(row[0] for row in rows)
    by_key = "Index Scan using jobs_pkey on jobs" in found or "Bitmap Index Scan on jobs_pkey" in found
    assert by_key and "jobs_ready" not in found, found


def test_no_statement_formats_a_value():
    """Values are %(name)s parameters: the only braces are the schema identifier's, and
    the private templates' (filled with the module's own constants at import)."""
    statements = [(name, getattr(pg, name)) for name in dir(pg) if not name.startswith("_")]
    statements += [
        (f"{name}[{scope}]", text)
        for name in dir(pg)
        if name.endswith("_IN")
        for scope, text in getattr(pg, name).items()
    ]
    for name, text in statements:
        identifiers = (
            "CREATE_SCHEMA",
            "DROP_SCHEMA",
            "LISTEN",
            "MIGRATIONS_APPLIED_FROM",
            "DROP_INDEX_CONCURRENTLY",
        )
        if isinstance(text, str) and name not in identifiers:
            assert "{" not in text and "%s" not in text, name


# -- concurrency ------------------------------------------------------------------------------


def test_a_claimer_skips_a_row_another_transaction_has_locked(pg_url, schema, pgq):
    pgq.enqueue_many("a", [{}, {}])
    with psycopg.connect(pg_url) as other:  # a transaction that holds job 1's row lock
        other.execute(f'SELECT 1 FROM "{schema}".jobs WHERE id = 1 FOR UPDATE')
        assert [j.id for j in pgq.claim("w", limit=2)] == [2]  # job 1 is skipped, not waited for
        other.rollback()
    assert [j.id for j in pgq.claim("w", limit=2)] == [1]


def test_a_report_blocked_past_the_lock_timeout_is_queue_busy(pg_url, schema):
    with PgJobQueue(pg_url, schema=schema, timeout=0.05) as q:
        q.enqueue("a", {})
        (job,) = q.claim("w")
        with psycopg.connect(pg_url) as other:
            other.execute(f'SELECT 1 FROM "{schema}".jobs WHERE id = 1 FOR UPDATE')
            with pytest.raises(QueueBusy, match="lock timeout"):
                q.complete(job)
            other.rollback()
        assert q.job(1).state == "running"
        assert q.complete(job) is True


def test_an_effect_gets_the_psycopg_connection_inside_the_transaction(pgq):
    pgq.db.execute("CREATE TABLE audit (job_id bigint)")
    pgq.enqueue("a", {})
    (job,) = pgq.claim("w")
    seen = []

    def effect(db):
        seen.append((type(db), db.info.transaction_status.name))
        db.execute("INSERT INTO audit VALUES (%s)", (job.id,))

    assert pgq.complete(job, effect=effect) is True
    assert seen == [(psycopg.Connection, "INTRANS")]
    assert pgq.db.execute("SELECT job_id FROM audit").fetchall() == [(1,)]


# -- the server's clock -------------------------------------------------------------------------


def test_without_a_clock_deadlines_come_from_the_server(pgq):
    before = pgq.server_time()
    pgq.enqueue("a", {})
    (job,) = pgq.claim("w")
    after = pgq.server_time()
    assert before + 30 <= job.lease_expires_at <= after + 30
    record = pgq.job(job.id)
    assert before <= record.created_at <= after


def test_an_injected_clock_overrides_the_server(pg_url, schema):
    clock = FakeClock(1000.0)
    with PgJobQueue(pg_url, schema=schema, clock=clock, lease_seconds=30) as q:
        q.enqueue("a", {})
        (job,) = q.claim("w")
        assert job.lease_expires_at == 1030.0
        assert q.job(job.id).created_at == 1000.0


def test_workers_whose_clocks_disagree_still_agree_on_the_lease(pg_url, schema):
    """Two 'machines': neither passes its clock, so both read the server's and the
    second cannot take the first one's live lease, whatever the hosts' clocks say."""
    with PgJobQueue(pg_url, schema=schema) as a, PgJobQueue(pg_url, schema=schema) as b:
        a.enqueue("a", {})
        (held,) = a.claim("machine-a")
        assert b.claim("machine-b") == []
        assert a.complete(held) is True


def test_bad_text_is_refused_by_name_before_anything_is_written(pgq):
    with pytest.raises(InvalidArgument, match="kind"):
        pgq.enqueue("a\x00b", {})
    with pytest.raises(InvalidArgument, match="dedupe_key"):
        pgq.enqueue("a", {}, dedupe_key="k\x00")
    assert pgq.counts()["queued"] == 0


def test_an_effect_that_swallows_a_database_error_does_not_complete_the_job(pgq):
    """PostgreSQL aborts the transaction on an error; COMMIT would then quietly roll back,
    so complete() must not report the job done."""
    pgq.enqueue("a", {})
    (job,) = pgq.claim("w")

    def careless(db):
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            db.execute("SELECT 1 / 0")

    with pytest.raises(EffectEndedTransaction, match="caught a database error"):
        pgq.complete(job, effect=careless)
    assert (pgq.job(1).state, pgq.job(1).lease_token) == ("running", job.lease_token)
    assert pgq.complete(job) is True


def test_an_effect_that_commits_itself_is_reported_and_nothing_more_is_claimed(pgq):
    pgq.enqueue_many("a", [{}, {}])
    (job,) = pgq.claim("w")
    with pytest.raises(EffectEndedTransaction, match="ended the transaction itself"):
        pgq.complete_and_claim(job, "w", effect=lambda db: db.execute("COMMIT"))
    assert pgq.job(2).state == "queued"


def test_a_claimed_payload_that_is_not_json_is_dead_lettered_not_run(pgq):
    pgq.enqueue_many("a", [{}, {}])
    pgq.db.execute("UPDATE jobs SET payload = 'not json' WHERE id = 1")  # behind the queue's back
    assert [j.id for j in pgq.claim("w", limit=2)] == [2]
    record = pgq.job(1)
    assert (record.state, record.lease_token) == ("dead", None)
    assert record.last_error.startswith("unreadable job, not run")


def test_error_text_postgresql_cannot_hold_is_kept_as_escapes(pgq):
    pgq.enqueue("a", {})
    (job,) = pgq.claim("w")
    assert pgq.fail(job, "lone \ud800 and nul \x00") == "queued"
    assert pgq.job(1).last_error == "lone \\ud800 and nul \\x00"


# -- waking idle workers --------------------------------------------------------------------------


def test_a_waiting_worker_is_woken_by_a_commit_that_adds_ready_work(pg_url, schema):
    with PgJobQueue(pg_url, schema=schema) as worker, PgJobQueue(pg_url, schema=schema) as producer:
        assert worker.wait_for_jobs(0) is False  # starts listening; nothing said yet
        producer.enqueue("a", {})
        assert worker.wait_for_jobs(30) is True  # returns on the signal, not after 30 s
        assert worker.wait_for_jobs(0) is False  # one signal wakes one wait
        producer.enqueue_many("a", [{}, {}])
        assert worker.any_ready()  # a signal that arrives during another statement ...
        assert worker.wait_for_jobs(30) is True  # ... still counts (kept by psycopg)


def test_no_signal_for_a_delayed_job_or_a_refused_batch(pg_url, schema):
    with PgJobQueue(pg_url, schema=schema) as worker, PgJobQueue(pg_url, schema=schema) as producer:
        worker.wait_for_jobs(0)
        producer.enqueue("a", {}, delay=600)
        with pytest.raises(PayloadNotSerializable):
            producer.enqueue_many("a", [{}, {1, 2}])
        assert worker.wait_for_jobs(0.2) is False


def test_create_false_opens_only_an_existing_queue(pg_url, schema):
    with pytest.raises(QueueNotFound, match=schema):
        PgJobQueue(pg_url, schema=schema, create=False)
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
    PgJobQueue(pg_url, schema=schema).close()
    with PgJobQueue(pg_url, schema=schema, create=False) as q:
        assert q.counts()["queued"] == 0


def test_a_sqlite_only_setting_is_refused_for_a_url(pg_url):
    with pytest.raises(InvalidArgument, match="synchronous applies to SQLite files only"):
        open_queue(pg_url, synchronous="FULL")


def test_numbers_as_large_as_sqlite_stores_are_stored(pgq):
    """attempts and max_attempts are 64-bit, as SQLite's integers are."""
    job_id = pgq.enqueue("a", {}, max_attempts=2**63 - 1)
    assert pgq.job(job_id).max_attempts == 2**63 - 1


@pytest.mark.parametrize("attempts", [1, 6, 2000, 10**6])
def test_backoff_never_overflows_and_stays_under_the_cap(pgq, attempts):
    assert 0.0 <= pgq.backoff_delay(attempts) <= pgq.backoff_cap


def test_a_schema_name_for_a_file_is_refused_by_open_queue(tmp_path):
    with pytest.raises(InvalidArgument, match="names a PostgreSQL schema"):
        open_queue(tmp_path / "jobs.db", schema="billing")
    assert not (tmp_path / "jobs.db").exists()
