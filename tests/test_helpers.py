"""FakeClock, db_path and KeepAlive."""

from __future__ import annotations

import threading
import time

import pytest

from labqueue import FakeClock, InvalidArgument, JobQueue, KeepAlive
from labqueue.lab import db_path
from labqueue.lab.scratch import SCRATCH_ENV


def test_fake_clock_moves_only_by_hand():
    clock = FakeClock(5.0)
    assert clock() == 5.0
    assert clock.advance(2.5) == 7.5
    clock.now = 1.0
    assert clock() == 1.0


def test_db_path_gives_a_fresh_file_without_its_wal_and_shm(tmp_path):
    path = db_path("lab", tmp_path)
    q = JobQueue(path)
    q.enqueue("t", {})
    assert path.exists()
    again = db_path("lab", tmp_path)
    assert again == path
    assert not any(p.exists() for p in (path, path.with_name("lab.db-wal"), path.with_name("lab.db-shm")))
    q.close()


def test_db_path_defaults_to_the_work_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path / "scratch"))
    assert db_path("x") == tmp_path / "scratch" / "x.db"


def test_the_work_folder_is_made_when_first_asked_for(tmp_path, monkeypatch):
    """A notebook opened first in a fresh clone writes its scratch files there at once."""
    from labqueue.demo.scratch import work_folder

    monkeypatch.delenv(SCRATCH_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert work_folder() == tmp_path / "work" and (tmp_path / "work").is_dir()


def test_work_folder_is_git_ignored():
    from pathlib import Path

    ignored = (Path(__file__).parents[1] / ".gitignore").read_text().split()
    assert "work/" in ignored


def test_keepalive_beats_from_its_own_thread_and_stops(tmp_path, clock):
    path = tmp_path / "keep.db"
    q = JobQueue(path, lease_seconds=30, clock=clock)
    q.enqueue("t", {})
    (job,) = q.claim("w")
    ticks = threading.Event()

    def ticking_clock():
        ticks.set()
        return clock()

    with KeepAlive(path, job, lease_seconds=30, interval=0.01, clock=ticking_clock) as hb:
        deadline = time.monotonic() + 10
        while hb.beats < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        clock.advance(100)  # later beats push the deadline to 1100 + 30
        beats_then = hb.beats
        while hb.beats == beats_then and time.monotonic() < deadline:
            time.sleep(0.01)
    assert hb.beats >= 4 and not hb.lost.is_set()
    assert q.db.execute("SELECT visible_at FROM jobs").fetchone()[0] == 1130.0
    stopped_at = hb.beats
    time.sleep(0.05)
    assert hb.beats == stopped_at  # the thread has ended


def test_keepalive_sets_lost_when_the_lease_is_taken(tmp_path, clock):
    path = tmp_path / "lost.db"
    q = JobQueue(path, lease_seconds=30, clock=clock)
    q.enqueue("report", {})
    (job,) = q.claim("first")
    clock.advance(31)
    q.claim("second")  # the lease has changed hands
    with KeepAlive(path, job, lease_seconds=30, interval=0.01, clock=clock) as hb:
        assert hb.lost.wait(10)
    assert hb.beats == 0 and hb.error is None


def test_keepalive_real_clock_holds_a_short_lease(tmp_path):
    """Real time: while the heartbeat runs, nobody else can claim the job."""
    path = tmp_path / "real.db"
    with JobQueue(path, lease_seconds=0.5) as holder, JobQueue(path, lease_seconds=0.5) as rival:
        holder.enqueue("report", {})
        (job,) = holder.claim("holder")
        with KeepAlive(path, job, lease_seconds=0.5, interval=0.05) as hb:
            end = time.monotonic() + 1.2  # more than two lease lengths
            while time.monotonic() < end:
                assert rival.claim("rival") == []
                time.sleep(0.05)
    assert not hb.lost.is_set() and hb.beats >= 5


def test_keepalive_refuses_a_bad_interval(tmp_path, clock):
    q = JobQueue(tmp_path / "i.db", clock=clock)
    q.enqueue("t", {})
    (job,) = q.claim("w")
    with pytest.raises(InvalidArgument, match=r"interval .*-1"):
        KeepAlive(tmp_path / "i.db", job, lease_seconds=30, interval=-1)
    with pytest.raises(InvalidArgument, match=r"lease_seconds .*0"):
        KeepAlive(tmp_path / "i.db", job, lease_seconds=0)
