"""The schedules lab: the fake-clock walk and the race of scheduler threads."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import schedules

SMALL = schedules.RaceConfig(
    schedulers=3, period=0.1, seconds=1.0, tick_every=0.02, crash_at=0.3, downtime=(0.4, 0.75)
)


def test_the_walk_makes_one_job_per_period_and_skips_the_missed_ones(tmp_path, capsys):
    ticks = schedules.schedule_walk(folder=tmp_path)
    assert [job_id for _, _, job_id in ticks if job_id is not None] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "every:report:1200" in out and "every:report:1500" in out and "1320" not in out.split("jobs:")[1]


def test_racing_schedulers_make_exactly_one_job_per_ticked_period(tmp_path):
    result = schedules.race(SMALL, folder=tmp_path, progress=False)
    periods = result.periods()
    ticked = periods[periods["tick attempts"] > 0]
    assert (ticked["jobs"] == 1).all()
    assert periods.loc[periods["tick attempts"] == 0, "jobs"].sum() == 0
    assert len(result.jobs) == len(ticked) and result.jobs["dedupe_key"].is_unique
    assert set(result.ticks["scheduler"]) <= {"s1", "s2", "s3"} and "s1" in result.crashed
    assert "tick attempts" in result.summary()


def test_the_race_catches_a_tick_without_a_dedupe_key(tmp_path):
    result = schedules.race(
        SMALL,
        folder=tmp_path,
        progress=False,
        tick=lambda q, c: q.enqueue(schedules.KIND, None, dedupe_key=None),
    )
    assert len(result.jobs) == len(result.ticks), "every tick made a job of its own"
    assert result.periods()["jobs"].sum() == 0, "none of them is a period's job"


def test_the_plot_and_the_panel(tmp_path):
    result = schedules.race(SMALL, folder=tmp_path, progress=False)
    ax = schedules.plot_race(result).axes[0]
    assert ax.get_xlabel().startswith("time since the start (s)") and ax.get_ylabel() == "scheduler"
    panel = schedules.race_panel(result, folder=tmp_path)
    (count, period, length, go), status, picture = panel.children[0].children, *panel.children[1:]
    assert status.value.startswith("Last run: 3 schedulers") and picture.value
    count.value, period.value, length.value = 2, 0.2, 1.0
    go.click()
    assert status.value.startswith("2 schedulers, period 0.2 s, 1 s:"), status.value


@pytest.mark.parametrize(
    "kwargs", [{"schedulers": 0}, {"period": 0}, {"seconds": "3"}, {"tick_every": 100}, {"downtime": (2, 1)}]
)
def test_bad_race_settings_are_named(kwargs):
    with pytest.raises(InvalidArgument, match=r"schedulers|period|seconds|tick_every|downtime"):
        schedules.RaceConfig(**kwargs)


@pytest.mark.slow
def test_worker_processes_tick_the_schedule_once_per_period(tmp_path):
    jobs = schedules.pool_schedule(workers=2, period=0.3, seconds=1.5, folder=tmp_path)
    assert len(jobs) >= 4 and jobs["dedupe_key"].is_unique  # 1.5 s from the first: five periods
    starts = list(jobs["period starts at (s)"])
    assert starts == sorted(set(starts)), "one job per period, in order"
    assert set(jobs["state"]) <= {"queued", "running", "done"}


def test_a_pool_needs_a_sensible_size(tmp_path):
    with pytest.raises(InvalidArgument, match="workers"):
        schedules.pool_schedule(workers=0, folder=tmp_path)
