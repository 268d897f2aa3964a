"""Bad rows and payloads: a bad row never crashes a worker or strands other jobs, and
enqueue refuses any payload it could not read back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from labqueue import JobQueue, PayloadNotSerializable, kill_tree, start_worker
from labqueue import worker as worker_loop
from labqueue.core import Finished
from labqueue.queue import MAX_PAYLOAD_DEPTH


@pytest.fixture
def q(tmp_path, clock):
    """A queue on SQLite: these cases are about what SQLite files can hold."""
    with JobQueue(tmp_path / "jobs.db", clock=clock, rng=lambda: 1.0) as queue:
        yield queue


DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON that Python's decoder cannot recurse through

# What another producer might have stored, as an SQL expression, and the reason a
# claim gives for dead-lettering it.
BAD_ROWS = {
    "invalid JSON": ("'{not json'", "its payload is not valid JSON (Expecting property name"),
    "empty text": ("''", "its payload is not valid JSON (Expecting value"),
    "too deep to decode": (f"'{DEEP}'", "its payload is JSON nested too deeply for Python to decode"),
    "a BLOB of JSON": ("CAST('{\"a\": 1}' AS BLOB)", "its payload is stored as a BLOB (8 bytes), not JSON"),
    "a BLOB of junk": ("x'00ff10'", "its payload is stored as a BLOB (3 bytes), not JSON text"),
    "text that is not UTF-8": ("CAST(x'7b22ff227d' AS TEXT)", "its payload is stored as text that is not"),
    "an integer too long": ("'" + "9" * 5000 + "'", "its payload is not valid JSON (Exceeds the limit"),
}


def plant(path: Path, payload_sql: str, *, kind_sql: str = "'t'") -> None:
    """Write a row as another producer might, behind the queue's back."""
    db = sqlite3.connect(path)
    db.execute(
        f"INSERT INTO jobs (kind, payload, visible_at, created_at) VALUES ({kind_sql}, {payload_sql}, 0, 0)"
    )
    db.commit()
    db.close()


def row(q: JobQueue, job_id: int) -> sqlite3.Row:
    query = "SELECT state, attempts, lease_token, last_error FROM jobs WHERE id = ?"
    return q.db.execute(query, (job_id,)).fetchone()


def assert_buried(q: JobQueue, job_id: int, reason: str) -> None:
    found = row(q, job_id)
    assert (found["state"], found["attempts"], found["lease_token"]) == ("dead", 1, None)
    assert found["last_error"].startswith(f"unreadable job, not run: {reason}"), found["last_error"]
    assert len(found["last_error"]) <= 500


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_batch_claim_dead_letters_the_bad_row_and_returns_the_rest(q, case):
    payload_sql, reason = BAD_ROWS[case]
    q.enqueue("t", {"n": 1})
    plant(q.path, payload_sql)
    q.enqueue("t", {"n": 3})
    jobs = q.claim("w", limit=10)
    assert [(job.id, job.payload) for job in jobs] == [(1, {"n": 1}), (3, {"n": 3})]
    assert_buried(q, 2, reason)
    assert q.claim("w", limit=10) == []  # and it stays out of every later claim


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_claim_next_skips_past_a_bad_row_to_the_next_job(q, case):
    payload_sql, reason = BAD_ROWS[case]
    plant(q.path, payload_sql)
    q.enqueue("t", {"n": 2})
    job = q.claim_next("w")
    assert job is not None and (job.id, job.payload) == (2, {"n": 2})
    assert_buried(q, 1, reason)


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_complete_and_claim_commits_the_completion_and_claims_past_a_bad_row(q, case):
    payload_sql, reason = BAD_ROWS[case]
    q.enqueue("t", {"n": 1})
    plant(q.path, payload_sql)
    q.enqueue("t", {"n": 3})
    first = q.claim_next("w")
    accepted, following = q.complete_and_claim(first, "w")
    assert accepted and following is not None and following.id == 3
    assert row(q, 1)["state"] == "done"
    assert_buried(q, 2, reason)


def test_a_kind_that_is_not_text_is_dead_lettered(q):
    plant(q.path, "'{}'", kind_sql="x'01'")
    q.enqueue("t", {})
    assert [job.id for job in q.claim("w", limit=5)] == [2]
    assert_buried(q, 1, "its kind is stored as bytes b'\\x01', not text")


def test_a_kind_that_is_not_utf8_is_dead_lettered(q):
    plant(q.path, "'{}'", kind_sql="CAST(x'ff' AS TEXT)")
    q.enqueue("t", {})
    assert [job.id for job in q.claim("w", limit=5)] == [2]
    assert_buried(q, 1, "its kind is stored as text that is not valid UTF-8")


def test_a_worker_runs_the_good_jobs_and_buries_the_bad_ones(tmp_path):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("t", {"n": 0})
    for payload_sql, _ in BAD_ROWS.values():
        plant(path, payload_sql)
    with JobQueue(path) as q:
        q.enqueue("t", {"n": 99})
    ran = []
    handled = worker_loop.run(
        str(path), "w", 30, idle_exit=0, handlers={"t": lambda job, q: ran.append(job.payload["n"])}
    )
    assert (handled, ran) == (2, [0, 99])
    with JobQueue(path) as q:
        assert q.counts() == {"queued": 0, "running": 0, "done": 2, "dead": len(BAD_ROWS), "cancelled": 0}


