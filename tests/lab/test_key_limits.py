"""labqueue.lab.key_limits: notebook 15's customers drained by real workers, with and
without a limit per key, and the chart and table made of their runs."""

from __future__ import annotations

import pandas as pd
import pytest

from labqueue.lab import key_limits


def synthetic() -> pd.DataFrame:
    rows = [("acme", 0.0, 1.0), ("acme", 0.0, 1.0), ("acme", 0.5, 1.5), ("globex", 1.0, 2.0)]
    return pd.DataFrame(rows, columns=["customer", "started_s", "ended_s"])


def test_running_counts_each_customers_jobs_in_progress_at_each_moment():
    table = key_limits.running(synthetic(), step=0.5)
    assert list(table.index) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert list(table["acme"]) == [2, 3, 1, 0, 0] and list(table["globex"]) == [0, 0, 1, 1, 0]


def test_the_summary_gives_the_most_at_once_and_the_first_start():
    table = key_limits.summary({"a run": synthetic()})
    assert table.loc[("a run", "acme"), "most at once"] == 3
    assert table.loc[("a run", "globex"), "first start (s)"] == 1.0
    assert table.loc[("a run", "acme"), "jobs"] == 3


def test_the_chart_has_a_panel_per_run_with_labelled_axes():
    fig = key_limits.plot({"no limit": synthetic(), "limit 2 per customer": synthetic()})
    axes = fig.get_axes()
    assert len(axes) == 2 and axes[0].get_ylabel() == "running jobs"
    assert all(ax.get_xlabel() == "time since the first start (s)" for ax in axes)
    assert [ax.get_title() for ax in axes] == ["no limit", "limit 2 per customer"]


@pytest.mark.slow
def test_real_workers_keep_each_customer_to_its_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    monkeypatch.setattr(key_limits, "CUSTOMERS", {"acme": 12, "globex": 3})
    monkeypatch.setattr(key_limits, "WORK_S", 0.02)
    limited = key_limits.run(1, workers=3)
    assert len(limited) == 15
    assert key_limits.summary({"limited": limited})["most at once"].max() == 1
