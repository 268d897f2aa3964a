"""The throughput lab: real draining processes on the learner's queue, the summary, the plot
and the widget panel."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3

import pytest

from labqueue import InvalidArgument
from labqueue.lab import throughput as tp
from labqueue.lab import throughput_worker as tw
from labqueue.tutorial.sections import package_text, split
from labqueue.tutorial.workspace import Workspace


def _cell(defining: str) -> str:
    """The course's saved cell of jobqueue.py that defines `defining`, as a learner would paste it."""
    (section,) = [s for s in split(package_text("jobqueue"))[1] if defining in s.names]
    return "# jobqueue.py\n" + section.body


def _rows(path, statement):
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [tuple(r) for r in db.execute(statement)]


def test_config_rejects_bad_values():
    with pytest.raises(InvalidArgument, match=r"workers.*0"):
        tp.Config(0, 1, "NORMAL")
    with pytest.raises(InvalidArgument, match=r"per_claim.*'3'"):
        tp.Config(1, "3", "NORMAL")
    with pytest.raises(InvalidArgument, match=r"synchronous.*'normal'"):
        tp.Config(1, 1, "normal")


def test_tutorial_configs_are_the_seven_published_ones():
    published = tp.tutorial_figures()
    assert [c.label for c in tp.TUTORIAL_CONFIGS] == list(published["config"])
    assert published.set_index("config").loc["4 w, 10/claim, NORMAL", "jobs_per_s"] == 8670


def test_serve_drains_the_queue_and_records_in_sqlite(tmp_path):
    path = tmp_path / "q.db"
    tp.prepare(path, 25)
    go = tmp_path / "go"
    go.touch()
    command = {"db": str(path), "per_claim": 10, "synchronous": "FULL", "go_file": str(go), "max_claims": 50}
    assert tw.serve("w0", io.StringIO(json.dumps(command) + "\n\n")) == 1
    assert _rows(path, "SELECT state, COUNT(*) FROM jobs GROUP BY state") == [("done", 25)]
    results = _rows(path, "SELECT worker, done, claims, synchronous FROM tp_results")
    assert results == [("w0", 25, 3, 2)], "25 jobs in claims of 10, 10 and 5, at FULL (2)"
    assert _rows(path, "SELECT worker FROM tp_ready") == [("w0",)]


def test_wait_for_go_gives_up_with_a_clear_error(tmp_path):
    with pytest.raises(TimeoutError, match="no start signal"):
        tw.wait_for_go(tmp_path / "never", timeout=0.01)


def test_measure_drains_every_job_with_real_processes(tmp_path):
    run = tp.measure(tp.Config(2, 5, "NORMAL"), n_jobs=200, folder=tmp_path)
    assert run.jobs == 200 and run.seconds > 0 and run.claimed_twice == 0
    assert run.jobs_per_s == pytest.approx(200 / run.seconds)
    assert 40 <= run.claims <= 42 and run.levels == ("NORMAL",)
    path = tmp_path / "tp_2_5_normal.db"
    per_worker = dict(_rows(path, "SELECT worker, done FROM tp_results"))
    assert sorted(per_worker) == ["w0", "w1"] and sum(per_worker.values()) == 200
    assert {w for (w,) in _rows(path, "SELECT worker FROM jobs")} <= {"w0", "w1"}


def test_the_workers_run_the_learners_queue(tmp_path):
    ws = Workspace(tmp_path / "ws")
    assert ws.save(_cell("claim").replace('"limit": limit}', '"limit": 1}')) == "jobqueue"
    edited_init = _cell("JobQueue").replace(
        'f"PRAGMA synchronous = {synchronous}"', '"PRAGMA synchronous = NORMAL"'
    )
    assert ws.save(edited_init) == "jobqueue" and ws.changes().count("\n+ ") == 2
    run = tp.measure(tp.Config(1, 10, "FULL"), n_jobs=30, folder=tmp_path, code=ws.folder)
    assert run.jobs == 30 and run.claims == 30, "the learner's claim hands out one job per claim"
    assert run.levels == ("NORMAL",), "the learner's queue ignores the level it is given"
    course = tp.measure(tp.Config(1, 10, "FULL"), n_jobs=30, folder=tmp_path)
    assert course.claims == 3 and course.levels == ("FULL",)


def test_a_claim_that_hands_a_job_out_twice_is_counted_and_the_drain_still_ends(tmp_path):
    ws = Workspace(tmp_path / "ws")
    # The sub-select keeps only its order: it takes done and leased jobs too, and never runs out.
    where = "WHERE state IN ('queued', 'running') AND visible_at <= :now"
    assert where in _cell("RETIRE_EXHAUSTED")
    ws.save(_cell("RETIRE_EXHAUSTED").replace(where, ""))
    run = tp.measure(tp.Config(1, 1, "NORMAL"), n_jobs=5, folder=tmp_path, code=ws.folder)
    assert run.claims == 10 and run.claimed_twice == 5 and run.jobs == 10


