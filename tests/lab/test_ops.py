"""The ops lab: counts that agree with SQL, the alert rules, the dashboard and its panel."""

from __future__ import annotations

import time

import pytest

from labqueue import FakeClock, InvalidArgument, JobQueue
from labqueue.lab import ops, walks


def test_read_counts_agree_on_the_tutorial_walk(tmp_path):
    q, _ = walks.ops_queue(tmp_path)
    stats, truth = ops.read_counts(q)
    assert stats == {"queued": 2, "running": 2, "ready_now": 2, "oldest_ready_age_s": 31.0, "dead": 1}
    assert ops.agrees(stats, truth)
    assert (truth["done"], truth["expired_leases"]) == (1, 1)
    assert not q.db.in_transaction
    table = ops.compare_counts(stats, truth)
    assert table.loc["expired_leases", "stats()"] == "" and table.loc["ready_now", "full-table SQL"] == 2
    q.close()


def test_agrees_notices_a_difference():
    truth = {"queued": 1, "running": 0, "ready_now": 1, "dead": 0}
    assert not ops.agrees({**truth, "dead": 1}, truth)


def test_jobs_table_shows_visibility_for_live_jobs_only(tmp_path):
    q, _ = walks.ops_queue(tmp_path)
    table = ops.jobs_table(q)
    assert list(table["state"]) == ["done", "dead", "running", "running", "queued", "queued"]
    assert table.loc[5, "visible_in_s"] == -31.0 and table.loc[6, "visible_in_s"] == 569.0
    assert table["visible_in_s"].isna().tolist()[:2] == [True, True]
    q.close()


@pytest.mark.parametrize(
    "stats, expected",
    [
        ({"queued": 5, "running": 1, "ready_now": 5, "oldest_ready_age_s": 2.0, "dead": 0}, []),
        ({"queued": 5, "running": 1, "ready_now": 5, "oldest_ready_age_s": 90.0, "dead": 0}, ["backlog"]),
        ({"queued": 0, "running": 0, "ready_now": 0, "oldest_ready_age_s": 0.0, "dead": 2}, ["dead jobs"]),
        (
            {"queued": 1, "running": 3, "ready_now": 3, "oldest_ready_age_s": 1.0, "dead": 0},
            ["expired leases"],
        ),
    ],
)
def test_alerts(stats, expected):
    found = ops.alerts(stats, max_age_s=60)
    assert [a.split(":")[0] for a in found] == expected
    if expected == ["expired leases"]:
        assert "at least 2" in found[0]


def test_fill_demo_queue_shuffles_reproducibly(tmp_path):
    mix = {"credit": 3, "bad": 2, "noop": 4}
    first = ops.fill_demo_queue(tmp_path / "a.db", mix, seed=1)
    second = ops.fill_demo_queue(tmp_path / "b.db", mix, seed=1)
    kinds = []
    for path in (first, second):
        with JobQueue(path, schema=None) as q:
            jobs = q.db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
            kinds.append([job["kind"] for job in jobs])
            assert {job["max_attempts"] for job in jobs} == {ops.DEMO_MAX_ATTEMPTS}
            assert q.db.execute("SELECT * FROM ledger").fetchall() == []
    assert kinds[0] == kinds[1] and sorted(kinds[0]) == sorted(k for k, n in mix.items() for _ in range(n))


def test_fill_demo_queue_rejects_unknown_kinds_and_bad_counts(tmp_path):
    with pytest.raises(InvalidArgument, match="'nope'"):
        ops.fill_demo_queue(tmp_path / "x.db", {"nope": 1})
    with pytest.raises(InvalidArgument, match="-1"):
        ops.fill_demo_queue(tmp_path / "y.db", {"noop": -1})


