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
    from labqueue.tutorial.jobqueue import FAIL
    from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue

    unfenced = FAIL.replace("lease_token = :token AND ", "").replace("AND state = 'running'", "")
    assert unfenced != FAIL

    class Forgetful(TutorialQueue):
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
    assert zombie.scenario(fenced=True, folder=tmp_path, queue_class=TutorialQueue).runs == [
        "worker-a",
        "worker-b",
    ]


# -- real worker processes, frozen with SIGSTOP and thawed with SIGCONT ----------------------


def _workspace_without(folder, needle, old, new):
    """A workspace whose jobqueue.py has `old` replaced by `new` in the section holding
    `needle`, saved the way a learner's edited cell is."""
    from labqueue.tutorial.sections import package_text, split
    from labqueue.tutorial.workspace import Workspace

    ws = Workspace(folder, "notebooks/04_zombie_workers.ipynb")
    (cell,) = [s.body for s in split(package_text("jobqueue"))[1] if needle in s.body]
    assert old in cell
    ws.save("# jobqueue.py\n" + cell.replace(old, new))
    return ws.folder


@pytest.mark.slow
def test_real_zombies_late_reports_are_refused(tmp_path):
    run = zombie.zombie_run(4, folder=tmp_path)
    assert not run.timed_out and set(run.exit_codes.values()) == {0}
    assert run.taken_over == run.late_reports == run.refused == [1, 2, 3, 4]
    assert run.accepted == run.ran_three_times == run.doubled == run.not_done == []
    assert run.once == [1, 2, 3, 4]
    assert [j.report for j in run.jobs] == ["complete", "fail", "complete", "fail"]
    assert all(j.frozen_at < j.taken_over_at <= j.thawed_at for j in run.jobs)
    assert run.lines()[1:3] == [
        "taken over by another worker: 4 of 4",
        "late reports after the thaw (SIGCONT): 4, refused 4, accepted 0",
    ]
    assert list(run.table()["late report"]) == ["refused"] * 4


@pytest.mark.slow
def test_fail_without_its_token_lets_a_late_failure_rerun_the_job(tmp_path):
    """The notebook's break: FAIL keeps state = 'running' but loses the token. A frozen worker
    thawed while the new holder still works puts the job back: it is claimed a third time."""
    code = _workspace_without(tmp_path / "ws", "FAIL = ", "lease_token = :token AND ", "")
    run = zombie.zombie_run(4, folder=tmp_path, code=code)
    assert run.taken_over == run.late_reports == [1, 2, 3, 4]
    assert run.accepted == run.ran_three_times == [2, 4]  # the jobs whose late report is a failure
    assert run.refused == [1, 3] and run.doubled == []
    assert [j.attempts for j in run.jobs] == [2, 3, 2, 3]


@pytest.mark.slow
def test_fail_without_its_token_goes_unseen_when_the_thaw_waits_for_done(tmp_path):
    """Thawed only after the new holder finished, the late failure meets a done job:
    state = 'running' alone refuses it, as in the notebook's first fenced timeline."""
    code = _workspace_without(tmp_path / "ws", "FAIL = ", "lease_token = :token AND ", "")
    run = zombie.zombie_run(2, thaw="done", folder=tmp_path, code=code)
    assert run.refused == run.once == [1, 2] and run.ran_three_times == []
    assert all(j.taken_over_at < j.thawed_at for j in run.jobs)


@pytest.mark.slow
def test_complete_without_any_fence_writes_two_ledger_rows(tmp_path):
    code = _workspace_without(
        tmp_path / "ws", "def complete(", " AND lease_token = :token AND state = 'running'", ""
    )
    run = zombie.zombie_run(2, folder=tmp_path, code=code)
    assert run.accepted == run.doubled == run.stale_results == [1]
    assert run.jobs[0].ledger == [1, 2] and run.once == [2]


@pytest.mark.slow
def test_complete_without_its_token_keeps_the_stale_result(tmp_path):
    code = _workspace_without(tmp_path / "ws", "def complete(", " AND lease_token = :token", "")
    run = zombie.zombie_run(2, folder=tmp_path, code=code)
    assert run.stale_results == run.accepted == [1] and run.doubled == []
    assert run.jobs[0].ledger == [1]  # the frozen worker's result counted; the new holder's was refused


def test_a_workspace_that_cannot_run_is_reported_with_what_the_worker_said(tmp_path):
    from labqueue.tutorial.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    ws.path("worker").write_text("raise RuntimeError('my worker is broken')\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="my worker is broken"):
        zombie.zombie_run(1, folder=tmp_path, code=ws.folder)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"jobs": 0}, "jobs"),
        ({"jobs": 2.0}, "jobs"),
        ({"lease": 0.3}, "lease"),
        ({"thaw": "never"}, "'never'"),
    ],
)
def test_zombie_run_names_bad_input(tmp_path, kwargs, named):
    with pytest.raises(InvalidArgument, match=named):
        zombie.zombie_run(folder=tmp_path, **kwargs)
