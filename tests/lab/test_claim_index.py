"""The claim-index lab: seeding, plans, timing the real claim, and the two side facts."""

from __future__ import annotations

import sqlite3

import pytest

from labqueue import InvalidArgument, sql
from labqueue.lab import claim_index

FEW = [claim_index.Setup(s.label, s.create, 3) for s in claim_index.SETUPS]


def test_seed_writes_done_rows_older_than_the_queued_ones(tmp_path):
    path = tmp_path / "seed.db"
    claim_index.seed(path, 500, 20, progress=False)
    db = sqlite3.connect(path)
    per_state = "SELECT state, COUNT(*), MIN(visible_at), MAX(visible_at) FROM jobs GROUP BY state"
    spans = {state: (n, first, last) for state, n, first, last in db.execute(per_state)}
    db.close()
    assert {state: n for state, (n, _, _) in spans.items()} == {"done": 500, "queued": 20}
    assert spans["done"][2] < spans["queued"][1], "every done row is older than every queued one"
    assert max(last for _, _, last in spans.values()) < claim_index.now_after(500, 20)


@pytest.mark.parametrize("n_done", [-1, 1.5, True, "10"])
def test_bad_sizes_are_named(tmp_path, n_done):
    with pytest.raises(InvalidArgument, match="n_done"):
        claim_index.seed(tmp_path / "x.db", n_done, progress=False)


def test_measure_times_the_real_claim_under_each_setup(tmp_path):
    results, seeded = claim_index.measure(2_000, folder=tmp_path, progress=False, setups=FEW)
    assert seeded > 0
    by_setup = {r.setup: r for r in results}
    none, plain, partial = (by_setup[s.label] for s in claim_index.SETUPS)
    assert none.claim_plan.startswith("SCAN jobs") and none.retire_plan == "SCAN jobs"
    assert "jobs_plain" in plain.claim_plan and "jobs_plain" in plain.retire_plan
    assert "jobs_ready" in partial.claim_plan and "jobs_exhausted" in partial.retire_plan
    assert all(len(r.claims_ms) == 3 and r.median_ms > 0 for r in results)
    table = claim_index.results_table(results, 2_000)
    assert table["× the fastest"].min() == 1.0 and table.attrs["n_done"] == 2_000


def test_the_plan_table_names_only_statements_the_course_taught(tmp_path):
    plans = claim_index.queue_plans(tmp_path)
    assert list(plans.index) == [label for label, _ in claim_index.TAUGHT] + list(claim_index.EXTRA_QUERIES)
    by_constant = plans.reset_index().set_index("in labqueue.sql")["query plan"]
    # The index leads with priority: the claim walks it in order from the top (live rows only).
    assert by_constant["CLAIM"] == "SCAN jobs USING INDEX jobs_ready", "the sub-select"
    assert "jobs_exhausted" in by_constant["RETIRE_EXHAUSTED"]
    assert claim_index.scans_table(plans.loc["count done", "query plan"])
    assert not claim_index.scans_table(plans.loc["count dead", "query plan"])
    stats = ("STATS_LIVE", "STATS_READY", "STATS_DEAD")
    assert not any(claim_index.scans_table(by_constant[name]) for name in stats)


def test_only_the_inspection_reads_scan_the_finished_rows(tmp_path):
    plans = claim_index.all_queue_plans(tmp_path)
    assert set(plans) == set(claim_index.queue_statements())
    assert {name for _, name in claim_index.TAUGHT} <= set(plans)
    scanning = {name for name, text in plans.items() if claim_index.scans_table(text)}
    # q.jobs(), q.latest_jobs() and q.counts() are for people, q.finished_within() for a metrics
    # scrape (no index on finished_at: one read of the table per scrape); nothing else scans.
    assert scanning == {"JOBS", "LATEST_JOBS", "COUNTS", "FINISHED_WITHIN"}


def test_plan_binds_named_and_positional_parameters(tmp_path):
    db = sqlite3.connect(":memory:")
    db.executescript(sql.SCHEMA)
    assert "jobs_ready" in claim_index.plan(db, sql.STATS_READY)  # one ?
    assert "jobs_exhausted" in claim_index.plan(db, sql.RETIRE_EXHAUSTED)  # :now, :reason
    db.close()


def test_an_undrained_returning_cursor_holds_the_write_lock(tmp_path):
    outcome = dict(claim_index.returning_holds_the_lock(tmp_path, busy_timeout=0.05))
    assert outcome["after fetchone() on a 3-row RETURNING"] is False
    assert outcome["after fetchall() on the same cursor"] is True


def test_retire_needs_its_own_index(tmp_path):
    assert claim_index.retire_plan_with_ready_index_only(tmp_path) == "SCAN jobs"


def test_empty_claim_cost_is_measured(tmp_path):
    assert claim_index.empty_claim_seconds(20, tmp_path) > 0


def test_tutorial_figures_and_plot(tmp_path):
    tutorial = claim_index.tutorial_figures()
    assert list(tutorial.index) == [s.label for s in claim_index.SETUPS]
    assert tutorial.loc["no index", "median_claim_ms"] == pytest.approx(111.24)
    results, _ = claim_index.measure(500, folder=tmp_path, progress=False, setups=FEW)
    ax = claim_index.plot_latency(claim_index.results_table(results, 500), tutorial).axes[0]
    assert ax.get_yscale() == "log" and "ms" in ax.get_ylabel()


def test_panel_shows_the_initial_run_and_measures_on_click(tmp_path):
    results, _ = claim_index.measure(500, folder=tmp_path, progress=False, setups=FEW)
    initial = claim_index.results_table(results, 500)
    panel = claim_index.claim_index_panel(initial, folder=tmp_path, sizes=(1_000, 2_000))
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
