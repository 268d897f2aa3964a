"""The wake-up lab: the benchmark's measurement at a small size, its table, plot and panel."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.bench import wakeup as bench
from labqueue.lab import wake

TINY = bench.Sizes(jobs=3, idle_seconds=0.2, max_gap=0.02, seed=1)


def fake_results() -> dict:
    """What measure() returns, with made-up figures (no processes)."""
    rows = []
    for mode, latencies, cpu in (
        ("poll_50ms", [5.0, 20.0, 40.0], 3.0),
        ("poll_1s", [100.0, 500.0, 900.0], 0.3),
        ("wakeup", [0.3, 0.5, 1.2], 0.2),
    ):
        rows.append(
            {
                "mode": mode,
                "label": bench.MODES_BY_KEY[mode].label,
                "jobs": 3,
                "picked": 3,
                "latencies_ms": latencies,
                "median_ms": latencies[1],
                "p95_ms": latencies[2],
                "max_ms": latencies[2],
                "idle_seconds": 1.0,
                "idle_cpu_ms_per_s": cpu,
            }
        )
    return {"sizes": vars(TINY), "when": 0.0, "machine": {"cpus": 1, "load_1min_after": 0.0}, "modes": rows}


def test_table_and_plot():
    results = fake_results()
    table = wake.table(results)
    assert list(table.index) == [m.label for m in bench.MODES]
    assert table.loc[bench.MODES_BY_KEY["wakeup"].label, "median (ms)"] == 0.5
    ax = wake.plot_latency(results).axes[0]
    assert (
        ax.get_xscale() == "log"
        and ax.get_xlabel().startswith("pick-up latency")
        and ax.get_ylabel() == "jobs"
    )


def test_the_panel_shows_the_last_run():
    panel = wake.wake_panel(fake_results())
    (jobs, _idle, _go), status, picture, numbers = panel.children[0].children, *panel.children[1:]
    assert jobs.value == jobs.min and status.value.startswith("Last run: 3 jobs") and picture.value
    assert "wake-up hint" in numbers.value


@pytest.mark.slow
def test_a_small_live_measurement_picks_up_every_job(tmp_path):
    results = wake.measure(TINY, folder=tmp_path, progress=False)
    ways = wake.by_mode(results)
    assert set(ways) == {"poll_50ms", "poll_1s", "wakeup"}
    assert all(way["picked"] == 3 and len(way["latencies_ms"]) == 3 for way in ways.values())


@pytest.mark.parametrize(
    "sizes", [bench.Sizes(jobs=0), bench.Sizes(idle_seconds=0), bench.Sizes(max_gap=1e9)]
)
def test_bad_sizes_are_named(tmp_path, sizes):
    with pytest.raises(InvalidArgument, match=r"jobs|idle_seconds|max_gap"):
        wake.measure(sizes, folder=tmp_path, progress=False)


def test_the_saved_worker_run_is_quoted_as_readme_quotes_it(tmp_path):
    from labqueue.bench import published

    text = wake.saved_worker_run()
    assert text == published.render("wakeup")
    assert "with hints" in text and "bench_wakeup_worker.json" in text
    assert "tasks.py bench wakeup --real-worker" in wake.saved_worker_run(tmp_path)  # nothing saved there
