"""Wake-up hints are only hints: they end a wait early, and the database stays the truth.

Behaviour only: a wait's timeout is either long (a hint must end it) or tiny (nothing
comes); no test asserts how long anything took."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from labqueue import JobQueue, wakeup
from labqueue.bench import wakeup as bench
from labqueue.wakeup import Waiter, notify, wake_folder

pytestmark = pytest.mark.skipif(wakeup.AF_UNIX is None, reason="no Unix datagram sockets here")

LONG = 60.0  # a wait that only a hint (or a broken test) ends
NOTHING = 0.01  # a wait that nothing should end

# Each child prints one line when its Waiter is bound, so the parent knows it can be reached.
WAITER = """
import sys, time
from labqueue.wakeup import Waiter
with Waiter(sys.argv[1]) as waiter:
    print(waiter.path, flush=True)
    time.sleep(600)
"""
NOTIFIER = "import sys; from labqueue.wakeup import notify; print(notify(sys.argv[1]))"
CLAIMER = """
import json, sys
from labqueue import JobQueue
from labqueue.wakeup import Waiter
db, name, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
with JobQueue(db) as q, Waiter(db) as waiter:
    print("ready", flush=True)
    woke = waiter.wait(timeout)
    print(json.dumps({"woke": woke, "claimed": [job.id for job in q.claim(name)]}), flush=True)
"""
SAFETY_POLLER = """
import json, sys, time
from labqueue import JobQueue
from labqueue.wakeup import Waiter
db, name = sys.argv[1], sys.argv[2]
hints = []
with JobQueue(db) as q, Waiter(db) as waiter:
    print("ready", flush=True)
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        jobs = q.claim(name) if q.any_ready() else []
        if jobs:
            break
        hints.append(waiter.wait(0.05))
