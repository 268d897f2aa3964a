"""Notebook 12's lab: tables, the timeline, the finale table and the panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from labqueue.chaos.check import JobRow, check_run
from labqueue.chaos.supervisor import ChaosConfig, ChaosResult, Fault, WorkerLife
from labqueue.lab import chaos as lab
from labqueue.lab.assets import FIGSIZE_TALL


def made_up_run(passed: bool = True) -> ChaosResult:
    """A two-slot run written by hand: a poison crash, a kill, a pause, four jobs."""
    config = ChaosConfig(jobs=4, workers=2, mix={"credit": 1, "slow": 1, "poison": 1, "bad": 1})
    workers = [
        WorkerLife("w0", 0, 100, 0.0, 1.0, 1, "crashed"),
        WorkerLife("w1", 1, 101, 0.0, 2.5, -9, "killed"),
        WorkerLife("w2", 0, 102, 1.05, 4.0, None, "stopped at the end"),
        WorkerLife("w3", 1, 103, 2.55, 4.0, None, "stopped at the end"),
    ]
    faults = [Fault(0.5, "pause", "w1", 2, 1.5), Fault(2.5, "kill", "w1", None)]
    jobs = [
        JobRow(1, "credit", "done", 1, 3, None, 0.2),
        JobRow(2, "slow", "done", 2, 3, None, 2.0),
        JobRow(3, "poison", "dead", 3, 3, "lease expired on the last attempt", 3.5),
        JobRow(4, "bad", "dead", 3, 3, "ValueError: payload has no recipient", 3.9),
    ]
    ledger = [(1, 1), (2, 2)] if passed else [(1, 1), (1, 1), (2, 2)]
    result = ChaosResult(config, Path("made-up.db"), 0.0, 4.0, workers, faults, jobs, ledger)
    result.checks = check_run(jobs, ledger, {2: 1}, lease=config.lease, drained=True)
    return result


def test_tables_describe_the_run():
    result = made_up_run()
    checks = lab.checks_table(result)
    assert list(checks["held"]) == ["yes"] * len(result.checks)
    fates = lab.fates_table(result)["count"].to_dict()
    assert fates == {
        "SIGKILL sent": 1,
        "SIGSTOP sent (SIGCONT later)": 1,
        "crashed": 1,
        "killed": 1,
        "stopped at the end": 2,
    }
    broken = lab.checks_table(made_up_run(passed=False))
    assert "NO" in set(broken["held"])


def test_figures_sit_beside_the_tutorials():
    table = lab.beside_the_tutorial(("here", made_up_run()))
    assert table.loc["done", "tutorial"] == "266"
    assert table.loc["done", "here"] == "2"
    assert table.loc["slow jobs recorded from attempt 2", "here"] == "1"
    assert table.loc["exited with a crash", "here"] == "1"


def test_timeline_has_its_lanes_marks_and_finished_jobs():
    fig = lab.plot_timeline(made_up_run())
    lanes, done = fig.axes
    assert lanes.get_ylabel() == "pool slot"
    assert done.get_xlabel() == "time since the start (s)" and done.get_ylabel() == "jobs"
    labels = [t.get_text() for t in lanes.get_legend().get_texts()]
    assert labels == ["crash (poison job)", "SIGKILL", "SIGSTOP to SIGCONT", "worker alive"]
    assert [line.get_label() for line in done.get_lines()] == ["done", "dead"]
    assert tuple(fig.get_size_inches()) == FIGSIZE_TALL


def test_protections_cover_every_notebook_from_01():
    table = lab.protections()
    notebooks = {n.strip() for cell in table["notebook"] for n in cell.split(",")}
    assert notebooks == {f"{n:02d}" for n in range(1, 13)}


def test_report_html_says_pass_or_fail():
    assert "PASS" in lab.report_html(made_up_run())
    assert "FAIL" in lab.report_html(made_up_run(passed=False))


def test_panel_shows_the_notebooks_run_at_once():
    panel = lab.chaos_panel(initial=made_up_run())
    assert "PASS" in panel.report.value
    assert panel.picture.value  # the timeline is drawn before anyone presses Run
    # 4 jobs is not among the sizes offered: the size stays at its default; 2 workers is shown
    assert panel.controls["jobs"].value == 300 and panel.controls["workers"].value == 2


def test_panel_controls_start_at_the_shown_runs_size():
    shown = made_up_run()
    shown.config = ChaosConfig(jobs=100, workers=8)
    panel = lab.chaos_panel(initial=shown)
    assert panel.controls["jobs"].value == 100 and panel.controls["workers"].value == 8


def test_panel_settings_become_the_tutorials_run_with_faults():
    config = lab.config_from(30, 4, 0.3, 1.5, 9)
    assert (config.jobs, config.workers, config.kill_every, config.pause_every, config.seed) == (
        30,
        4,
        0.3,
        1.5,
        9,
    )
    assert (config.lease, config.max_attempts) == (0.8, 3)
    assert config.pause_seconds == 2.5 * config.lease  # frozen for longer than the lease


def test_panel_shows_a_failure_in_place(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    panel = lab.chaos_panel(folder=not_a_folder)
    panel.controls["jobs"].value = 30
    panel.button.click()
    assert panel.status.value.startswith("<b>failed:</b>")
    assert not panel.button.disabled


@pytest.mark.slow
def test_panel_run_button_runs_a_fresh_supervised_run(tmp_path):
    panel = lab.chaos_panel(folder=tmp_path)
    panel.controls["jobs"].value = 30
    panel.controls["workers"].value = 4
    panel.controls["kill_every"].value = 0.3
    panel.controls["pause_every"].value = 0.0
    panel.button.click()
    assert "finished in" in panel.status.value, panel.status.value
    assert "PASS" in panel.report.value and "30 jobs" in panel.report.value
    assert panel.picture.value
    assert not panel.button.disabled


def test_an_interrupted_panel_run_says_so_and_ends_its_workers(tmp_path, monkeypatch):
    from labqueue.chaos import supervisor

    started = []
    real_tick = supervisor.Supervisor.tick

    def tick_then_interrupt(self):
        real_tick(self)  # the pool is started here
        started.extend(entry[0] for entry in self.slots if entry is not None)
        raise KeyboardInterrupt

    monkeypatch.setattr(supervisor.Supervisor, "tick", tick_then_interrupt)
    panel = lab.chaos_panel(folder=tmp_path)
    panel.controls["jobs"].value = 30
    panel.controls["workers"].value = 2
    panel.button.click()
    assert "interrupted" in panel.status.value and not panel.button.disabled
    assert len(started) == 2 and all(p.poll() is not None for p in started), "no worker is left running"


def test_long_cells_are_shown_whole():
    html = lab.whole(lab.protections()).to_html()
    assert "a hopeless job retried forever or dropped silently" in html
