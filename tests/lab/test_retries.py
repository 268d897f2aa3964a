"""The retries lab: full-jitter delays from the learner's fail(), and the poison job with real workers
running the learner's code."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import retries
from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue
from labqueue.tutorial.sections import package_text, split
from labqueue.tutorial.workspace import Workspace

LAST_ATTEMPT_EXPIRED = "lease expired on the last attempt"


def _workspace_with(folder, old, new):
    """A workspace whose jobqueue.py has `old` replaced by `new` in notebook 02's claim cell,
    saved the way a learner's edited cell is."""
    ws = Workspace(folder)
    (cell,) = [s.body for s in split(package_text("jobqueue"))[1] if "CLAIM = " in s.body]
    assert old in cell
    ws.save("# jobqueue.py\n" + cell.replace(old, new))
    return ws.folder


def test_delays_stay_under_a_doubling_capped_ceiling(tmp_path):
    delays = retries.jitter_delays(200, base=2.0, cap=10.0, max_attempts=6, folder=tmp_path)
    assert sorted(delays["attempt"].unique()) == [1, 2, 3, 4, 5]
    ceilings = delays.groupby("attempt")["ceiling (s)"].first().to_dict()
    assert ceilings == {1: 2.0, 2: 4.0, 3: 8.0, 4: 10.0, 5: 10.0}
    assert ((delays["delay (s)"] >= 0) & (delays["delay (s)"] <= delays["ceiling (s)"])).all()
    assert delays.groupby("attempt")["delay (s)"].nunique().min() > 150, "jitter spreads the jobs out"


def test_same_seed_same_delays(tmp_path):
    a = retries.jitter_delays(20, seed=3, folder=tmp_path)
    b = retries.jitter_delays(20, seed=3, folder=tmp_path)
    assert a.equals(b)


def test_summary_and_plot(tmp_path):
    delays = retries.jitter_delays(50, max_attempts=4, folder=tmp_path)
    summary = retries.jitter_summary(delays)
    assert list(summary.index) == [1, 2, 3]
    assert (summary["max (s)"] <= summary["ceiling (s)"]).all()
    ax = retries.plot_jitter(delays).axes[0]
    assert ax.get_ylabel() == "delay before the retry (s)"


@pytest.mark.parametrize(
    "kwargs", [{"n_jobs": 0}, {"base": 0}, {"cap": "60"}, {"max_attempts": 1}, {"max_attempts": 2.5}]
)
def test_bad_input_is_named(tmp_path, kwargs):
    with pytest.raises(InvalidArgument, match=r"n_jobs|base|cap|max_attempts"):
        retries.jitter_delays(folder=tmp_path, **kwargs)


def test_panel_follows_its_sliders(tmp_path):
    panel = retries.jitter_panel(n_jobs=20, folder=tmp_path)
    (base, cap, attempts), note, picture, table = panel.children[0].children, *panel.children[1:]
    assert picture.value and "60.0" in table.value
    assert note.value.startswith("20 jobs"), "the panel says how many jobs it draws"
    before = picture.value
    attempts.value = 3
    assert table.value.count("<tr") == 1 + 2, "a header and attempts 1 and 2 (the third is the last)"
    cap.value = 1.0
    assert "60.0" not in table.value and picture.value != before
    base.value = 0.1
    assert ">0.1</td>" in table.value, "the first ceiling is the base"


def test_a_poison_job_dies_after_max_attempts_with_real_workers(tmp_path):
    rounds = retries.poison_rounds(lease=0.3, max_attempts=2, idle_exit=0.3, folder=tmp_path)
    assert [r.exit_code for r in rounds] == [1, 1, 0]
    assert [r.attempts for r in rounds] == [1, 2, 2]
    assert [r.state for r in rounds] == ["running", "running", "dead"]
    assert rounds[-1].last_error == LAST_ATTEMPT_EXPIRED


def test_a_claim_that_counts_no_attempt_hands_the_poison_job_out_every_round(tmp_path):
    # The learner's break on purpose: CLAIM without `attempts = attempts + 1`, run by the workers.
    code = _workspace_with(tmp_path / "code", "attempts = attempts + 1,", "")
    rounds = retries.poison_rounds(lease=0.3, max_attempts=2, idle_exit=0.3, folder=tmp_path, code=code)
    assert [r.exit_code for r in rounds] == [1, 1, 1], "every round's worker got the job and died"
    assert {(r.state, r.attempts) for r in rounds} == {("running", 0)}


def test_the_delays_come_from_the_fail_of_the_class_given(tmp_path):
    class NoJitter(TutorialQueue):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.rng = lambda: 1.0  # every delay is its ceiling

    settings = {"base": 1.0, "cap": 4.0, "max_attempts": 5}
    delays = retries.jitter_delays(5, folder=tmp_path, queue_class=NoJitter, **settings)
    assert (delays["delay (s)"] == delays["ceiling (s)"]).all()
    assert delays.groupby("attempt")["ceiling (s)"].first().tolist() == [1.0, 2.0, 4.0, 4.0]


def test_poison_table_and_plot(tmp_path):
    counted = [retries.Round(1, 1, "running", 1, None), retries.Round(2, 0, "dead", 1, LAST_ATTEMPT_EXPIRED)]
    table = retries.poison_table(counted, [1, 2, 3])
    assert table["counted in fail(): hand-outs"].tolist() == [1, 2, 3]
    assert table["counted at claim: state"].tolist()[:2] == ["running", "dead"]
    assert retries.plot_poison(counted, [1, 2, 3], 1).axes[0].get_ylabel() == "times the job was handed out"


def test_panel_and_notebook_draw_the_same_number_of_jobs():
    import inspect

    assert inspect.signature(retries.jitter_panel).parameters["n_jobs"].default == retries.JITTER_JOBS
    assert inspect.signature(retries.jitter_delays).parameters["n_jobs"].default == retries.JITTER_JOBS


def test_panel_says_interrupted_when_the_kernel_is_interrupted(tmp_path, monkeypatch):
    panel = retries.jitter_panel(n_jobs=20, folder=tmp_path)
    (_base, _cap, attempts), note = panel.children[0].children, panel.children[1]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(retries, "jitter_delays", interrupted)
    attempts.value = 3
    assert "interrupted" in note.value
