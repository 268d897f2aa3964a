"""Notebook 11's lab: JUnit parsing, the tutorial's suite and notebook-written tests run by
pytest in a subprocess, the panel."""

from __future__ import annotations

import pytest

from labqueue import FakeClock, InvalidArgument
from labqueue.lab import testing
from labqueue.tutorial.jobqueue import JobQueue

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.test_queue" name="test_ok" time="0.012"/>
  <testcase classname="tests.test_queue" name="test_bad" time="0.003">
    <failure message="AssertionError: assert 1 == 2&#10;more detail">trace</failure></testcase>
  <testcase classname="check_mine" name="test_skip" time="0.000"><skipped message="not today"/></testcase>
  <testcase classname="check_mine" name="test_broken" time="0.1">
    <error message="fixture exploded"/></testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Scratch files (reports, written test modules) go to tmp_path, not ./work."""
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    return tmp_path


def test_parse_junit_reads_every_outcome(tmp_path):
    path = tmp_path / "report.xml"
    path.write_text(JUNIT)
    table = testing.parse_junit(path)
    assert list(table["outcome"]) == ["passed", "failed", "skipped", "error"]
    assert list(table["module"]) == ["test_queue", "test_queue", "check_mine", "check_mine"]
    assert table.loc[1, "message"] == "AssertionError: assert 1 == 2"
    assert list(table["ms"]) == [12.0, 3.0, 0.0, 100.0]
    run = testing.TestRun(1, table, "", 0.5)
    assert run.counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1}
    assert not run.ok
    assert list(testing.summarize(run)["tests"]) == [1, 1, 1, 1]


def test_an_empty_run_is_not_ok(tmp_path):
    path = tmp_path / "empty.xml"
    path.write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    assert not testing.TestRun(0, testing.parse_junit(path), "", 0.1).ok


def test_write_test_module_puts_the_tutorials_queue_above_the_source(scratch):
    def test_lease_ends_on_time(tmp_path):
        assert tmp_path

    path = testing.write_test_module([test_lease_ends_on_time], name="check_written")
    text = path.read_text()
    assert path.name == "check_written.py" and path.parent == scratch
    assert "JobQueue = process.tutorial_module(\"jobqueue\", '' or None).JobQueue" in text
    assert "def test_lease_ends_on_time(tmp_path):" in text and "assert tmp_path" in text
    mine = testing.write_test_module([test_lease_ends_on_time], "check_mine", testing.tutorial_header("/ws"))
    assert "tutorial_module(\"jobqueue\", '/ws' or None)" in mine.read_text()


def test_write_test_module_rejects_what_pytest_would_not_run(scratch):
    with pytest.raises(InvalidArgument, match="none"):
        testing.write_test_module([])
    with pytest.raises(InvalidArgument, match="helper"):

        def helper():
            pass

        testing.write_test_module([helper])


@pytest.mark.slow
def test_run_test_functions_passes_and_the_short_lease_queue_fails_it(scratch):
    def test_the_lease_holds_until_it_ends(tmp_path):
        clock = FakeClock(0.0)
        q = JobQueue(tmp_path / "t.db", lease_seconds=30, clock=clock)
        q.enqueue("t", {})
        q.claim("a")
        clock.advance(29.9)
        assert q.claim("b") == []

    good = testing.run_test_functions([test_the_lease_holds_until_it_ends], name="check_good")
    assert good.ok and good.counts["passed"] == 1, good.output
    assert list(good.table["test"]) == ["test_the_lease_holds_until_it_ends"]
    bad = testing.run_test_functions(
        [test_the_lease_holds_until_it_ends],
        name="check_bad",
        header=testing.tutorial_header(short_leases=True),
    )
    assert bad.returncode == 1 and bad.counts["failed"] == 1
    assert "AssertionError" in bad.table.loc[0, "message"]


def test_backoff_table_pins_only_the_last_column(scratch):
    table = testing.backoff_table(n=4, attempts=3)
    assert list(table["lambda: 1.0"]) == [4.0] * 4
    assert (
        table["random.Random(7).random"].tolist()
        == testing.backoff_table(n=4)["random.Random(7).random"].tolist()
    )
    assert table.to_numpy().max() <= 4.0 and table.to_numpy().min() >= 0.0


def test_plot_durations_has_labelled_axes_and_one_bar_per_test(tmp_path):
    path = tmp_path / "report.xml"
    path.write_text(JUNIT)
    fig = testing.plot_durations(testing.TestRun(1, testing.parse_junit(path), "", 0.2))
    ax = fig.axes[0]
    assert "ms" in ax.get_ylabel() and ax.get_yscale() == "log"
    assert len(ax.patches) == 4
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["passed", "failed", "error", "skipped"]


@pytest.mark.slow
def test_panel_runs_the_tutorials_tests_chosen_with_k(scratch):
    box = testing.panel()
    assert "press Run" in box.status.value
    box.keyword.value = "leased_job_is_hidden or ceiling_doubles"
    box.button.click()
    (run,) = box.runs
    assert run.ok and set(run.table["test"]) == {
        "test_a_leased_job_is_hidden_until_its_lease_ends",
        "test_the_backoff_ceiling_doubles_up_to_the_cap",
    }
    assert "2 passed" in box.status.value and box.image.value[:4] == b"\x89PNG"
    assert not box.button.disabled


def test_without_pytest_the_lab_says_how_to_install_it(scratch, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real_find_spec(name, *a)
    )
    assert not testing.pytest_available()
    with pytest.raises(testing.PytestMissing, match=r"pytest is not installed .*pip install"):
        testing.run_tutorial_suite()
    panel = testing.panel()
    panel.button.click()
    assert "PytestMissing" in panel.status.value and "pip install" in panel.status.value


def test_an_interrupted_panel_run_says_so(scratch, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(testing, "run_tutorial_suite", interrupted)
    panel = testing.panel()
    panel.button.click()
    assert "interrupted" in panel.status.value and not panel.button.disabled
