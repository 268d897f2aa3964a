"""The claim-index lab: seeding the tutorial's table, plans, timing the learner's claim."""

from __future__ import annotations

import sqlite3

import pytest

from labqueue import InvalidArgument
from labqueue.lab import claim_index
from labqueue.tutorial import jobqueue as tutorial

FEW = (3, 3, 3)
READY_ONLY = "CREATE INDEX jobs_ready ON jobs (visible_at, id) WHERE state IN ('queued', 'running');"


def test_seed_writes_done_rows_older_than_the_queued_ones(tmp_path):
    path = tmp_path / "seed.db"
    claim_index.seed(path, 500, 20, progress=False)
    db = sqlite3.connect(path)
    per_state = "SELECT state, COUNT(*), MIN(visible_at), MAX(visible_at) FROM jobs GROUP BY state"
    spans = {state: (n, first, last) for state, n, first, last in db.execute(per_state)}
    columns = [row[1] for row in db.execute("PRAGMA table_info(jobs)")]
    db.close()
    assert {state: n for state, (n, _, _) in spans.items()} == {"done": 500, "queued": 20}
    assert spans["done"][2] < spans["queued"][1], "every done row is older than every queued one"
    assert max(last for _, _, last in spans.values()) < claim_index.now_after(500, 20)
    assert "priority" not in columns and "dedupe_key" in columns, "the tutorial's table"


@pytest.mark.parametrize("n_done", [-1, 1.5, True, "10"])
def test_bad_sizes_are_named(tmp_path, n_done):
    with pytest.raises(InvalidArgument, match="n_done"):
        claim_index.seed(tmp_path / "x.db", n_done, progress=False)


@pytest.mark.parametrize("indexes", ["", "  ", 3])
def test_bad_index_text_is_named(indexes):
    with pytest.raises(InvalidArgument, match="indexes"):
        claim_index.setups(indexes)


def test_measure_times_the_claim_of_the_class_it_is_given_under_each_setup(tmp_path):
    calls = []

    class Counting(tutorial.JobQueue):
        def claim(self, worker, *, limit=1):
            calls.append(worker)
            return super().claim(worker, limit=limit)

    results, seeded = claim_index.measure(
        2_000, folder=tmp_path, progress=False, claims=FEW, queue_class=Counting
    )
    assert seeded > 0 and len(calls) == sum(FEW)
    none, plain, partial = results
    assert (
        none.claim_plan.endswith("SCAN jobs | USE TEMP B-TREE FOR ORDER BY")
        and none.retire_plan == "SCAN jobs"
    )
    assert "jobs_plain" in plain.claim_plan and "jobs_plain" in plain.retire_plan
    assert "jobs_ready" in partial.claim_plan and "jobs_exhausted" in partial.retire_plan
    assert all(len(r.claims_ms) == 3 and r.median_ms > 0 for r in results)
    table = claim_index.results_table(results, 2_000)
    assert table["× the fastest"].min() == 1.0 and table.attrs["n_done"] == 2_000
    db = sqlite3.connect(tmp_path / "claim_index.db")
    left = db.execute(claim_index.INDEXES_ON_JOBS).fetchall()
    db.close()
    assert left == [], "each setup drops the indexes it built"


def test_measure_builds_the_index_text_it_is_given(tmp_path):
    results, _ = claim_index.measure(300, indexes=READY_ONLY, folder=tmp_path, progress=False, claims=FEW)
    assert "jobs_ready" in results[2].claim_plan
    assert results[2].retire_plan == "SCAN jobs", "without jobs_exhausted the retire statement scans"


def test_plan_binds_named_and_positional_parameters():
    db = sqlite3.connect(":memory:")
    db.executescript(tutorial.SCHEMA)
    assert "jobs_ready" in claim_index.plan(
        db, "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running') AND visible_at <= ?"
    )
    assert "jobs_exhausted" in claim_index.plan(db, tutorial.RETIRE_EXHAUSTED)  # :now
    assert claim_index.scans_table(claim_index.plan(db, "SELECT COUNT(*) FROM jobs WHERE state = 'done'"))
    db.close()


def test_only_the_inspection_reads_of_the_production_package_scan_the_finished_rows(tmp_path):
    plans = claim_index.all_queue_plans(tmp_path)
    assert set(plans) == set(claim_index.queue_statements())
    assert {"CLAIM", "RETIRE_EXHAUSTED", "COMPLETE", "FAIL", "HEARTBEAT"} <= set(plans)
    scanning = {name for name, text in plans.items() if claim_index.scans_table(text)}
    # q.counts() is for people; q.finished_within() for a metrics scrape (no index on
    # finished_at: one read of the table); nothing else scans. The dashboard's chart
    # (THROUGHPUT) reads a range of the primary key, the newest jobs only. Job listings walk
    # the primary key or a partial index, newest first, a page at a time.
    assert scanning == {"COUNTS", "FINISHED_WITHIN"}
    assert "INTEGER PRIMARY KEY" in plans["THROUGHPUT"]


def test_tutorial_figures_and_plot(tmp_path):
    published = claim_index.tutorial_figures()
    assert list(published.index) == [s.label for s in claim_index.SETUPS]
    assert published.loc["no index", "median_claim_ms"] == pytest.approx(111.24)
    results, _ = claim_index.measure(500, folder=tmp_path, progress=False, claims=FEW)
    ax = claim_index.plot_latency(claim_index.results_table(results, 500), published).axes[0]
    assert ax.get_yscale() == "log" and "ms" in ax.get_ylabel()
    assert len(ax.patches) == 6


def test_panel_shows_the_initial_run_and_measures_on_click(tmp_path):
    results, _ = claim_index.measure(500, folder=tmp_path, progress=False, claims=FEW)
    initial = claim_index.results_table(results, 500)
    panel = claim_index.claim_index_panel(initial, folder=tmp_path, sizes=(1_000, 2_000), indexes=READY_ONLY)
    (size, button), status, table, picture, _progress = panel.children[0].children, *panel.children[1:]
    assert "the run above" in status.value and "no index" in table.value and picture.value
    size.value = 2_000
    button.click()
    assert "2,000 done rows" in status.value and not button.disabled


def test_panel_says_interrupted_when_the_kernel_is_interrupted(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    panel = claim_index.claim_index_panel(folder=tmp_path, sizes=(1_000,))
    monkeypatch.setattr(claim_index, "measure", interrupted)
    (_size, button), status = panel.children[0].children, panel.children[1]
    button.click()
    assert "interrupted" in status.value and not button.disabled
