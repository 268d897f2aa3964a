import time

import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.lab import crash
from labqueue.tutorial.sections import package_text, split
from labqueue.tutorial.workspace import Workspace


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def made_up_run():
    run = crash.CrashRun(lease=2.0, started=0.0)
    run.observations = [
        crash.Observation(0.0, "queued", 0, None),
        crash.Observation(0.2, "running", 1, "w1"),
        crash.Observation(2.2, "running", 2, "w2"),
        crash.Observation(2.4, "done", 2, "w2"),
    ]
    run.killed_at, run.second_started_at, run.claims, run.done_at = 0.25, 0.3, [0.18, 2.19], 2.4
    return run


def test_job_spans_follow_the_observations():
    spans = crash.job_spans(made_up_run(), end=3.0)
    assert [label for _, _, label in spans] == ["queued", "w1", "w2", "done"]
    assert spans[1][:2] == (0.2, 2.2) and spans[-1][1] == 3.0


def test_gap_and_plot_from_a_made_up_run():
    run = made_up_run()
    assert run.gap == pytest.approx(2.01)
    assert list(run.events()["t (s)"]) == [0.18, 0.25, 0.3, 2.19, 2.4]
    fig = crash.plot_crash(run)
    assert fig.axes[0].get_xlabel() == "time since the start (s)"
    plt.close(fig)


def test_bad_lease_is_named(tmp_path):
    with pytest.raises(InvalidArgument, match="got 0"):
        crash.crash_recovery(lease=0, folder=tmp_path)
    with pytest.raises(InvalidArgument, match="'long'"):
        crash.CrashLab(tmp_path, lease="long")


@pytest.mark.slow
def test_killed_worker_job_is_taken_over_after_one_lease(tmp_path):
    run = crash.crash_recovery(lease=0.5, folder=tmp_path)
    assert [(o.state, o.attempts, o.worker) for o in run.observations] == [
        ("queued", 0, None),
        ("running", 1, "w1"),
        ("running", 2, "w2"),
        ("done", 2, "w2"),
    ]
    assert len(run.killed_pids) == 1
    assert run.finished and run.gap >= 0.5  # the job waited at least one whole lease
    assert run.claims[0] <= run.killed_at <= run.claims[1] <= run.done_at
    assert 0.3 < run.first_lease <= 0.5
    lines = run.lines()
    assert lines[0] == "lease is 0.5 seconds; attempt 1 will hang inside the handler"
    assert [line.split("  ", 1)[1] for line in lines[1:]] == [
        "state=queued   attempts=0 worker=None",
        "state=running  attempts=1 worker=w1",
        "killing w1 while it is inside the handler",
        "state=running  attempts=2 worker=w2",
        "state=done     attempts=2 worker=w2",
    ]


@pytest.mark.slow
def test_the_workers_run_the_learners_worker_loop(tmp_path):
    """A worker loop that forgets to pass its lease on leases for the default 30 s: w2
    never gets the job, and the run ends and says so instead of raising."""
    ws = Workspace(tmp_path / "ws", "notebooks/03_crash_recovery.ipynb")
    (loop,) = [s.body for s in split(package_text("worker"))[1]]
    forgetful = loop.replace("JobQueue(path, lease_seconds=lease_seconds)", "JobQueue(path)")
    assert forgetful != loop
    ws.save("# worker.py\n" + forgetful)
    run = crash.crash_recovery(lease=0.5, folder=tmp_path, timeout=1.0, code=ws.folder)
    assert not run.finished and run.done_at is None and len(run.claims) == 1
    assert run.first_lease > 29  # the learner's worker leased the job for 30 s
    assert run.lines()[-1] == "w2 did not finish the job: the run gave up after 1.5 s"
    with pytest.raises(ValueError, match="never claimed"):
        _ = run.gap
    fig = crash.plot_crash(run)
    assert fig.axes[0].get_title() == "w2 did not get the job in 1.5 s"
    plt.close(fig)


def test_a_worker_that_cannot_start_is_reported_with_what_it_said(tmp_path):
    ws = Workspace(tmp_path / "ws", "notebooks/03_crash_recovery.ipynb")
    ws.path("worker").write_text("raise RuntimeError('my worker is broken')\n", encoding="utf-8")
    with pytest.raises(TimeoutError, match="my worker is broken"):
        crash.crash_recovery(lease=0.5, folder=tmp_path, timeout=3.0, code=ws.folder)


@pytest.mark.slow
def test_panel_start_kill_start_and_watch(tmp_path):
    panel = crash.CrashPanel(crash.CrashLab(tmp_path, lease=0.5), interval=0.05)
    lab = panel.lab
    try:
        assert "queued" in panel.view.value and "none yet" in panel.view.value  # visible at once
        panel.watch.value = True  # the background thread now refreshes the view
        panel.buttons["start a worker"].click()
        wait_for(lambda: ">running<" in panel.view.value)  # the watcher saw w1 claim the job
        panel.buttons["kill newest worker"].click()
        assert "w1 killed" in panel.view.value
        panel.buttons["start a worker"].click()
        wait_for(lambda: lab.row()["state"] == "done")
        wait_for(lambda: ">done<" in panel.view.value)  # the watcher saw it without a click
        assert lab.row()["attempts"] == 2 and lab.row()["worker"] == "w2"
        panel.watch.value = False
        panel._thread.join(timeout=5)
        assert not panel._thread.is_alive()
        panel.lease.value = 1.0
        panel.buttons["new job"].click()
        assert lab.lease == 1.0 and lab.row()["state"] == "queued" and lab.workers() == []
        assert "no worker is running" in lab.kill()
    finally:
        panel.watch.value = False
        lab.close()


def test_panel_reports_an_interrupted_action_and_stops_its_workers(tmp_path):
    lab = crash.CrashLab(tmp_path)
    panel = crash.CrashPanel(lab)

    def interrupted_action():
        raise KeyboardInterrupt

    panel._do(interrupted_action)  # as a button's callback does, when the kernel is interrupted
    assert "interrupted" in lab.log[-1] and "interrupted" in panel.view.value
    assert all(p.poll() is not None for p in lab.procs.values())