def test_measure_all_goes_round_robin_and_summarizes_medians(tmp_path):
    configs = [tp.Config(1, 1, "NORMAL"), tp.Config(1, 10, "NORMAL")]
    seen = []
    runs = tp.measure_all(configs, n_jobs=60, rounds=2, folder=tmp_path, progress=False, on_run=seen.append)
    assert list(runs["config"]) == [c.label for c in configs] * 2
    assert list(runs["round"]) == [1, 1, 2, 2]
    assert [r.config for r in seen] == configs * 2
    summary = tp.summarize(runs)
    first = runs[runs["config"] == configs[0].label]["jobs_per_s"]
    assert tp.median_of(summary, configs[0]) == round(first.median())
    assert list(summary["rounds"]) == [2, 2]
    assert summary.set_index("config").loc["1 w, 1/claim, NORMAL", "tutorial_jobs_per_s"] == 3392
    with pytest.raises(KeyError, match="8 w"):
        tp.median_of(summary, tp.Config(8, 1, "NORMAL"))


def test_measure_all_rejects_bad_sizes(tmp_path):
    with pytest.raises(InvalidArgument, match=r"rounds.*0"):
        tp.measure_all(rounds=0, folder=tmp_path, progress=False)
    with pytest.raises(InvalidArgument, match=r"n_jobs.*-5"):
        tp.measure_all(n_jobs=-5, folder=tmp_path, progress=False)
    with pytest.raises(InvalidArgument, match="at least one configuration"):
        tp.measure_all([], folder=tmp_path, progress=False)


def test_plot_has_both_series_and_labelled_axes():
    import pandas as pd

    runs = pd.DataFrame(
        [
            {
                "config": c.label,
                "workers": c.workers,
                "per_claim": c.per_claim,
                "synchronous": c.synchronous,
                "jobs_per_s": 1000 + n,
            }
            for n, c in enumerate(tp.TUTORIAL_CONFIGS)
        ]
    )
    fig = tp.plot(tp.summarize(runs))
    ax = fig.axes[0]
    assert "jobs/s" in ax.get_ylabel()
    assert len(ax.patches) == 2 * len(tp.TUTORIAL_CONFIGS)
    assert [t.get_text() for t in ax.get_legend().get_texts()][1].startswith("tutorial")


def test_fsync_seconds_measures_something_and_cleans_up(tmp_path):
    assert tp.fsync_seconds(tmp_path, rounds=3) > 0
    assert list(tmp_path.iterdir()) == []


def test_panel_shows_a_chart_at_once_and_adds_a_run_on_click(tmp_path):
    box = tp.panel(folder=tmp_path)
    before = box.image.value
    assert len(before) > 0
    box.controls["workers"].value = 1
    box.controls["per_claim"].value = 5
    box.controls["synchronous"].value = "FULL"
    box.controls["jobs"].value = 500
    box.button.click()
    assert [r.config for r in box.lab.runs] == [tp.Config(1, 5, "FULL")]
    assert "1 w, 5/claim, FULL" in box.status.value and "jobs/s" in box.status.value
    assert box.image.value != before
    assert not box.button.disabled
    assert list(box.lab.table()["jobs"]) == [500]


def test_a_worker_that_dies_is_reported_with_its_error(tmp_path):
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("not a database")
    path = tmp_path / "q.db"
    tp.prepare(path, 1)
    pool = tp.WorkerPool()
    try:
        pool._grow(1)
        command = {
            "db": str(not_a_db),
            "per_claim": 1,
            "synchronous": "NORMAL",
            "go_file": str(tmp_path / "go"),
            "max_claims": 2,
        }
        pool.procs[0].stdin.write(json.dumps(command) + "\n")
        pool.procs[0].stdin.flush()
        with (
            contextlib.closing(sqlite3.connect(path)) as db,
            pytest.raises(RuntimeError, match="not a database"),
        ):
            pool._wait_for_rows(db, "tp_ready", 1)
        assert pool.procs == []
    finally:
        pool.close()


def test_an_interrupted_panel_run_says_so_and_ends_its_workers(tmp_path, monkeypatch):
    started = []

    def interrupted(self, q, table, count):
        started.extend(self.procs)
        raise KeyboardInterrupt  # as if the learner pressed interrupt while the workers drain

    monkeypatch.setattr(tp.WorkerPool, "_wait_for_rows", interrupted)
    box = tp.panel(folder=tmp_path)
    box.controls["workers"].value = 2
    box.controls["jobs"].value = 500
    box.button.click()
    assert "interrupted" in box.status.value and not box.button.disabled
    assert len(started) == 2 and all(p.poll() is not None for p in started), "no worker is left running"
