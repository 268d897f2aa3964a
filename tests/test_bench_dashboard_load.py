"""labqueue.bench.dashboard_load: the pairing of its summary (the run itself is a measurement,
made by hand: python -m labqueue.bench dashboard-load)."""

from __future__ import annotations

from labqueue.bench.dashboard_load import Drain, summary
from labqueue.bench.run import PARTS


def drain(rnd: int, tabs: int, rate: float) -> Drain:
    return Drain(rnd, tabs, 20_000 / rate, rate, 4.0, 8 if tabs else 0, 0)


def test_the_summary_pairs_each_rounds_arms_and_takes_the_median_ratio():
    drains = [drain(1, 0, 10_000), drain(1, 16, 9_000), drain(2, 16, 12_000), drain(2, 0, 12_000),
              drain(3, 0, 8_000), drain(3, 16, 8_800)]  # fmt: skip
    said = summary(drains, 16)
    assert "per-round ratios 0.900, 1.000, 1.100; median 1.000 (+0.0 %)" in said
    assert "10000 jobs/s with no tab open, 9000 jobs/s with 16 tabs refreshing" in said


def test_it_is_a_part_of_the_bench_command():
    assert PARTS["dashboard-load"] == "labqueue.bench.dashboard_load"