print(json.dumps({"hints": hints, "claimed": [job.id for job in jobs]}), flush=True)
"""


def start(code: str, *args: object) -> subprocess.Popen:
    """A child Python running `code`, after its first line (it is ready) has been read."""
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True)
    proc.first_line = proc.stdout.readline().strip()  # type: ignore[attr-defined]
    assert proc.first_line, "the child ended before it was ready"  # type: ignore[attr-defined]
    return proc


def last_line(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=LONG + 30)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path (pytest's tmp_path can be too long for socket paths)."""
    folder = Path(tempfile.mkdtemp(prefix="lqw-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def db(short_tmp) -> Path:
    return short_tmp / "jobs.db"


# -- hints -------------------------------------------------------------------------------


def test_a_wait_ends_with_true_when_another_process_notifies(db):
    with Waiter(db) as waiter:
        assert waiter.active
        out = subprocess.run([sys.executable, "-c", NOTIFIER, str(db)], capture_output=True, text=True)
        assert out.stdout.strip() == "1"
        assert waiter.wait(LONG) is True


def test_a_wait_without_a_notify_ends_with_false_at_its_timeout(db):
    with Waiter(db) as waiter:
        assert waiter.wait(NOTHING) is False
        assert waiter.wait(0) is False


def test_notify_without_waiters_or_folder_does_nothing(db):
    assert notify(db) == 0
    assert not wake_folder(db).exists()  # a producer never creates the folder
    with Waiter(db):
        pass
    assert wake_folder(db).exists() and list(wake_folder(db).iterdir()) == []  # its socket went with it
    assert notify(db) == 0


def test_the_folder_is_beside_the_database_and_this_users_alone(db):
    with Waiter(db) as waiter:
        assert waiter.folder == Path(f"{db.resolve()}.wake")
        assert stat.S_IMODE(waiter.folder.stat().st_mode) == 0o700
        assert waiter.path.parent == waiter.folder


def test_many_notifications_coalesce_into_one_wake_up(db):
    with Waiter(db) as waiter:
        for _ in range(50):  # more than a socket buffer holds: the rest are dropped, harmlessly
            assert notify(db) == 1
        assert waiter.wait(LONG) is True
        assert waiter.wait(NOTHING) is False


def test_every_waiter_of_the_database_gets_the_hint_and_no_other(short_tmp, db):
    other = short_tmp / "other.db"
    with Waiter(db) as first, Waiter(db) as second, Waiter(other) as elsewhere:
        assert notify(db) == 2
        assert first.wait(LONG) and second.wait(LONG)
        assert elsewhere.wait(NOTHING) is False


def test_a_killed_waiters_socket_is_removed_by_the_next_notify(db):
    proc = start(WAITER, db)
    socket_file = Path(proc.first_line)  # type: ignore[attr-defined]
    proc.kill()  # SIGKILL: no cleanup runs
    proc.wait()
    assert socket_file.exists()
    with Waiter(db) as live:
        assert notify(db) == 1  # the live one only
        assert not socket_file.exists()
        assert live.wait(LONG) is True


def test_a_waiter_whose_socket_was_removed_binds_a_new_one(db):
    with Waiter(db) as waiter:
        shutil.rmtree(waiter.folder)
        assert waiter.wait(0) is False  # a timeout notices, and binds again
        assert waiter.active and waiter.path.exists()
        assert notify(db) == 1
        assert waiter.wait(LONG) is True


def test_a_path_too_long_for_a_socket_uses_a_short_folder_in_the_temp_dir(tmp_path):
    db = tmp_path / ("d" * 120) / "jobs.db"
    db.parent.mkdir()
    folder = wake_folder(db)
    assert folder.parent == Path(tempfile.gettempdir())
    assert wake_folder(db.parent / ".." / db.parent.name / "jobs.db") == folder  # same file, same folder
    try:
        with Waiter(db) as waiter:
            assert waiter.active
            assert notify(db) == 1
            assert waiter.wait(LONG) is True
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- falling back to polling ----------------------------------------------------------------


def test_without_unix_sockets_a_wait_sleeps_its_timeout_and_notify_does_nothing(monkeypatch, db):
    monkeypatch.setattr(wakeup, "AF_UNIX", None)
    naps: list[float] = []
    with Waiter(db, sleep=naps.append) as waiter:
        assert not waiter.active
        assert notify(db) == 0
        assert waiter.wait(0.25) is False
    assert naps == [0.25]
    assert not wake_folder(db).exists()


def test_a_folder_that_cannot_be_created_means_polling(short_tmp):
    (short_tmp / "a_file").write_text("")
    db = short_tmp / "a_file" / "jobs.db"
    naps: list[float] = []
    with Waiter(db, sleep=naps.append) as waiter:
        assert not waiter.active
        assert waiter.wait(0.5) is False
    assert naps == [0.5]
    assert notify(db) == 0


def test_a_folder_open_to_others_is_not_used(db):
    wake_folder(db).mkdir(mode=0o755)
    wake_folder(db).chmod(0o755)  # whatever the umask
    naps: list[float] = []
    with Waiter(db, sleep=naps.append) as waiter:
        assert not waiter.active
    assert notify(db) == 0


def test_a_url_is_not_a_file_and_gets_no_folder():
    assert wake_folder("postgresql://app@db.example/jobs") is None
    assert notify("postgresql://app@db.example/jobs") == 0
    assert not Waiter("postgresql://app@db.example/jobs", sleep=lambda s: None).open().active


# -- the database stays the truth -----------------------------------------------------------


def test_a_hint_to_two_workers_never_hands_one_job_out_twice(db):
    JobQueue(db).close()
    workers = [start(CLAIMER, db, f"w{i}", LONG) for i in range(2)]
    with JobQueue(db, wake=False) as q:  # the hint is sent by hand below
        job_id = q.enqueue("task", {})
    assert notify(db) == 2
    results = [last_line(proc) for proc in workers]
    assert [r["woke"] for r in results] == [True, True]
    assert sorted(r["claimed"] for r in results) == [[], [job_id]]


def test_a_lost_hint_still_gets_the_job_picked_up_by_the_safety_poll(db):
    JobQueue(db).close()
    worker = start(SAFETY_POLLER, db, "w")
    with JobQueue(db, wake=False) as q:
        job_id = q.enqueue("task", {})  # and the notify is lost: never sent
    result = last_line(worker)
    assert result["claimed"] == [job_id]
    assert True not in result["hints"]


# -- the measurement runs ---------------------------------------------------------------------


def test_the_wakeup_bench_runs_every_mode_and_picks_up_every_job(short_tmp):
    results = bench.run(bench.Sizes(jobs=3, idle_seconds=0.1, max_gap=0.02), folder=short_tmp)
    rows = {row["mode"]: row for row in results["modes"]}
    assert sorted(rows) == sorted(mode.key for mode in bench.MODES)
    for row in rows.values():
        assert row["picked"] == row["jobs"] == 3
        assert row["idle_cpu_ms_per_s"] is not None
    text = bench.report(results)
    assert all(mode.label in text for mode in bench.MODES)


def test_the_wakeup_bench_measures_labqueue_worker_processes_too(short_tmp):
    sizes = bench.Sizes(jobs=3, idle_seconds=0.2, max_gap=0.02, real_worker=True)
    results = bench.run(sizes, folder=short_tmp)
    rows = {row["mode"]: row for row in results["modes"]}
    assert sorted(rows) == sorted(mode.key for mode in bench.MODES)
    for row in rows.values():
        assert row["picked"] == row["jobs"] == 3
        assert row["idle_cpu_ms_per_s"] is not None
    assert bench.report(results).startswith("measured on labqueue worker processes")
    command = bench.worker_command(bench.MODES_BY_KEY["poll_1s"], short_tmp / "q.db")
    assert command[-3:] == ["--no-wake", "--poll", "1.0"]


def test_nearest_rank_percentiles():
    assert bench.nearest_rank([], 0.95) is None
    assert bench.nearest_rank([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert bench.nearest_rank([float(n) for n in range(1, 21)], 0.95) == 19.0


def test_enqueue_itself_wakes_a_waiting_worker(db):
    JobQueue(db).close()
    worker = start(CLAIMER, db, "w", LONG)
    with JobQueue(db) as q:
        job_id = q.enqueue("task", {})
    assert last_line(worker) == {"woke": True, "claimed": [job_id]}


def test_a_delayed_job_wakes_nobody_and_wake_false_never_notifies(db):
    with JobQueue(db) as waiting, JobQueue(db) as q, JobQueue(db, wake=False) as quiet:
        assert waiting.listen()
        q.enqueue("later", {}, delay=60)  # not ready yet: the worker's wait ends by next_due()
        quiet.enqueue("task", {})
        assert waiting.wait_for_jobs(0.05) is False
        q.enqueue("task", {})
        assert waiting.wait_for_jobs(LONG) is True
