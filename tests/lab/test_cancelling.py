"""The cancelling lab: the version-1 upgrade, the fake-clock walk, KeepAlive, and the cancel board."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.drivers.sqlite import sql
from labqueue.lab import cancelling


def test_a_version_1_file_gains_the_cancelled_state_and_keeps_its_rows(tmp_path, capsys):
    lines = cancelling.upgrade_old_file(folder=tmp_path)
    assert lines[0] == "before: user_version 1, states ['queued', 'running', 'done', 'dead']"
    assert lines[1].startswith(f"after JobQueue(path): user_version {sql.SCHEMA_VERSION},")
    assert "'cancelled'" in lines[1]
    assert lines[2].split(":", 1)[1].strip() == lines[3].split(":", 1)[1].strip()
    assert capsys.readouterr().out.splitlines() == lines


def test_the_walk_cancels_queued_and_running_jobs_but_not_a_finished_one(tmp_path, capsys):
    assert cancelling.cancel_walk(folder=tmp_path) == {1: "cancelled", 2: "cancelled", 3: "done"}
    out = capsys.readouterr().out
    assert "heartbeat for job 2 -> False" in out and "settle -> ['cancelled', 'done']" in out
    assert "CannotCancel" in out and "ledger rows for jobs [3]" in out


def test_keepalive_notices_the_cancel(tmp_path):
    seen = cancelling.keepalive_notices(lease=0.3, cancel_after=0.1, folder=tmp_path)
    assert seen["cancelled while"] == "running" and seen["KeepAlive lost"] and seen["KeepAlive cancelled"]
    assert seen["state"] == "cancelled" and seen["completion accepted afterwards"] is False


def test_the_demo_story_ends_with_ledger_rows_for_done_jobs_only(tmp_path, capsys):
    board = cancelling.CancelBoard(folder=tmp_path)
    cancelling.demo(board)
    rows = board.rows()
    assert rows["state"].to_dict() == {1: "cancelled", 2: "cancelled", 3: "done", 4: "done", 5: "cancelled"}
    assert board.ledger() == {3: 1, 4: 1}
    assert rows.loc[1, "work done"] == "2/4 s" and rows.loc[5, "work done"] == "0/4 s"
    assert "heartbeat refused" in rows.loc[1, "what happened"]
    assert "report refused" in rows.loc[2, "what happened"]
    assert "never runs" in rows.loc[5, "what happened"]
    out = capsys.readouterr().out
    assert "t=5   w2 reports job 2 done: settle -> 'cancelled'" in out
    assert not board.busy()
    board.close()


def test_the_demo_replays_the_same_way(tmp_path, capsys):
    board = cancelling.CancelBoard(folder=tmp_path)
    cancelling.demo(board)
    first = capsys.readouterr().out
    cancelling.demo(board)
    assert capsys.readouterr().out == first
    board.close()


def test_cancel_says_why_it_cannot(tmp_path):
    board = cancelling.CancelBoard(jobs=1, workers=1, folder=tmp_path)
    assert board.cancel(7).startswith("cancel(7) -> JobNotFound")
    board.run_to_end()
    assert board.cancel(1).startswith("cancel(1) -> CannotCancel")
    assert board.ledger() == {1: 1}
    board.close()


def test_the_plot_shows_each_cancel(tmp_path, capsys):
    board = cancelling.CancelBoard(folder=tmp_path)
    cancelling.demo(board)
    ax = cancelling.plot_board(board).axes[0]
    assert ax.get_xlabel() == "fake time (s)" and ax.get_ylabel() == "job id"
    assert sum("cancel (" in t.get_text() for t in ax.texts) == 3
    board.close()


def test_the_panel_cancels_the_chosen_job_and_steps(tmp_path):
    board = cancelling.CancelBoard(jobs=3, workers=1, folder=tmp_path)
    panel = cancelling.cancel_panel(board)
    (choice, cancel, step, finish, fresh), status, table, log = (
        panel.children[0].children,
        *panel.children[1:],
    )
    assert list(choice.options) == [1, 2, 3] and "queued 3" in status.value
    step.click()
    choice.value = 1
    cancel.click()
    assert board.q.job(1).state == "cancelled" and "cancel(1)" in log.value
    assert "cancelled" in table.value
    finish.click()
    assert board.ledger() == {2: 1, 3: 1}
    fresh.click()
    assert "queued 3" in status.value and board.now == 0
    board.close()


@pytest.mark.parametrize("kwargs", [{"jobs": 0}, {"workers": 9}, {"work_seconds": 1.5}, {"beat_every": True}])
def test_bad_board_sizes_are_named(tmp_path, kwargs):
    with pytest.raises(InvalidArgument, match=r"jobs|workers|work_seconds|beat_every"):
        cancelling.CancelBoard(folder=tmp_path, **kwargs)
