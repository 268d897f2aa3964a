"""Notebook 13's harness: the lease walk on both queues, and drains by one worker of each."""

from __future__ import annotations

import pytest

from labqueue.errors import InvalidArgument
from labqueue.lab import bridge
from labqueue.tutorial.workspace import Workspace


def test_the_walk_gives_the_same_answers_on_both_queues(tmp_path):
    walk = bridge.walk_both(folder=tmp_path)
    frame = bridge.walk_frame(walk)
    assert list(frame.columns) == list(bridge.QUEUES)
    assert frame.loc["worker-a's late complete()"].tolist() == [False, False]
    assert frame.loc["attempts after the reclaim"].tolist() == [2, 2]
    assert (frame["your queue"] == frame["labqueue"]).all()


def test_each_drain_finishes_every_job_and_the_order_alternates(tmp_path):
    drains = bridge.drain_both(n_jobs=50, rounds=2, folder=tmp_path, progress=False)
    assert [(d.round, d.queue) for d in drains] == [
        (1, "your queue"), (1, "labqueue"), (2, "labqueue"), (2, "your queue")
    ]
    assert all(d.jobs == 50 and d.seconds > 0 for d in drains)
    assert set(bridge.median_rates(drains)) == set(bridge.QUEUES)
    assert bridge.drains_frame(drains).shape[0] == 4
    assert bridge.plot_drains(drains).axes[0].get_ylabel() == "jobs per second"


def test_a_drain_runs_the_learners_worker(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ws.save("# worker.py\ndef run(path, worker_id, lease_seconds, idle_exit=2.0, poll=0.05):\n    return\n")
    with pytest.raises(RuntimeError, match="your queue: 0 of 20 jobs done"):
        bridge.drain_both(n_jobs=20, rounds=1, folder=tmp_path, code=ws.folder, progress=False)


@pytest.mark.parametrize("kwargs", [{"n_jobs": 1}, {"n_jobs": True}, {"rounds": 0}, {"n_jobs": 10**6}])
def test_sizes_are_bounded(kwargs):
    with pytest.raises(InvalidArgument):
        bridge.drain_both(**kwargs)
