"""Named queues, schedules, wake-up hints, cancel and purge in the worker and the command:
turns between queues, schedules ticked by racing workers, waiting for a hint instead of
polling, `labqueue cancel` and `labqueue purge`."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labqueue import JobQueue
from labqueue import worker as worker_loop
from labqueue.errors import InvalidArgument
from labqueue.schedule import Every, Scheduler, parse_every
from labqueue.wakeup import wake_folder
from labqueue.worker import StopFlag


def cli(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labqueue", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def flood(path: Path) -> None:
    """40 high-priority bulk jobs, then 10 mail jobs of the default priority."""
    with JobQueue(path) as q:
        q.enqueue_many("t", [f"bulk-{n}" for n in range(40)], queue="bulk", priority=9)
        q.enqueue_many("t", [f"mail-{n}" for n in range(10)], queue="mail")


def run_order(path: Path, **settings) -> list[str]:
    ran: list[str] = []
    handlers = {"t": lambda job, q: ran.append(job.payload)}
    worker_loop.run(str(path), "w", 30, idle_exit=0, handlers=handlers, batch=1, wake=False, **settings)
    return ran


def test_strict_priorities_starve_a_queue_until_the_flood_is_over(tmp_path):
    path = tmp_path / "jobs.db"
    flood(path)
    ran = run_order(path, queues="bulk,mail", strict=True)
    assert [p.split("-")[0] for p in ran] == ["bulk"] * 40 + ["mail"] * 10


def test_turns_between_queues_serve_each_its_share_during_the_flood(tmp_path):
    path = tmp_path / "jobs.db"
    flood(path)
    ran = run_order(path, queues="bulk:3,mail:1")
    first_twenty = [p.split("-")[0] for p in ran[:20]]
    assert first_twenty.count("mail") == 5  # one turn in four, while both have work
    assert sorted(ran) == sorted([f"bulk-{n}" for n in range(40)] + [f"mail-{n}" for n in range(10)])


def test_a_worker_leaves_queues_it_does_not_serve_alone(tmp_path):
    path = tmp_path / "jobs.db"
    flood(path)
    assert len(run_order(path, queues=["mail"])) == 10
    with JobQueue(path) as q:
        assert q.counts()["queued"] == 40


def test_weights_without_turns_are_refused(tmp_path):
    with pytest.raises(InvalidArgument, match="set turns between several queues; --queues a:2 names one"):
        worker_loop.run(str(tmp_path / "jobs.db"), "w", 30, idle_exit=0, queues="a:2")
    with pytest.raises(InvalidArgument, match="--strict orders jobs by priority"):
        worker_loop.run(str(tmp_path / "jobs.db"), "w", 30, idle_exit=0, queues="a:2,b", strict=True)


# -- schedules ------------------------------------------------------------------------------


def test_racing_workers_enqueue_one_job_per_period(tmp_path):
    """Three workers tick the same 0.2 s schedule for about 1.5 s: one job per period."""
    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    stops = [StopFlag() for _ in range(3)]
    every = Every("tick", 0.2)
    threads = [
        threading.Thread(
            target=worker_loop.run,
            args=(str(path), f"w{n}", 30, None),
            kwargs={"stop": stop, "handlers": {"tick": lambda job, q: None}, "every": [every]},
        )
        for n, stop in enumerate(stops)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    for stop in stops:
        stop.requested = True
    for thread in threads:
        thread.join(timeout=30)
    with JobQueue(path) as q:
        jobs = q.jobs(kind="tick")
    keys = [job.dedupe_key for job in jobs]
    assert len(keys) == len(set(keys)) >= 5
    starts = sorted(float(key.rsplit(":", 1)[1]) for key in keys)
    assert all(round(b - a, 6) >= 0.2 - 1e-6 for a, b in itertools.pairwise(starts))
    assert {job.state for job in jobs} <= {"done", "queued", "running"}


def test_a_scheduler_ticks_once_per_period_it_sees():
    calls = []

    class Recorder:
        def every(self, kind, seconds, payload=None, **options):
            calls.append((kind, options["name"]))
            return len(calls)

    scheduler = Scheduler([Every("a", 10), Every("a", 60, name="a-hourly")])
    assert scheduler.tick(Recorder(), 100.0) == [1, 2]
    assert scheduler.tick(Recorder(), 105.0) == []
    assert scheduler.tick(Recorder(), 110.0) == [3]
    assert scheduler.next_tick(111.0) == pytest.approx(9.0)
    with pytest.raises(InvalidArgument, match="share the name 'a'"):
        Scheduler([Every("a", 10), Every("a", 20)])


@pytest.mark.parametrize("text", ["report", "=60", "report=0", "report=-1", "report=nan", "report=soon"])
def test_bad_every_options_are_refused(text):
    with pytest.raises(InvalidArgument, match="--every"):
        parse_every(text)


# -- waiting for a hint ---------------------------------------------------------------------


def wait_for(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def start_worker(path: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "labqueue", "worker", str(path), "--idle-exit", "60", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def sockets(path: Path) -> list[Path]:
    folder = wake_folder(path)
    return list(folder.glob("*.sock")) if folder is not None and folder.exists() else []


def test_an_idle_worker_waits_on_its_socket_and_a_producer_wakes_it(tmp_path):
    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    proc = start_worker(path, "--handlers", "labqueue.lab.demo_handlers")
    try:
        wait_for(lambda: sockets(path), "the worker's wake-up socket")
        job_id = cli("enqueue", path, "noop", "{}").stdout.strip()
        with JobQueue(path) as q:
            wait_for(lambda: q.job(int(job_id)).state == "done", "the job to be done")
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        assert sockets(path) == []  # removed on the way out
    finally:
        proc.kill()
        proc.communicate()


def test_no_wake_polls_and_binds_no_socket(tmp_path):
    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    proc = start_worker(path, "--no-wake", "--poll", "0.05", "--handlers", "labqueue.lab.demo_handlers")
    try:
        job_id = cli("enqueue", path, "noop", "{}").stdout.strip()
        with JobQueue(path) as q:
            wait_for(lambda: q.job(int(job_id)).state == "done", "the job to be done")
        assert sockets(path) == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.communicate()


# -- the command ----------------------------------------------------------------------------


def test_enqueue_with_priority_and_queue_then_cancel(tmp_path):
    path = tmp_path / "jobs.db"
    assert cli("enqueue", path, "t", "{}", "--priority", "5", "--queue", "mail").stdout == "1\n"
    assert cli("enqueue", path, "t", "-", "--queue", "bulk", stdin="{}\n{}\n").returncode == 0
    with JobQueue(path) as q:
        assert [(r.priority, r.queue) for r in q.jobs()] == [(5, "mail"), (0, "bulk"), (0, "bulk")]
        q.claim("w", queues=["bulk"])
    done = cli("cancel", path, "1", "2")
    assert done.returncode == 0 and done.stdout == "1 cancelled (was queued)\n2 cancelled (was running)\n"
    again = cli("cancel", path, "1", "3", "99")
    assert again.returncode == 1
    assert again.stdout == "3 cancelled (was queued)\n"
    assert "job 1 is cancelled already" in again.stderr and "no job has id 99" in again.stderr
    listed = cli("jobs", path, "--queue", "bulk", "--json").stdout.splitlines()
    assert [json.loads(line)["state"] for line in listed] == ["cancelled", "cancelled"]


def test_purge_removes_old_done_jobs_and_reports(tmp_path):
    path = tmp_path / "jobs.db"
    with JobQueue(path, clock=lambda: 1000.0) as q:
        q.enqueue_many("t", [{"n": n} for n in range(30)])
        while jobs := q.claim("w", limit=10):
            for job in jobs:
                q.complete(job)
        q.enqueue("t", "newest")
    result = cli("purge", path, "--older-than", "60", "--batch", "8", "--reclaim")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("removed 30 job(s) in 4 transaction(s), the longest ")
    assert lines[1].startswith("freed ")
    with JobQueue(path) as q:
        assert q.counts()["done"] == 0 and q.counts()["queued"] == 1
        assert q.space()["auto_vacuum"] == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (("worker", "DB", "--queues", "a:x"), "the weight of queue 'a' must be a whole number"),
        (("worker", "DB", "--queues", "a,a"), "names a more than once"),
        (("worker", "DB", "--queues", "a:2,b", "--strict"), "--strict orders jobs by priority"),
        (("worker", "DB", "--every", "report"), "--every needs KIND=DURATION"),
        (("enqueue", "DB", "t", "{}", "--priority", "x"), "expected a priority"),
        (("enqueue", "DB", "t", "{}", "--priority", str(2**31)), "priority must be a whole number from"),
        (("enqueue", "DB", "t", "{}", "--queue", ""), "a queue name cannot be empty"),
        (("purge", "DB"), "--older-than"),
        (("purge", "DB", "--older-than", "1", "--state", "queued"), "invalid choice: 'queued'"),
        (("cancel", "DB"), "say which jobs: their IDs, --queue NAME and/or --kind KIND, or --all"),
    ],
)
def test_bad_arguments_get_a_usage_error_and_change_nothing(tmp_path, args, message):
    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    before = path.read_bytes()
    result = cli(*(str(path) if a == "DB" else a for a in args))
    assert result.returncode == 2, result
    assert message in result.stderr
    assert path.read_bytes() == before


def test_a_worker_with_purge_after_removes_old_done_jobs(tmp_path):
    path = tmp_path / "jobs.db"
    with JobQueue(path, clock=lambda: 1000.0) as q:  # finished long ago
        q.enqueue_many("t", [{}] * 5)
        for job in q.claim("w", limit=5):
            q.complete(job)
        q.enqueue("t", "new")
    ran = []
    handlers = {"t": lambda job, q: ran.append(job.payload)}
    worker_loop.run(str(path), "w", 30, idle_exit=0, handlers=handlers, purge_after=3600)
    with JobQueue(path) as q:
        assert q.counts()["done"] == 1 and [r.payload for r in q.jobs()] == ['"new"']
    assert ran == ["new"]


def test_purge_after_reaches_every_pool_worker(tmp_path):
    proc = cli("worker", tmp_path / "jobs.db", "--purge-after", "-1")
    assert proc.returncode == 2 and "--purge-after" in proc.stderr


def test_a_job_cancelled_while_its_worker_runs_it_is_logged_and_the_worker_carries_on(tmp_path, caplog):
    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        first, second = q.enqueue("t", 1), q.enqueue("t", 2)

    def handler(job, q):
        if job.payload == 1:
            with JobQueue(path) as other:
                other.cancel(first)  # someone cancels it while it runs
        return lambda db: db.execute("CREATE TABLE IF NOT EXISTS effects (id)") and db.execute(
            "INSERT INTO effects VALUES (?)", (job.id,)
        )

    with caplog.at_level("INFO", logger="labqueue.worker"):
        handled = worker_loop.run(
            str(path), "w", 30, idle_exit=0, handlers={"t": handler}, batch=1, wake=False
        )
    assert handled == 2
    with JobQueue(path) as q:
        assert [q.job(first).state, q.job(second).state] == ["cancelled", "done"]
        assert [row[0] for row in q.db.execute("SELECT id FROM effects")] == [second]
    assert f"job {first} (t): it was cancelled while it ran; its result was discarded" in caplog.text
