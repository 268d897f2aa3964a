"""Concurrency limits per key, on both backends: a job with a concurrency key is handed out
only while its key has fewer running jobs (with a live lease) than its limit; a key at its
limit never holds back the jobs behind it; a lease that runs out frees its place. The rule
is core.within_limits; a model test drives it against random claims, completions and
expiries. Real worker processes: tests/test_concurrency_keys_workers.py."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labqueue import JobQueue, handlers
from labqueue.core import KIND_LIMITS, within_limits
from labqueue.drivers.sqlite import sql
from labqueue.errors import InvalidArgument


def keys_of(q, jobs) -> Counter:
    return Counter(q.job(job.id).concurrency_key for job in jobs)


def running_per_key(q) -> Counter:
    return Counter(r.concurrency_key for r in q.jobs(state="running") if r.concurrency_key is not None)


@pytest.mark.parametrize("claim", ["claim", "claim_batch"])
def test_a_claim_takes_no_more_of_a_key_than_its_limit(make_queue, claim):
    q = make_queue()
    for n in range(6):
        q.enqueue("sync", {"n": n}, concurrency_key="customer:1", concurrency_limit=2)
    for n in range(3):
        q.enqueue("sync", {"n": n}, concurrency_key="customer:2", concurrency_limit=1)
    q.enqueue_many("plain", [{"n": 1}, {"n": 2}])
    taken = q.claim("w", limit=20) if claim == "claim" else q.claim_batch("w", 20)
    assert keys_of(q, taken) == {"customer:1": 2, "customer:2": 1, None: 2}
    assert running_per_key(q) == {"customer:1": 2, "customer:2": 1}
    assert q.claim("w", limit=20) == [] and q.claim_batch("w", 20) == []
    assert q.stats()["queued"] == 6  # the rest wait, queued, attempts untouched
    assert {r.attempts for r in q.jobs(state="queued")} == {0}


def test_a_key_at_its_limit_never_holds_back_the_jobs_behind_it(make_queue):
    q = make_queue()
    first = [q.enqueue("sync", {"n": n}, concurrency_key="acct", concurrency_limit=1) for n in range(5)]
    later = [q.enqueue("plain", {"n": n}) for n in range(3)]
    assert q.claim_next("w").id == first[0]
    assert [q.claim_next("w").id for _ in range(3)] == later
    assert q.claim_next("w") is None
    assert q.any_ready() is False  # an idle worker's look agrees: nothing it may take


def test_completing_or_a_lease_running_out_frees_the_place(make_queue, clock):
    q = make_queue()
    ids = [q.enqueue("sync", {"n": n}, concurrency_key="doc:7", concurrency_limit=1) for n in range(3)]
    job = q.claim_next("w")
    assert job.id == ids[0] and q.claim_next("w") is None
    assert q.complete(job)
    second = q.claim_next("w")
    assert second.id == ids[1] and q.claim_next("w") is None
    clock.advance(31)  # its 30 s lease ran out: its worker is gone
    third = q.claim_next("w2")  # the expired lease is not counted
    assert third.id == ids[2] and q.claim_next("w3") is None
    assert running_per_key(q) == {"doc:7": 2}  # the live lease and the expired one


def test_each_job_may_carry_its_own_limit_and_keys_are_independent(make_queue):
    q = make_queue()
    for key, limit in (("a", 1), ("b", 3), ("c", 2)):
        for n in range(4):
            q.enqueue("sync", {"n": n}, concurrency_key=key, concurrency_limit=limit)
    taken = q.claim("w", limit=50)
    assert keys_of(q, taken) == {"a": 1, "b": 3, "c": 2}


def test_enqueue_many_gives_every_job_the_key(make_queue):
    q = make_queue()
    assert q.enqueue_many("sync", [{"n": n} for n in range(5)], concurrency_key="k", concurrency_limit=2) == 5
    assert {(r.concurrency_key, r.concurrency_limit) for r in q.jobs()} == {("k", 2)}
    assert len(q.claim_batch("w", 10)) == 2


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"concurrency_key": "k"}, "needs a concurrency_limit"),
        ({"concurrency_limit": 2}, "needs a concurrency_key"),
        ({"concurrency_key": "", "concurrency_limit": 2}, "must not be empty"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit must be a whole number from 1"),
        ({"concurrency_key": "k", "concurrency_limit": 2.5}, "got 2.5"),
        ({"concurrency_key": 42, "concurrency_limit": 2}, "concurrency_key must be a string"),
        ({"concurrency_key": "x" * 1025, "concurrency_limit": 2}, "at most 1024 bytes"),
    ],
)
def test_a_bad_key_or_limit_is_refused_and_nothing_is_stored(make_queue, given, says):
    q = make_queue()
    with pytest.raises(InvalidArgument, match=says):
        q.enqueue("sync", {}, **given)
    with pytest.raises(InvalidArgument, match=says):
        q.enqueue_many("sync", [{}], **given)
    assert sum(q.counts().values()) == 0


@pytest.fixture
def registered():
    """Handlers registered for the test only."""
    before_handlers, before_limits = dict(handlers.HANDLERS), dict(KIND_LIMITS)
    yield handlers.handler
    handlers.HANDLERS.clear(), handlers.HANDLERS.update(before_handlers)
    KIND_LIMITS.clear(), KIND_LIMITS.update(before_limits)


def test_a_handler_gives_its_kind_a_limit_per_key_or_as_a_whole(make_queue, registered):
    registered("charge", concurrency_limit=2, concurrency_key=lambda p: f"customer:{p['customer']}")(print)
    registered("rebuild", concurrency_limit=1)(print)
    q = make_queue()
    q.enqueue("charge", {"customer": 42})
    q.enqueue("rebuild", {})
    q.enqueue("charge", {"customer": 42}, concurrency_key="override", concurrency_limit=5)
    got = [(r.kind, r.concurrency_key, r.concurrency_limit) for r in q.jobs()]
    assert sorted(got) == [
        ("charge", "customer:42", 2),
        ("charge", "override", 5),
        ("rebuild", "kind:rebuild", 1),
    ]
    with pytest.raises(InvalidArgument, match="enqueue these jobs one by one"):
        q.enqueue_many("charge", [{"customer": 1}])
    with pytest.raises(InvalidArgument, match=r"the concurrency key of 'charge'.*must be a string"):
        registered("charge", concurrency_limit=2, concurrency_key=lambda p: p.get("customer"))(print)
        q.enqueue("charge", {"customer": 7})
    with pytest.raises(InvalidArgument, match="needs a concurrency_limit"):
        registered("x", concurrency_key=lambda p: "k")


def test_a_version_4_file_gains_the_key_columns_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for step in sql.MIGRATIONS[: sql.LAST_KEYLESS_VERSION]:
        from labqueue.drivers.sqlite.schema import run_migration

        run_migration(db, step)
    db.execute("INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ('old', '{}', 0, 0)")
    db.execute(f"PRAGMA user_version = {sql.LAST_KEYLESS_VERSION}")
    db.close()
    with JobQueue(path) as q:
        assert q.db.execute("PRAGMA user_version").fetchone()[0] == sql.SCHEMA_VERSION
        assert q.claim_next("w").kind == "old"
        q.enqueue("new", {}, concurrency_key="k", concurrency_limit=1)
        indexes = {n for (n,) in q.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "jobs_key_held" in indexes
    with JobQueue(path) as again:  # a file of version 5 opens as it is
        assert again.job(2).concurrency_key == "k"


# -- the rule, against a model --------------------------------------------------------


def test_within_limits_keeps_the_first_jobs_of_each_key_in_claim_order():
    rows = [(1, "a", 2), (2, None, None), (3, "a", 2), (4, "a", 2), (5, "b", 1), (6, "b", 1)]
    fit, over = within_limits(rows, 1, {"a": (1, 3)})
    assert [r[0] for r in fit] == [1, 2, 5] and [r[0] for r in over] == [3, 4, 6]


def test_within_limits_holds_a_key_to_the_strictest_limit_of_its_running_jobs():
    rows = [(1, "a", 3), (2, "a", 1), (3, "a", 3), (4, "b", 3)]
    # a runs one job whose limit is 2: job 1 makes two; job 2 (limit 1) and job 3 must wait
    assert [r[0] for r in within_limits(rows, 1, {"a": (1, 2)})[0]] == [1, 4]
    # a runs nothing: job 1 (limit 3) starts; job 2 (limit 1) may not join it, job 3 may
    assert [r[0] for r in within_limits(rows, 1, {"a": (0, None)})[0]] == [1, 3, 4]
    # job 2 (limit 1) first: it runs alone, and job 3 may not join it
    assert [r[0] for r in within_limits(rows[1:], 1, {})[0]] == [2, 4]


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from(["a", "b", "c", None]), st.integers(1, 3)),
        st.tuples(st.just("claim"), st.integers(1, 6), st.booleans()),
        st.tuples(st.just("complete"), st.integers(0, 20)),
        st.tuples(st.just("advance"), st.sampled_from([1, 10, 31])),
    ),
    max_size=40,
)


@pytest.mark.sqlite_only
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
def test_no_key_ever_runs_more_live_jobs_than_its_limit(make_queue, clock, actions):
    """Random enqueues, claims (single and batch), completions and clock steps: after every
    step no key holds more live leases than the smallest limit its running jobs carry, and
    every ready job left behind is one whose key is full for it."""
    q = make_queue()
    q.db.execute("DELETE FROM jobs")
    held: list = []
    for action in actions:
        if action[0] == "enqueue":
            _, key, limit = action
            q.enqueue("sync", {}, **({"concurrency_key": key, "concurrency_limit": limit} if key else {}))
        elif action[0] == "claim":
            _, limit, batch = action
            held += q.claim_batch("w", limit) if batch else q.claim("w", limit=limit)
        elif action[0] == "complete" and held:
            q.complete(held.pop(action[1] % len(held)))
        elif action[0] == "advance":
            clock.advance(action[1])
        now = clock()
        live = [r for r in q.jobs(state="running") if r.visible_at > now and r.concurrency_key]
        for key, n in Counter(r.concurrency_key for r in live).items():
            assert n <= min(r.concurrency_limit for r in live if r.concurrency_key == key), (key, live)
    if not q.claim("w", limit=1000):  # whatever is still ready waits on a full key
        now = clock()
        running = [r for r in q.jobs(state="running") if r.visible_at > now and r.concurrency_key]
        live = Counter(r.concurrency_key for r in running)
        for r in q.jobs(state="queued"):
            if r.visible_at <= now:
                limits = [j.concurrency_limit for j in running if j.concurrency_key == r.concurrency_key]
                assert r.concurrency_key is not None
                assert live[r.concurrency_key] >= min([r.concurrency_limit, *limits])


# -- what an operator sees ----------------------------------------------------------------


def test_the_jobs_held_back_by_a_full_key_are_counted_per_key(make_queue):
    q = make_queue()
    for n in range(4):
        q.enqueue("sync", {"n": n}, concurrency_key="a", concurrency_limit=1)
    for n in range(2):
        q.enqueue("sync", {"n": n}, concurrency_key="b", concurrency_limit=2)
    q.enqueue("plain", {})
    assert q.waiting_on_keys() == {}  # nothing runs yet: every key has room
    assert len(q.claim("w", limit=10)) == 4  # a once, b twice, the plain job
    assert q.waiting_on_keys() == {"a": 3}
    assert [r.id for r in q.jobs(concurrency_key="b")] == [5, 6]
    assert [r.id for r in q.latest_jobs(concurrency_key="a", state="queued")] == [4, 3, 2]


@pytest.mark.sqlite_only
def test_stats_metrics_and_jobs_name_the_keys_at_their_limit(tmp_path, capsys):
    from labqueue import cli

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        for n in range(7):
            q.enqueue("sync", {"n": n}, concurrency_key=f"customer:{n % 2}", concurrency_limit=1)
        q.claim("w", limit=10)
    assert cli.main(["stats", str(path)]) == 0
    said = capsys.readouterr().out
    assert "waiting on a full concurrency key: 5 (customer:0 3, customer:1 2)" in said
    assert cli.main(["stats", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["waiting_on_keys"] == {"customer:0": 3, "customer:1": 2}
    assert cli.main(["stats", str(path), "--format", "prometheus"]) == 0
    scrape = capsys.readouterr().out
    assert "labqueue_jobs_waiting_on_key 5\n" in scrape and "labqueue_keys_at_limit 2\n" in scrape
    assert cli.main(["jobs", str(path), "--key", "customer:1", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [j["id"] for j in listed] == [6, 4, 2] and {j["concurrency_limit"] for j in listed} == {1}
    with pytest.raises(SystemExit) as usage:
        cli.main(["jobs", str(path), "--key", ""])
    assert usage.value.code == 2 and "a concurrency key cannot be empty" in capsys.readouterr().err


def test_a_postgresql_queue_of_version_4_gains_the_key_columns(pg_url):
    import uuid

    from labqueue.postgres import PgJobQueue, drop_schema

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with PgJobQueue(pg_url, schema=schema) as q:
            q.enqueue("old", {})
            q.db.execute("ALTER TABLE jobs DROP COLUMN concurrency_key, DROP COLUMN concurrency_limit")
            q.db.commit()
        with PgJobQueue(pg_url, schema=schema) as q:
            assert q.claim_next("w").kind == "old"
            q.enqueue("new", {}, concurrency_key="k", concurrency_limit=1)
            assert q.job(2).concurrency_key == "k"
            found = q.db.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'jobs_key_held'").fetchall()
            assert found
    finally:
        drop_schema(pg_url, schema)


@pytest.mark.parametrize("queues", [["mail"], ["mail", "texts"], ["default"], ["default", "mail"]])
def test_every_claim_scope_keeps_to_the_limit(make_queue, queues):
    q = make_queue()
    for queue in ("default", "mail", "texts"):
        for n in range(4):
            q.enqueue("sync", {"n": n}, queue=queue, concurrency_key="shared", concurrency_limit=2)
        q.enqueue("plain", {}, queue=queue)
    taken = q.claim("w", limit=20, queues=queues) + q.claim_batch("w", 20, queues=queues)
    assert keys_of(q, taken) == {"shared": 2, None: len(queues)}
    assert q.claim_next("w", queues=queues) is None


def test_a_paused_queue_keeps_its_jobs_and_the_key_counts_across_queues(make_queue):
    q = make_queue()
    q.enqueue("sync", {}, queue="mail", concurrency_key="acct", concurrency_limit=1)
    q.enqueue("sync", {}, queue="texts", concurrency_key="acct", concurrency_limit=1)
    q.pause("mail")
    assert q.claim_next("w").id == 2  # mail is paused; texts' job takes the key's one place
    q.resume("mail")
    assert q.claim_next("w") is None  # mail's job waits on the key, though its queue is back
