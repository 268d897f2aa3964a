"""The retention lab: the fake-clock runs with and without purge, the first purge of a big
queue by batch size, where freed pages go, the small walk, and the panel."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import retention

SHORT = retention.Setup(minutes=6, rate=5, retention=60.0, purge_every=30)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("retention")
    without = retention.simulate(
        retention.Setup(minutes=6, rate=5, retention=None), folder=folder, progress=False
    )
    with_ = retention.simulate(SHORT, folder=folder, progress=False)
    return folder, without, with_


def test_a_run_samples_every_simulated_minute(runs):
    _, without, with_ = runs
    for run in (without, with_):
        assert run.samples[retention.TIME_MIN].tolist() == [1, 2, 3, 4, 5, 6]
        assert (run.samples["claims"] > 0).all()
        assert (run.samples[retention.CLAIM_MS] > 0).all()
    assert len(without.purges) == 0 and without.live_kept
    assert len(with_.purges) == 6 * 60 // 30


def test_retention_removes_only_done_jobs_and_keeps_the_file_small(runs):
    _, without, with_ = runs
    assert with_.live_kept, "no purge changed the queued, running, dead or cancelled counts"
    live = [s for s in retention.LIVE_STATES]
    assert {s: with_.counts[s] for s in live} == {s: without.counts[s] for s in live}
    assert without.counts["dead"] > 0 and without.counts["running"] > 0 and without.counts["queued"] > 0
    assert with_.counts["done"] < without.counts["done"]
    assert with_.purges["removed"].sum() == without.counts["done"] - with_.counts["done"]
    assert with_.end_bytes < without.end_bytes
    assert with_.growth(2 / 3) < without.growth(2 / 3)


def test_compare_and_plot(runs):
    _, without, with_ = runs
    table = retention.compare(without, with_)
    assert list(table.index) == ["no retention", "retention 60 s, batch 1,000"]
    assert table.loc["no retention", "purges"] == 0
    fig = retention.plot_runs(without, with_)
    size, claim = fig.axes
    assert size.get_ylabel() == retention.SIZE_MB and claim.get_ylabel() == retention.CLAIM_MS
    assert claim.get_xlabel() == retention.TIME_MIN
    assert [line.get_label() for line in size.get_lines()] == list(table.index)


def test_the_first_purge_of_a_big_queue_by_batch_size(runs):
    folder, without, _ = runs
    table = retention.backlog_purges(without, (10, 100, 1000), retention=60.0, folder=folder)
    assert list(table.index) == [10, 100, 1000]
    assert table["live rows kept"].all()
    assert table["removed"].nunique() == 1 and table["removed"].iloc[0] > 1000
    windows = table["windows"].tolist()
    assert windows[0] > windows[1] > windows[2] >= 1, "a smaller batch takes more, shorter windows"
    assert (table["longest hold (ms)"] > 0).all()
    ax = retention.plot_holds(table).axes[0]
    assert ax.get_xlabel() == "batch (ids per write transaction)" and ax.get_ylabel() == "time (ms)"


def test_purged_pages_go_to_the_free_list_then_back_to_the_file_system(runs):
    folder, without, _ = runs
    steps = retention.space_steps(without, retention=60.0, folder=folder)
    ran, purged, reclaimed = steps.to_dict("records")
    assert ran["free pages"] == 0
    assert purged["pages"] == ran["pages"] and purged["free pages"] > 0
    assert purged["file on disk (bytes)"] == ran["file on disk (bytes)"], "a purge alone does not shrink it"
    assert reclaimed["free pages"] == 0
    assert reclaimed["pages"] == ran["pages"] - purged["free pages"]
    assert reclaimed["file on disk (bytes)"] < ran["file on disk (bytes)"]


def test_the_walk_keeps_live_and_recent_jobs_and_archives_on_request(tmp_path, capsys):
    found = retention.walk(tmp_path)
    assert found["left"] == [4, 5, 6, 7]
    assert found["archived"] == [2, 3]
    assert "never purged" in found["refused"]
    first, every = found["purges"]
    assert (first.removed, first.archived, every.removed, every.archived) == (1, 0, 2, 2)
    out = capsys.readouterr().out
    assert "purge(3600) -> removed=1 archived=0 windows=1" in out
    assert "job 2 email   dead      finished_at=0" in out.split("in jobs_archive:")[1]


@pytest.mark.parametrize(
    "setup",
    [
        retention.Setup(minutes=0),
        retention.Setup(rate=0),
        retention.Setup(batch=0),
        retention.Setup(retention=-1.0),
        retention.Setup(purge_every=2.5),
    ],
)
def test_bad_settings_are_named(tmp_path, setup):
    with pytest.raises(InvalidArgument, match=r"minutes|rate|batch|retention|purge_every"):
        retention.simulate(setup, folder=tmp_path, progress=False)


def test_bad_batch_for_the_backlog_is_named(runs):
    folder, without, _ = runs
    with pytest.raises(InvalidArgument, match="batch"):
        retention.backlog_purges(without, (0,), folder=folder)


def test_panel_reruns_with_its_settings(runs):
    folder, without, with_ = runs
    panel = retention.retention_panel(without, with_, folder=folder)
    assert "the runs above" in panel.status.value and panel.picture.value
    before = panel.picture.value
    panel.controls["retention"].value = 120
    panel.controls["batch"].value = 100
    assert panel.controls["minutes"].value == 6, "the panel starts at the runs' length"
    panel.button.click()
    assert panel.status.value.startswith("retention 120 s, batch 100, 6 min: file "), panel.status.value
    assert "backlog purge of" in panel.status.value
    assert "retention 120 s, batch 100" in panel.table.value
    assert panel.picture.value != before
    assert not panel.button.disabled


def test_the_purge_reads_one_window_of_ids(tmp_path):
    plan = retention.purge_plan(tmp_path)
    assert plan[0] == "SEARCH jobs USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)", plan
