"""labqueue.heap: a worker process keeps its heap's top, so a batch's statements do not
hand pages back to the kernel and fault them in again."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from labqueue import heap
from labqueue.errors import InvalidArgument
from labqueue.queue import JobQueue

on_glibc = pytest.mark.skipif(not heap._is_glibc(), reason="M_TOP_PAD is glibc's")


@on_glibc
def test_glibc_takes_the_top_pad():
    assert heap.keep_top() is True
    assert heap.keep_top(0) is True  # glibc's own behaviour again: trim down to nothing kept


def test_elsewhere_nothing_is_changed(monkeypatch):
    def no_glibc(name: str) -> str:
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(os, "confstr", no_glibc)
    assert heap.keep_top() is False


@on_glibc
def test_a_c_library_without_mallopt_is_left_alone(monkeypatch):
    class NoMallopt:
        def __init__(self, name: object) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert heap.keep_top() is False


@pytest.mark.parametrize("pad", [-1, 2**31, True, 1.5, "4M", None])
def test_a_bad_pad_is_refused_with_its_value(pad):
    with pytest.raises(InvalidArgument, match="pad must be a whole number") as refused:
        heap.keep_top(pad)
    assert repr(pad) in str(refused.value)


# A worker loop in a fresh interpreter whose imports (the bench's) leave SQLite's
# per-statement page caches at the top of the heap: on the development machine it faulted
# 10.7 pages in per job without the pad (and drained at half speed), 0.002 with it.
DRAIN = """
import resource, sys
import labqueue.bench.pg
from labqueue import heap, worker
from labqueue.queue import JobQueue

path, jobs = sys.argv[1], int(sys.argv[2])
assert heap.keep_top()
with JobQueue(path) as q:
    q.enqueue_many("noop", ({"n": n} for n in range(jobs)))
seen = []
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
worker.run(path, "w", 60.0, idle_exit=0, handlers={"noop": lambda job, q: seen.append(job.payload["n"])},
           stop=worker.StopFlag())
assert sorted(seen) == list(range(jobs))
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / jobs)
"""


@on_glibc
def test_with_the_pad_a_worker_loop_faults_no_pages_in_per_job(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", DRAIN, str(tmp_path / "jobs.db"), "5000"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert float(done.stdout) < 1.0, done.stdout


MAIN = """
import sys
from labqueue import heap, worker

pads = []
heap.keep_top = lambda *args: pads.append(args) or True
code = worker.main(["--handlers", "labqueue.demo.handlers", "--", sys.argv[1], "w", "60", "0"])
print(len(pads), code)
"""


def test_the_worker_process_keeps_its_heap_top_when_it_starts(tmp_path):
    """`labqueue worker` (python -m labqueue.worker) asks for the pad once, at its start."""
    path = str(tmp_path / "jobs.db")
    JobQueue(path).close()
    done = subprocess.run(
        [sys.executable, "-c", MAIN, path], check=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["1", "0"], done
