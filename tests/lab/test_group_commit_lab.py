"""The group-commit lab of notebook 09: in-process drains at each batch size, and crashes
of real worker processes that count which jobs ran twice."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import group_commit as gc


def test_speed_runs_drain_every_job_at_every_size(tmp_path):
    runs = gc.measure_speed((1, 10), n_jobs=50, rounds=2, folder=tmp_path)
    assert sorted(runs["batch"]) == [1, 1, 10, 10]
    assert (runs["jobs"] == 50).all() and (runs["jobs_per_s"] > 0).all()
    table = gc.speed_summary(runs)
    assert list(table.index) == [1, 10] and table.loc[1, "x_batch_1"] == 1.0
    assert gc.paired_ratio(runs) > 0


def test_a_crash_re_runs_the_jobs_of_its_batch_up_to_the_crash(tmp_path):
    trials = gc.crash_trials((1, 4), trials=2, folder=tmp_path)
    assert [t.batch for t in trials] == [1, 1, 4, 4]
    for t in trials:
        assert t.first_exit == 1, "the first worker crashed"
        assert t.batch < t.crash_job <= 2 * t.batch, "the crash lands in the second batch"
        # the crashing job ran again, and so did those of its batch before it that were not
        # yet committed (all of them, unless the commit interval passed); later jobs ran once
        assert 1 <= t.reruns <= t.crash_job - t.batch
        assert t.runs[t.crash_job] == 2
        assert t.done_once
    table = gc.crash_summary(trials)
    assert (table["max_reruns"] <= table["bound"]).all()
    assert gc.crash_frame(trials)["done_once"].all()


def test_the_figure_has_two_labelled_panels(tmp_path):
    runs = gc.measure_speed((1, 2), n_jobs=20, rounds=1, folder=tmp_path)
    trials = gc.crash_trials((1, 2), trials=1, folder=tmp_path)
    fig = gc.plot(runs, trials)
    assert len(fig.axes) == 2
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


@pytest.mark.parametrize("sizes", [(), (0,), (1, "2"), (True,)])
def test_bad_batch_sizes_are_refused(sizes, tmp_path):
    with pytest.raises(InvalidArgument, match="batch sizes"):
        gc.measure_speed(sizes, folder=tmp_path)
    with pytest.raises(InvalidArgument, match="batch sizes"):
        gc.crash_trials(sizes, folder=tmp_path)


def test_the_handler_module_registers_its_kind():
    assert {gc.KIND: gc.recorded} == gc.HANDLERS


def test_cost_per_job_keeps_labqueue_and_the_tutorial_rows():
    profile = [
        {
            "contender": c,
            "label": c.upper(),
            "cpu_us_per_job": 1.0,
            "statements_per_job": 2.0,
            "write_transactions_per_job": 0.1,
            "wal_frames_per_job": 0.4,
        }
        for c in ("labqueue_b1", "labqueue_b10", "tutorial_l1", "floor_take")
    ]
    table = gc.cost_per_job({"profile": profile})
    assert list(table.index) == ["LABQUEUE_B1", "LABQUEUE_B10", "TUTORIAL_L1"]
    assert gc.cost_per_job({}).empty
