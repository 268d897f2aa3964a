import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.lab import walks, zombie


def test_unfenced_late_fail_runs_the_handler_three_times(tmp_path):
    out = zombie.scenario(fenced=False, report="fail", report_at=40, folder=tmp_path)
    assert out.runs == ["worker-a", "worker-b", "worker-c"]
    assert (out.state, out.attempts) == ("done", 3)


def test_fenced_late_fail_is_ignored(tmp_path):
    out = zombie.scenario(fenced=True, report="fail", report_at=40, folder=tmp_path)
    assert out.runs == ["worker-a", "worker-b"]
    assert [(e.worker, e.action, e.accepted) for e in out.events[-2:]] == [
        ("worker-a", "fail", False),
        ("worker-c", "claim (nothing)", False),
    ]
    assert (out.state, out.attempts) == ("done", 2)


def test_unreplaced_late_complete_counts_either_way(tmp_path):
    for fenced in (True, False):
        out = zombie.scenario(fenced=fenced, report="complete", report_at=45, replaced=False, folder=tmp_path)
        assert (out.runs, out.state, out.attempts) == (["worker-a"], "done", 1)


def test_unreplaced_fenced_fail_is_a_real_failure_and_retries(tmp_path):
    out = zombie.scenario(fenced=True, report="fail", report_at=45, replaced=False, folder=tmp_path)
    assert out.runs == ["worker-a", "worker-c"] and out.state == "done"


def test_outcomes_table_only_the_unfenced_late_fail_after_takeover_runs_three_times(tmp_path):
    table = zombie.outcomes_table(folder=tmp_path)
    assert len(table) == 8
    three = table[table["handler runs"] == 3]
    assert three[["worker-b took over", "worker-a's late report", "fence"]].values.tolist() == [
        ["yes", "fail", "off"]
    ]
    fenced_takeovers = table[(table["fence"] == "on") & (table["worker-b took over"] == "yes")]
    assert set(fenced_takeovers["handler runs"]) == {2}
    assert not fenced_takeovers["late report changed the row"].any()
    assert set(table["final state"]) == {"done"}


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(InvalidArgument, match="'retry'"):
        zombie.scenario(report="retry", folder=tmp_path)
    with pytest.raises(InvalidArgument, match="got 20"):
        zombie.scenario(report_at=20, folder=tmp_path)  # before worker-b's takeover at t=31


def test_walks_print_the_tutorials_lines(tmp_path):
    printed = zombie.printed_lines(
        lambda: walks.zombie_unfenced(tmp_path),
        lambda: walks.zombie_fenced(tmp_path),
        lambda: walks.zombie_unreplaced(tmp_path),
    )
    assert printed == zombie.tutorial_lines()
    assert printed[0] == "--- without the fence"


def test_side_by_side_plot_has_two_titled_timelines(tmp_path):
    a = zombie.scenario(fenced=False, folder=tmp_path)
    b = zombie.scenario(fenced=True, folder=tmp_path)
    fig = zombie.plot_side_by_side(a, b)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["without the fence: ran 3×, ends done", "with the fence: ran 2×, ends done"]
    assert all(ax.get_xlabel() == "fake time (s)" for ax in fig.axes)
    plt.close(fig)


def test_panel_replays_when_the_controls_change(tmp_path):
    panel = zombie.ZombiePanel(tmp_path)
    assert "ran 3 times" in panel.text.value  # drawn at once: the default is the tutorial's timeline
    first_chart = bytes(panel.chart.value)
    panel.report.value = "complete"
    assert "ran 3" not in panel.text.value
    panel.replaced.value = False
    unfenced, fenced = panel.outcomes
    assert unfenced.runs == fenced.runs == ["worker-a"]
    assert bytes(panel.chart.value) != first_chart
    panel.report_at.value = 90
    assert panel.outcomes[0].report_at == 90


@pytest.mark.parametrize(("report", "report_at", "replaced"), [("complete", 90, True), ("fail", 90, False)])
def test_every_label_stays_inside_the_picture(tmp_path, report, report_at, replaced):
    """The panel's latest report times put marks near the right edge: their labels must not be cut off."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    outcomes = [zombie.scenario(f, report, report_at, replaced, tmp_path) for f in (False, True)]
    fig = zombie.plot_side_by_side(*outcomes)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    width, height = fig.bbox.width, fig.bbox.height
    for ax in fig.axes:
        for text in ax.texts:
            box = text.get_window_extent(renderer)
            inside = box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height
            assert inside, f"{text.get_text()!r} is cut off at {box}"


def test_panel_says_interrupted_when_the_kernel_is_interrupted(tmp_path, monkeypatch):
    panel = zombie.ZombiePanel(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(zombie, "scenario", interrupted)
    panel.report.value = "complete"
    assert "interrupted" in panel.text.value


def test_the_fenced_reports_are_the_given_classs_own(tmp_path):
    """A JobQueue whose fail() forgot the token: the 'fenced' timeline runs three times."""
    from labqueue.tutorial.jobqueue import FAIL, JobQueue

    unfenced = FAIL.replace("lease_token = :token AND ", "").replace("AND state = 'running'", "")
    assert unfenced != FAIL

    class Forgetful(JobQueue):
        def fail(self, job, error):
            rows = self.db.execute(
                unfenced,
                {
                    "retry_at": self.clock(),
                    "now": self.clock(),
                    "error": error,
                    "id": job.id,
                    "token": job.lease_token,
                },
            ).fetchall()
            return rows[0]["state"] if rows else None

    out = zombie.scenario(fenced=True, report="fail", report_at=40, folder=tmp_path, queue_class=Forgetful)
    assert out.runs == ["worker-a", "worker-b", "worker-c"]
    assert zombie.scenario(fenced=True, folder=tmp_path, queue_class=JobQueue).runs == [
        "worker-a",
        "worker-b",
    ]