def test_dashboard_rejects_bad_settings(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.db"):
        ops.Dashboard(tmp_path / "missing.db")
    path = ops.fill_demo_queue(tmp_path / "q.db", {"noop": 1})
    with pytest.raises(InvalidArgument, match="0"):
        ops.Dashboard(path, workers=0)
    with pytest.raises(InvalidArgument, match=r"interval.*-1"):
        ops.Dashboard(path, interval=-1)
    with pytest.raises(InvalidArgument, match=r"lease_seconds.*0"):
        ops.Dashboard(path, lease_seconds=0)


def _queue_with_a_dead_job(tmp_path):
    path = ops.fill_demo_queue(tmp_path / "q.db", {"noop": 2})
    clock = FakeClock(time.time())  # the demo queue is filled on the real clock
    with JobQueue(path, clock=clock, schema=None) as q:
        (job,) = q.claim("ops-lab")
        q.fail(job, "ValueError: bad payload", retry=False)
    return path, clock


def test_panel_renders_at_once_and_requeue_button_puts_dead_jobs_back(tmp_path):
    path, clock = _queue_with_a_dead_job(tmp_path)
    dash = ops.Dashboard(path, clock=clock)
    box = ops.dashboard_panel(dash)
    assert len(box.image.value) > 0 and "dead" in box.status.value
    assert dash.samples[-1].dead == 1 and dash.samples[-1].agrees_with_sql
    clock.advance(2)
    box.buttons["requeue"].click()
    assert dash.samples[-1].dead == 0 and dash.samples[-1].queued == 2
    assert dash.events == [(2.0, "requeue_dead(): 1")]
    assert "requeued 1" in box.status.value
    box.buttons["refresh"].click()
    assert len(dash.history()) == 3 and dash.history()["agrees_with_sql"].all()


def test_live_toggle_refreshes_in_the_background(tmp_path):
    dash = ops.Dashboard(ops.fill_demo_queue(tmp_path / "q.db", {"noop": 1}), interval=0.02)
    box = ops.dashboard_panel(dash)
    box.live.value = True
    deadline = time.monotonic() + 10
    while len(dash.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    box.live.value = False
    assert len(dash.samples) >= 3


def test_live_refresh_ends_by_itself_when_nothing_is_left_to_watch(tmp_path):
    dash = ops.Dashboard(ops.fill_demo_queue(tmp_path / "q.db", {}), interval=0.02)
    box = ops.dashboard_panel(dash)
    box.live.value = True
    deadline = time.monotonic() + 10
    while box.live.value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not box.live.value and dash._live is None


def test_plot_history_labels_and_marks_the_requeue():
    import pandas as pd

    history = pd.DataFrame(
        {"t": [0.0, 1.0], "queued": [2, 0], "running": [0, 1], "ready_now": [2, 0], "dead": [0, 1]}
    )
    fig = ops.plot_history(history, [(0.5, "requeue_dead(): 1")])
    ax = fig.axes[0]
    assert ax.get_ylabel() == "jobs" and "(s)" in ax.get_xlabel()
    assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == list(
        ops.SERIES
    )
    assert any(t.get_text() == "requeue_dead(): 1" for t in ax.texts)
    assert ops.history_png(history)[:4] == b"\x89PNG"


@pytest.mark.slow
def test_real_workers_drain_the_mix_and_requeued_bad_jobs_die_again(tmp_path):
    mix = {"credit": 6, "noop": 6, "bad": 2}
    path = ops.fill_demo_queue(tmp_path / "q.db", mix, max_attempts=2)
    dash = ops.Dashboard(path, workers=2, interval=0.05)
    try:
        box = ops.dashboard_panel(dash)
        first = dash.run_until_drained(timeout=60, progress=False)
        assert (first.done, first.dead) == (12, 2)
        by_kind, ledger = dash.results()
        assert by_kind.loc["bad", "dead"] == 2 and by_kind.loc["credit", "done"] == 6
        assert len(ledger) == 6 and set(ledger.values()) == {1}
        assert len(dash.requeue_dead()) == 2
        again = dash.run_until_drained(timeout=60, progress=False)
        assert (again.done, again.dead) == (12, 2)
        assert dash.history()["agrees_with_sql"].all()
        box.buttons["stop"].click()
        assert dash.alive() == 0 and not box.live.value
    finally:
        dash.close()


def test_an_interrupted_drain_stops_the_workers_it_started(tmp_path, monkeypatch):
    dash = ops.Dashboard(ops.fill_demo_queue(tmp_path / "q.db", {"noop": 50}), workers=2, interval=0.02)
    real_refresh = dash.refresh

    def interrupted_refresh():
        if dash.alive():
            raise KeyboardInterrupt  # the learner interrupts the kernel while the cell waits
        return real_refresh()

    try:
        monkeypatch.setattr(dash, "refresh", interrupted_refresh)
        with pytest.raises(KeyboardInterrupt):
            dash.run_until_drained(timeout=60, progress=False)
        assert dash.alive() == 0 and dash.procs == [], "no worker is left running"
    finally:
        dash.close()


def test_the_queue_table_agrees_with_a_full_scan_per_named_queue(tmp_path):
    path = ops.fill_demo_queue(tmp_path / "jobs.db", {"credit": 3, "noop": 2}, seed=1)
    with JobQueue(path) as q:
        q.claim("w", queues=["payments"])
        table = ops.queue_table(q)
    assert list(table.index) == ["default", "payments"]
    assert table.loc["payments", "queued"] == 2 and table.loc["payments", "running"] == 1
    assert table.loc["default", "ready_now"] == 2
    assert table["agrees with SQL"].all()


def test_commands_run_in_process_with_their_exit_code_and_output(tmp_path):
    path = str(tmp_path / "ops.db")
    ops.fill_demo_queue(path, {"noop": 3}, seed=0)
    stats = ops.command("stats", path, "--format", "prometheus")
    assert stats.exit_code == 0 and ops.metric_lines(stats.out, "labqueue_jobs")
    assert ops.command("health", path, "--max-dead", "0").exit_code == 0
    missing = ops.command("health", str(tmp_path / "missing.db"))
    assert missing.exit_code != 0 and "no such file" in missing.out + missing.err


def test_the_pause_demo_leaves_the_paused_queue_alone_until_resume(tmp_path):
    demo = ops.pause_demo(tmp_path / "pause.db", per_queue=3)
    assert demo.pause.exit_code == 0 and demo.resume.exit_code == 0
    assert demo.paused_run == {"default": 3, "payments": 0}
    assert demo.resumed_run == {"default": 3, "payments": 3}
