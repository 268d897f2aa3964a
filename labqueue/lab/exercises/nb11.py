"""Notebook 11's exercise: write a fake-clock test for the heartbeat, and prove it can fail.

``check_heartbeat_test`` runs your test function twice, in this kernel (no pytest needed):
once against your ``JobQueue`` (the tutorial's queue, as your cells made it) and once
against ``FrozenLeaseQueue``, the same queue whose ``heartbeat()`` checks the token and
answers True, yet never moves the deadline. A test worth keeping passes on the first and
fails on the second.
"""

from __future__ import annotations

import inspect
import tempfile
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...clock import FakeClock
from ...tutorial.jobqueue import JobQueue
from . import Verdict, not_yet, passed, starting_points

STILL_RUNNING = "SELECT 1 FROM jobs WHERE id = ? AND lease_token = ? AND state = 'running'"


def _frozen_heartbeat(self: Any, job: Any) -> bool:
    return self.db.execute(STILL_RUNNING, (job.id, job.lease_token)).fetchone() is not None


def frozen_lease_queue(queue_class: type) -> type:
    """`queue_class` broken on purpose: heartbeat() says yes to the lease holder but leaves
    visible_at where the claim put it, so the lease ends on time however often the worker beats."""
    return type("FrozenLeaseQueue", (queue_class,), {"heartbeat": _frozen_heartbeat})


FrozenLeaseQueue = frozen_lease_queue(JobQueue)


def _with_queue(test: Callable[..., Any], queue_class: type) -> Callable[..., Any]:
    """The same test function, reading `JobQueue` as `queue_class` (its other globals unchanged)."""
    names = {**test.__globals__, "JobQueue": queue_class}
    return types.FunctionType(test.__code__, names, test.__name__, test.__defaults__, test.__closure__)


def _run(test: Callable[..., Any], queue_class: type) -> str | None:
    """None when the test passed, else the line that says why it failed."""
    with tempfile.TemporaryDirectory(prefix="nb11_") as scratch:
        try:
            _with_queue(test, queue_class)(Path(scratch))
        except Exception as exc:  # an assert or any other error: the test failed
            where = traceback.extract_tb(exc.__traceback__)[-1]
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return f"{said} (at: {where.line})"
    return None


def check_heartbeat_test(test: object, queue_class: type | None = None) -> Verdict:
    """`test` is a function of one argument, `tmp_path` (a fresh folder), that builds its
    own JobQueue and FakeClock. Passes when it passes on `queue_class` (your JobQueue; the
    tutorial's by default) and fails on the same queue with a frozen heartbeat."""
    queue_class = JobQueue if queue_class is None else queue_class
    if not callable(test) or not hasattr(test, "__code__"):
        return not_yet(f"pass your test function itself (no brackets), got {test!r}")
    params = list(inspect.signature(test).parameters)
    if params != ["tmp_path"]:
        return not_yet(f"the test must take exactly one argument, tmp_path; yours takes {params}")
    if "JobQueue" not in test.__code__.co_names:
        return not_yet(
            "the test must build its own queue with JobQueue(...), so it can be run against a broken one"
        )
    real = _run(test, queue_class)
    if real is not None:
        return not_yet(f"your test fails on your queue, so it asserts something untrue: {real}")
    broken = _run(test, frozen_lease_queue(queue_class))
    if broken is None:
        return not_yet(
            "your test passes on your queue, and also on FrozenLeaseQueue, whose heartbeat never moves "
            "the deadline: it does not check what a heartbeat is for. After the beat, move the clock past "
            "the "
            "old deadline and ask whether another worker can take the job."
        )
    return passed(f"it passes on your queue and catches the broken one: {broken}")


def _starter(tmp_path):
    clock = FakeClock(0.0)
    q = JobQueue(tmp_path / "jobs.db", lease_seconds=30, clock=clock)
    q.enqueue("report", {})
    (job,) = q.claim("worker-a")
    clock.advance(20)
    assert q.heartbeat(job) is True
    # your asserts: can worker-b take the job at t = 40? and after the new deadline?
    q.db.close()


def _answer(tmp_path):
    clock = FakeClock(0.0)
    q = JobQueue(tmp_path / "jobs.db", lease_seconds=30, clock=clock)
    q.enqueue("report", {})
    (job,) = q.claim("worker-a")
    clock.advance(20)
    assert q.heartbeat(job) is True  # t = 20: the lease now ends at 50, not 30
    clock.advance(20)
    assert q.claim("worker-b") == []  # t = 40: past the old deadline, still held
    clock.advance(10)
    assert len(q.claim("worker-b")) == 1  # t = 50: the new deadline, the job is free
    q.db.close()


def _untrue(tmp_path):
    clock = FakeClock(0.0)
    q = JobQueue(tmp_path / "jobs.db", lease_seconds=30, clock=clock)
    q.enqueue("report", {})
    (job,) = q.claim("worker-a")
    clock.advance(20)
    assert q.heartbeat(job) is True
    clock.advance(20)
    assert len(q.claim("worker-b")) == 1  # wrong: the heartbeat moved the deadline to 50
    q.db.close()


def _only_the_answer(tmp_path):
    clock = FakeClock(0.0)
    q = JobQueue(tmp_path / "jobs.db", lease_seconds=30, clock=clock)
    q.enqueue("report", {})
    (job,) = q.claim("worker-a")
    for _ in range(3):
        clock.advance(20)
        assert q.heartbeat(job) is True  # the broken queue says True too
    q.db.close()


# The answer, as the notebook folds it: a test function a learner can paste.
ANSWER_SOURCE = inspect.getsource(_answer).replace("def _answer(", "def test_a_heartbeat_moves_the_deadline(")

CHECKERS = {"heartbeat_test": check_heartbeat_test}
STARTERS = {"heartbeat_test": {"test": _starter}}
ANSWERS = {"heartbeat_test": {"test": _answer}}
WRONG = {"heartbeat_test": [{"test": _untrue}, {"test": _only_the_answer}]}

starting_points(__name__)
