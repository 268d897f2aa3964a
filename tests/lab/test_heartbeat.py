"""The heartbeat lab: two real worker threads, a KeepAlive, and a lease lost mid-work."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import heartbeat
from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue
from labqueue.tutorial.keepalive import KeepAlive

LEASE, WORK = 0.3, 0.9  # a job three leases long, as in the notebook but shorter


def test_without_a_heartbeat_the_second_worker_runs_the_job_again(tmp_path):
    run = heartbeat.scenario(False, lease=LEASE, work=WORK, second_worker_delay=0.05, folder=tmp_path)
    assert run.runs == ["w1 attempt 1", "w2 attempt 2"]
    assert run.completes == {"w1": False, "w2": True}
    assert [e.worker for e in run.claims_by("w2")] == ["w2"]
    assert run.deadline, "the sampler recorded the lease deadline"
    assert heartbeat.describe(run)[0] == "handler ran 2 time(s): w1 attempt 1, w2 attempt 2"


def test_with_keepalive_the_job_runs_once_and_the_deadline_moves(tmp_path):
    run = heartbeat.scenario(True, lease=LEASE, work=WORK, second_worker_delay=0.05, folder=tmp_path)
    assert run.runs == ["w1 attempt 1"]
    assert run.completes == {"w1": True}
    assert run.beats >= 1
    assert not run.claims_by("w2") and run.empty_polls["w2"], "w2 asked and got nothing"
    deadlines = sorted({round(d, 3) for _, d, _ in run.deadline})
    assert len(deadlines) >= 2, "each heartbeat pushed the stored deadline forward"


def test_a_lost_lease_is_noticed(tmp_path):
    run = heartbeat.lost_lease(lease=LEASE, interval=0.05, takeover_after=0.1, folder=tmp_path)
    assert run.lost is True
    assert run.runs == ["w1 attempt 1", "w2 attempt 2"]
    assert run.completes == {"w2": True}
    assert "lost=True" in heartbeat.describe(run)[0]


def test_a_heartbeat_without_the_fence_never_notices_and_moves_the_new_lease(tmp_path):
    class Unfenced(TutorialQueue):
        def heartbeat(self, job):  # the token condition left out
            cur = self.db.execute(
                "UPDATE jobs SET visible_at = ? WHERE id = ? AND state = 'running'",
                (self.clock() + self.lease_seconds, job.id),
            )
            return cur.rowcount == 1

    class UnfencedKeepAlive(KeepAlive):
        def _beat(self):  # KeepAlive's loop, on the unfenced queue
            q = Unfenced(self.path, lease_seconds=self.lease_seconds, schema=None)
            while not self._stop.wait(self.interval) and q.heartbeat(self.job):
                self.beats += 1
            q.db.close()

    run = heartbeat.lost_lease(
        lease=LEASE,
        interval=0.05,
        takeover_after=0.1,
        folder=tmp_path,
        queue_class=Unfenced,
        keepalive_class=UnfencedKeepAlive,
    )
    assert run.lost is False and run.extended is True


def test_table_and_plot(tmp_path):
    runs = [heartbeat.scenario(True, lease=0.5, work=0.1, second_worker_delay=0.0, folder=tmp_path)]
    table = heartbeat.summary_table(runs)
    assert table.loc["keepalive", "handler runs"] == 1
    ax = heartbeat.plot_timeline(runs).axes[0]
    assert ax.get_xlabel() == "time since w1 claimed (s)" and ax.get_ylabel() == "lease deadline (s)"


@pytest.mark.parametrize(
    "kwargs", [{"lease": 0}, {"lease": "1"}, {"work": -1}, {"work": True}, {"interval": 5.0, "lease": 1.0}]
)
def test_bad_input_is_named(tmp_path, kwargs):
    with pytest.raises(InvalidArgument, match=r"lease|work|interval"):
        heartbeat.scenario(True, folder=tmp_path, **kwargs)


def test_panel_shows_something_at_once_and_runs_on_click(tmp_path):
    panel = heartbeat.heartbeat_panel(folder=tmp_path)
    (lease, work, button), status, table, picture = panel.children[0].children, *panel.children[1:]
    assert "press the button" in status.value and table.value == ""
    lease.value, work.value = 0.5, 0.2
    button.click()
    assert "lease 0.5 s, work 0.2 s" in status.value
    assert "no_heartbeat" in table.value and "keepalive" in table.value
    assert picture.value and not button.disabled


def test_panel_says_interrupted_when_the_kernel_is_interrupted(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(heartbeat, "run_pair", interrupted)
    panel = heartbeat.heartbeat_panel(folder=tmp_path)
    (_lease, _work, button), status = panel.children[0].children, panel.children[1]
    button.click()
    assert "interrupted" in status.value and "running" not in status.value
    assert not button.disabled
