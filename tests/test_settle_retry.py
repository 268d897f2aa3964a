"""A settle whose reply is lost (its COMMIT reached the server, the connection then broke)
is repeated by the worker's Reconnector. The repeat must recognise what the first try did:
the batch it claimed under the worker's own claim token comes back (not stranded until its
leases end), and the jobs it completed are "done" (not logged as lost). Both backends: on
PostgreSQL the one-call settle function, on SQLite the transaction path, each made to lose
the first reply after committing."""

from __future__ import annotations

import logging

import pytest

from labqueue.errors import ConnectionLost
from labqueue.reconnect import Reconnector
from labqueue.worker import StopFlag, work_batch


def lose_first_reply(q, monkeypatch) -> list[int]:
    """After the first settle commits, raise ConnectionLost in its place."""
    lost: list[int] = []
    one_call = getattr(q._d, "settle_in_one_call", None)
    if one_call is not None and q._d.one_call:

        def committed_then_lost(*args, **kwargs):
            result = one_call(*args, **kwargs)
            if not lost:
                lost.append(1)
                raise ConnectionLost("server closed the connection unexpectedly")
            return result

        monkeypatch.setattr(q._d, "settle_in_one_call", committed_then_lost)
    else:
        claimed_jobs = q._claimed_jobs

        def after_commit(rows, claim):
            if not lost and claim is not None:
                lost.append(1)
                raise ConnectionLost("server closed the connection unexpectedly")
            return claimed_jobs(rows, claim)

        monkeypatch.setattr(q, "_claimed_jobs", after_commit)
    return lost


def test_a_settle_repeated_after_a_lost_reply_finds_its_own_claim(make_queue, monkeypatch, caplog):
    q = make_queue()
    q.enqueue_many("k", [{"n": n} for n in range(6)])
    first = q.claim_batch("w1", 3)
    lost = lose_first_reply(q, monkeypatch)
    call = Reconnector(q, name="w1", sleep=lambda s: None).call
    with caplog.at_level(logging.WARNING, logger="labqueue.worker"):
        ran, nxt = work_batch(
            q,
            first,
            {"k": lambda job, queue: None},
            claim_for=lambda ran: ("w1", 3),
            stop=StopFlag(),
            call=call,
            worker="w1",
        )
    assert lost == [1]  # the first reply was lost, and the call repeated
    assert ran == 3 and {q.job(job.id).state for job in first} == {"done"}
    assert sorted(job.id for job in nxt) == [4, 5, 6]  # the first try's claim, handed back
    assert {q.job(job.id).lease_token for job in nxt} == {nxt[0].lease_token}
    assert q.claim_batch("w2", 10) == []  # nothing else was claimed, nothing is stranded
    assert not [r for r in caplog.records if "lease was lost" in r.getMessage()]  # none logged as lost


def test_a_repeated_settle_whose_first_try_never_committed_settles_as_usual(make_queue):
    q = make_queue()
    q.enqueue_many("k", [{}] * 4)
    batch = q.claim_batch("w1", 2)
    from labqueue.core import Finished

    outcomes, nxt = q.settle(
        [Finished(job) for job in batch], claim_for="w1", limit=2, claim_token="t" * 32, again="w1"
    )
    assert outcomes == ["done", "done"] and [job.id for job in nxt] == [3, 4]


@pytest.mark.parametrize("bad", ["", "a\x00b", 5])
def test_a_bad_claim_token_is_refused_naming_it(make_queue, bad):
    from labqueue.errors import InvalidArgument

    q = make_queue()
    q.enqueue("k", {})
    with pytest.raises(InvalidArgument, match="claim_token"):
        q.settle([], claim_for="w1", limit=1, claim_token=bad)
