import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.lab import leases


def test_trace_follows_the_tutorials_walk(tmp_path):
    trace = leases.trace_leases(tmp_path)
    got = [(s.t, s.result, s.state, s.attempts, s.visible_at, s.worker) for s in trace]
    assert got == [
        (1000, "", "queued", 0, 1000, None),
        (1000, "attempt 1", "running", 1, 1030, "worker-a"),
        (1010, "[]", "running", 1, 1030, "worker-a"),
        (1031, "attempt 2", "running", 2, 1061, "worker-b"),
        (1031, "False", "running", 2, 1061, "worker-b"),
        (1031, "True", "done", 2, 1061, "worker-b"),
    ]


def test_state_bands_split_the_lease_where_it_ran_out(tmp_path):
    bands = leases.state_bands(leases.trace_leases(tmp_path), until=1070)
    assert bands == [(1000, 1030, "worker-a"), (1030, 1031, "expired, claimable"), (1031, 1070, "done")]


def test_timeline_plot_is_labelled(tmp_path):
    fig = leases.plot_lease_timeline(leases.trace_leases(tmp_path))
    ax = fig.axes[0]
    assert "fake time (s)" in ax.get_xlabel() and "visible_at" in ax.get_ylabel()
    plt.close(fig)


@pytest.fixture
def playground(tmp_path):
    p = leases.LeasePlayground(tmp_path)
    yield p
    p.close()


def test_playground_late_token_is_refused(playground):
    assert "attempt 1" in playground.claim("worker-a")
    assert "[]" in playground.claim("worker-b")
    playground.advance(29)
    assert "[]" in playground.claim("worker-b")  # t=1029: one second of worker-a's lease is left
    playground.advance(1)
    assert "attempt 2, lease until 1060" in playground.claim("worker-b")  # the deadline has come
    assert playground.complete("worker-a").endswith("False")
    assert playground.complete("worker-b").endswith("True")
    assert playground.row()["state"] == "done"


def test_playground_rejects_bad_input(playground):
    with pytest.raises(InvalidArgument, match="worker-c"):
        playground.claim("worker-c")
    with pytest.raises(InvalidArgument, match="-5"):
        playground.advance(-5)
    assert "holds no claim" in playground.complete("worker-b")


def test_panel_buttons_drive_the_playground(tmp_path):
    panel = leases.LeasePanel(leases.LeasePlayground(tmp_path))
    assert "<table>" in panel.view.value and "queued" in panel.view.value  # visible at once
    panel.buttons["worker-a claims"].click()
    assert "worker-a" in panel.view.value and "running" in panel.view.value
    panel.buttons["+30 s"].click()
    panel.buttons["+1 s"].click()
    assert "t=1031" in panel.view.value and "claimable: <b>yes</b>" in panel.view.value
    panel.buttons["worker-b claims"].click()
    panel.buttons["worker-b completes"].click()
    assert "done" in panel.view.value and "worker-b complete(): True" in panel.view.value
    panel.buttons["reset"].click()
    assert panel.playground.row()["state"] == "queued" and "t=1000" in panel.view.value
    panel.playground.close()


def test_panel_says_interrupted_when_a_step_is_interrupted(tmp_path):
    panel = leases.LeasePanel(leases.LeasePlayground(tmp_path))

    def interrupted():
        raise KeyboardInterrupt

    panel._do(interrupted)
    assert "interrupted" in panel.view.value and "queued" in panel.view.value
    panel.buttons["worker-a claims"].click()
    assert "interrupted" not in panel.view.value
    panel.playground.close()


def test_connection_settings_are_read_back_from_sqlite(tmp_path):
    from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue

    q = TutorialQueue(tmp_path / "q.db", synchronous="FULL")
    try:
        table = leases.connection_settings(q)
    finally:
        q.db.close()
    assert table.loc["isolation_level", "value"] == "None"
    assert table.loc["journal_mode", "value"] == "wal"
    assert table.loc["synchronous", "value"] == "FULL"
    assert table.loc["timeout (s)", "value"] == "30"


def test_the_trace_and_the_playground_run_the_queue_class_they_are_given(tmp_path):
    from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue

    class Unfenced(TutorialQueue):  # a complete() that forgot the token: the late report wins
        def complete(self, job, effect=None):
            self.db.execute("UPDATE jobs SET state = 'done' WHERE id = ?", (job.id,))
            return True

    trace = leases.trace_leases(tmp_path, queue_class=Unfenced)
    assert [s.result for s in trace[-2:]] == ["True", "True"]
    p = leases.LeasePlayground(tmp_path, queue_class=Unfenced)
    try:
        assert isinstance(p.q, Unfenced)
    finally:
        p.close()


def test_a_claim_that_hands_out_nothing_is_traced_not_raised(tmp_path):
    from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue

    class NeverReclaims(TutorialQueue):
        def claim(self, worker, *, limit=1):
            return [] if self.clock() > 1000 else super().claim(worker, limit=limit)

    trace = leases.trace_leases(tmp_path, queue_class=NeverReclaims)
    after_the_lease = [(s.step, s.result) for s in trace[3:]]
    assert after_the_lease == [("worker-b claims", "[]"), ("worker-a completes", "True")]