def test_a_worker_process_survives_bad_rows(tmp_path):
    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    for payload_sql, _ in BAD_ROWS.values():
        plant(path, payload_sql)
    proc = start_worker(path, "w1", 30, idle_exit=0.2, handlers=("labqueue.lab.demo_handlers",))
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        kill_tree(proc)
    with JobQueue(path) as q:
        errors = [r.last_error for r in q.jobs()]
    assert len(errors) == len(BAD_ROWS)
    assert all(e.startswith("unreadable job, not run: ") for e in errors), errors


# -- enqueue refuses what it could not read back -----------------------------------------


def nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


def count(q: JobQueue) -> int:
    return q.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def test_nesting_up_to_the_documented_depth_goes_in_and_comes_back(q):
    payload = {"deep": nested(MAX_PAYLOAD_DEPTH - 1)}
    q.enqueue("t", payload)
    assert q.claim("w")[0].payload == payload


@pytest.mark.parametrize("depth", [MAX_PAYLOAD_DEPTH + 1, 5_000, 200_000])
def test_nesting_past_the_documented_depth_is_refused(q, depth):
    with pytest.raises(PayloadNotSerializable, match=f"deeper than MAX_PAYLOAD_DEPTH = {MAX_PAYLOAD_DEPTH}"):
        q.enqueue("t", nested(depth))
    assert count(q) == 0


def test_a_dict_nested_too_deep_inside_a_batch_is_refused_with_its_index(q):
    with pytest.raises(PayloadNotSerializable, match=r"payload #1: .*MAX_PAYLOAD_DEPTH"):
        q.enqueue_many("t", [{}, {"a": nested(MAX_PAYLOAD_DEPTH + 5)}])
    assert count(q) == 0


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({1: "a", "1": "b"}, r"payload has the int key 1: .* come back as '1' and collide with the key '1'"),
        ({1: "a"}, r"payload has the int key 1: JSON stores every key as a string, so .* as '1'"),
        ({True: 1, "true": 2}, r"bool key True: .* 'true' and collide"),
        ({None: 1}, r"NoneType key None: .* 'null'"),
        ({1.5: 0}, r"float key 1\.5: .* '1\.5'"),
        ({"outer": [{"x": {2: 0}}]}, r"payload\['outer'\]\[0\]\['x'\] has the int key 2"),
    ],
)
def test_dict_keys_that_json_would_change_are_refused(q, payload, message):
    with pytest.raises(PayloadNotSerializable, match=message):
        q.enqueue("t", payload)
    with pytest.raises(PayloadNotSerializable, match=r"payload #0: "):
        q.enqueue_many("t", [payload])
    assert count(q) == 0


def test_tuples_are_accepted_and_come_back_as_lists(q):
    q.enqueue("t", {"pair": (1, 2), "nested": [(3, {"k": (4,)})]})
    assert q.claim("w")[0].payload == {"pair": [1, 2], "nested": [[3, {"k": [4]}]]}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinities_are_still_refused(q, value):
    with pytest.raises(PayloadNotSerializable, match="Out of range float"):
        q.enqueue("t", {"x": [value]})
    assert count(q) == 0


def test_a_payload_that_contains_itself_is_refused(q):
    loop: list = []
    loop.append(loop)
    with pytest.raises(PayloadNotSerializable, match="Circular reference"):
        q.enqueue("t", loop)


def test_rows_read_back_show_text_that_is_not_utf8_as_escapes(q):
    plant(q.path, "CAST(x'7b22ff227d' AS TEXT)")
    assert q.job(1).payload == '{"\\xff"}'
    assert [r.payload for r in q.jobs()] == ['{"\\xff"}']


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_settle_commits_the_batch_and_claims_the_next_past_a_bad_row(q, case):
    """settle() turns the claimed rows into jobs after its COMMIT; a row it cannot read is
    dead-lettered then, in a transaction of its own, and the rest of the batch comes back."""
    payload_sql, reason = BAD_ROWS[case]
    first = q.enqueue("t", {"n": 0})
    (job,) = q.claim_batch("w", 1)
    q.enqueue("t", {"n": 1})
    plant(q.path, payload_sql)
    q.enqueue("t", {"n": 3})
    outcomes, following = q.settle([Finished(job)], claim_for="w", limit=10)
    assert outcomes == ["done"] and row(q, first)["state"] == "done"
    assert [(j.id, j.payload) for j in following] == [(2, {"n": 1}), (4, {"n": 3})]
    assert_buried(q, 3, reason)


@pytest.mark.parametrize(
    "text",
    ['{"n": 1}', ' {"n": 1}\n', "[1, 2.5, null, true]", '"text"', "NaN", "-0", '{"a": {"b": []}}', "\t7 "],
)
def test_payloads_decode_as_json_loads_decodes_them(text):
    import json

    from labqueue.core import decode_payload

    expected, got = json.loads(text), decode_payload(text)
    assert got == expected or (got != got and expected != expected)  # NaN is not equal to itself
    assert type(got) is type(expected)


@pytest.mark.parametrize("text", ["", " ", '{"n": 1} x', '{"n": 1}{}', "\ufeff{}", "{not json", '{"a": }'])
def test_payloads_json_loads_refuses_are_refused_alike(text):
    import json

    from labqueue.core import decode_payload

    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        decode_payload(text)
    assert str(got.value) == str(expected.value)
