"""Real processes: racing claimers, crashed and poisoned workers, kill_tree, warm stops."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from labqueue import JobQueue, kill_tree
from labqueue.lab import DEMO_HANDLERS, start_demo_worker
from labqueue.procs import worker_command, worker_environment

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout=30.0, every=0.02):
    """Poll until predicate() is truthy; fail loudly instead of hanging."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"gave up after {timeout} s waiting for {predicate}")


JOB_BY_ID = "SELECT * FROM jobs WHERE id = ?"


def job_row(q, job_id=1):
    return q.db.execute(JOB_BY_ID, (job_id,)).fetchone()


def claim_everything(path, name, start, out):
    """Connect, wait at the barrier with the others, then claim batches of 1 to 3 and
    complete them until the queue is empty. Sends back the ids it finished."""
    with JobQueue(path, lease_seconds=600) as q:
        start.wait(120)
        finished = []
        while batch := q.claim(name, limit=1 + len(finished) % 3):
            for job in batch:
                assert q.complete(job)
                finished.append(job.id)
    out.put(finished)


def test_eight_processes_claim_2000_jobs_with_no_duplicate_and_none_missed(tmp_path):
    path = str(tmp_path / "race.db")
    with JobQueue(path) as q:
        q.enqueue_many("t", [{}] * 2000)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(8 + 1)
    racers = [ctx.Process(target=claim_everything, args=(path, f"w{n}", start, out)) for n in range(8)]
    for racer in racers:
        racer.start()
    start.wait(120)  # all eight are connected: they begin together
    claimed = list(itertools.chain.from_iterable(out.get(timeout=120) for _ in racers))
    for racer in racers:
        racer.join(30)
    assert len(claimed) == len(set(claimed)) == 2000
    assert sorted(claimed) == list(range(1, 2001))
    with JobQueue(path) as q:
        tally = q.db.execute("SELECT state, attempts, COUNT(*) FROM jobs GROUP BY state, attempts")
        assert [tuple(r) for r in tally] == [("done", 1, 2000)]


def test_a_killed_workers_job_is_taken_over_after_one_lease(tmp_path):
    path = tmp_path / "crash.db"
    lease = 1.0
    q = JobQueue(path)
    q.enqueue("report", {"stall_first_attempt": True, "work_seconds": 0.05})
    w1 = start_demo_worker(path, "w1", lease)
    first = wait_for(lambda: (r := job_row(q))["state"] == "running" and r)
    kill_tree(w1)
    assert w1.returncode != 0
    w2 = start_demo_worker(path, "w2", lease, idle_exit=lease + 2)
    done = wait_for(lambda: (r := job_row(q))["state"] == "done" and r)
    assert w2.wait(30) == 0
    assert (first["worker"], first["attempts"]) == ("w1", 1)
    assert (done["worker"], done["attempts"]) == ("w2", 2)
    # w2's claim came no earlier than the end of w1's lease
    assert done["visible_at"] - lease >= first["visible_at"]
    q.close()


def test_a_poison_job_is_dead_after_max_attempts_worker_deaths(tmp_path):
    path = tmp_path / "poison.db"
    q = JobQueue(path, max_attempts=3)
    q.enqueue("poison", {})
    exit_codes = []
    for n in range(6):
        # each worker waits out the previous lease, claims, and dies in the handler
        env = worker_environment(path, f"w{n}", 0.3, 1.0, handlers=[DEMO_HANDLERS])
        proc = subprocess.run(worker_command(), env=env, timeout=60)
        exit_codes.append(proc.returncode)
        if job_row(q)["state"] == "dead":
            break
    r = job_row(q)
    assert exit_codes == [1, 1, 1, 0]
    assert (r["attempts"], r["state"], r["last_error"]) == (3, "dead", "lease expired on the last attempt")
    q.close()


GRANDPARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; "
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print(g.pid, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    grandchild = child.stdout.readline().strip()
    print(child.pid, grandchild, flush=True)
    time.sleep(120)
    """
)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_kill_tree_ends_the_grandchildren_too(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", GRANDPARENT], stdout=subprocess.PIPE, text=True)
    child, grandchild = map(int, proc.stdout.readline().split())
    killed = kill_tree(proc)
    assert set(killed) == {proc.pid, child, grandchild}
    assert proc.returncode == -signal.SIGKILL if os.name != "nt" else proc.returncode != 0
    wait_for(lambda: gone(child) and gone(grandchild), timeout=10)
    proc.stdout.close()


def test_kill_tree_of_a_finished_process_kills_nothing():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert kill_tree(proc) == []


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_sigterm_lets_the_current_job_finish_then_exits(tmp_path):
    path = tmp_path / "warm.db"
    q = JobQueue(path)
    q.enqueue("report", {"work_seconds": 1.0})
    q.enqueue("report", {"work_seconds": 0.0})
    worker = start_demo_worker(path, "w1", 30)
    wait_for(lambda: job_row(q)["state"] == "running")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert job_row(q)["state"] == "done"
    assert job_row(q, 2)["state"] == "queued"  # it took no new job after the signal
    q.close()


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_a_second_sigterm_exits_at_once_and_the_lease_keeps_the_job(tmp_path):
    path = tmp_path / "forced.db"
    q = JobQueue(path)
    q.enqueue("report", {"work_seconds": 60})
    worker = start_demo_worker(path, "w1", 30)
    wait_for(lambda: job_row(q)["state"] == "running")
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.1)  # let the first signal be handled before the second arrives
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 1
    r = job_row(q)
    assert (r["state"], r["attempts"], r["worker"]) == ("running", 1, "w1")
    q.close()
