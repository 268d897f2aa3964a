"""The chaos harness: its invariant checks on hand-made rows, its settings, and small
real runs with worker processes, kills and pauses."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import psutil
import pytest

from labqueue import InvalidArgument, kill_tree
from labqueue.chaos.check import TUTORIAL_MIX, JobRow, check_run, figures
from labqueue.chaos.supervisor import ChaosConfig, main, parse_mix, run, scaled_mix
from labqueue.drivers.sqlite.sql import LAST_ATTEMPT_EXPIRED

# -- the checks, on rows made by hand ---------------------------------------------------------


def job(id, kind, state, attempts, error=None, max_attempts=3):
    return JobRow(id, kind, state, attempts, max_attempts, error, 1.0)


HEALTHY = [
    job(1, "credit", "done", 1),
    job(2, "slow", "done", 2),
    job(3, "poison", "dead", 3, LAST_ATTEMPT_EXPIRED),
    job(4, "bad", "dead", 3, "ValueError: payload has no recipient"),
]
HEALTHY_LEDGER = [(1, 1), (2, 2)]


def failing(checks) -> list[str]:
    return [c.claim for c in checks if not c.ok]


def test_a_healthy_run_passes_every_check():
    checks = check_run(HEALTHY, HEALTHY_LEDGER, {}, lease=0.8, drained=True)
    assert len(checks) == 7
    assert failing(checks) == []


@pytest.mark.parametrize(
    "jobs, ledger, broken",
    [
        ([*HEALTHY[:3], job(4, "bad", "queued", 2)], HEALTHY_LEDGER, "nothing is left queued or running"),
        (HEALTHY, [(1, 1)], "every credit and slow job is done with exactly one ledger row"),
        (HEALTHY, [*HEALTHY_LEDGER, (1, 1)], "no job's effect was applied twice, and no dead job has one"),
        (HEALTHY, [*HEALTHY_LEDGER, (4, 3)], "no job's effect was applied twice, and no dead job has one"),
        (HEALTHY, [(1, 1), (2, 1)], "every recorded effect is from the job's last attempt"),
        (
            [*HEALTHY[:3], job(4, "bad", "dead", 2, "x")],
            HEALTHY_LEDGER,
            "every poison and bad job is dead after",
        ),
        ([*HEALTHY[:3], job(4, "bad", "dead", 3, None)], HEALTHY_LEDGER, "every dead job carries its reason"),
        (HEALTHY, [(1, 1), (2, 1)], "no slow job's stalled attempt 1 was accepted"),
    ],
)
def test_each_check_catches_its_own_breakage(jobs, ledger, broken):
    assert any(
        claim.startswith(broken) for claim in failing(check_run(jobs, ledger, {}, lease=0.8, drained=True))
    )


def test_a_run_that_did_not_drain_fails():
    assert failing(check_run(HEALTHY, HEALTHY_LEDGER, {}, lease=0.8, drained=False)) == [
        "nothing is left queued or running"
    ]


def test_a_credit_job_may_die_only_when_injected_faults_used_up_its_attempts():
    dead = job(1, "credit", "dead", 3, LAST_ATTEMPT_EXPIRED)
    jobs, ledger = [dead, *HEALTHY[1:]], HEALTHY_LEDGER[1:]
    assert failing(check_run(jobs, ledger, {1: 3}, lease=0.8, drained=True)) == []
    assert failing(check_run(jobs, ledger, {1: 2}, lease=0.8, drained=True)) == [
        "every credit and slow job is done with exactly one ledger row"
    ]


def test_the_handlers_own_failures_count_towards_the_attempts():
    # Job 20 times out on attempt 1; a slow job's attempt 1 outlives a 0.8 s lease.
    jobs = [
        job(20, "credit", "dead", 3, LAST_ATTEMPT_EXPIRED),
        job(2, "slow", "dead", 3, LAST_ATTEMPT_EXPIRED),
    ]
    assert failing(check_run(jobs, [], {20: 2, 2: 2}, lease=0.8, drained=True)) == []
    assert failing(check_run(jobs[1:], [], {2: 2}, lease=5.0, drained=True)) != []


def test_a_credit_job_that_failed_in_its_own_code_is_never_excused():
    jobs = [job(1, "credit", "dead", 3, "TimeoutError: upstream timed out")]
    assert failing(check_run(jobs, [], {1: 3}, lease=0.8, drained=True)) != []


def test_figures_are_counted_like_the_tutorial():
    f = figures(HEALTHY, HEALTHY_LEDGER)
    assert f["states"] == {"dead": 2, "done": 2}
    assert (f["ledger_rows"], f["jobs_with_two_or_more_rows"]) == (2, 0)
    assert f["slow_by_attempt"] == {2: 1}
    assert f["dead_attempts"] == {("bad", 3): 1, ("poison", 3): 1}


# -- settings ------------------------------------------------------------------------------


def test_the_mix_scales_from_the_tutorials_300():
    assert scaled_mix(300) == TUTORIAL_MIX
    assert scaled_mix(5000) == {"credit": 4333, "slow": 100, "poison": 167, "bad": 400}
    assert sum(scaled_mix(77).values()) == 77


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"jobs": 0}, "jobs must be a whole number of at least 1, got 0"),
        ({"workers": 2.5}, "workers must be a whole number"),
        ({"lease": -1}, "lease must be a number of seconds above 0, got -1"),
        ({"kill_every": -0.1}, "kill_every must be 0"),
        (
            {"pause_every": 1.0, "pause_seconds": 0.5},
            r"pause_seconds must be longer than the lease \(0.8 s\)",
        ),
        ({"jobs": 10, "mix": {"credit": 9}}, "mix adds up to 9 jobs, but jobs is 10"),
        ({"jobs": 1, "mix": {"email": 1}}, "mix has kinds without an expected end state: email"),
    ],
)
def test_bad_settings_are_refused_by_name_and_value(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        ChaosConfig(**kwargs)


def test_parse_mix():
    assert parse_mix("credit=260, slow=6,poison=10,bad=24") == TUTORIAL_MIX
    with pytest.raises(Exception, match="expected KIND=COUNT, got 'credit'"):
        parse_mix("credit")


# -- real runs -------------------------------------------------------------------------------


def no_process_left(result) -> bool:
    return not any(
        psutil.pid_exists(w.pid) and psutil.Process(w.pid).status() != "zombie" for w in result.workers
    )


@pytest.mark.slow
def test_a_small_run_with_kills_and_pauses_passes_and_is_recorded(tmp_path):
    # Seed 2 draws its first SIGSTOP at 0.37 s and its first SIGKILL at 0.42 s.
    config = ChaosConfig(jobs=60, workers=4, kill_every=0.3, pause_every=1.0, pause_seconds=1.2, seed=2)
    seen: list[tuple[int, int]] = []
    result = run(config, tmp_path / "chaos.db", progress=lambda done, total: seen.append((done, total)))
    assert result.passed, "\n".join(result.report())
    kinds = {f.fault for f in result.faults}
    assert kinds == {"kill", "pause"}
    assert all(f.until is not None and f.until > f.at for f in result.faults if f.fault == "pause")
    assert result.crashed >= 1  # the poison jobs
    fates = {w.fate for w in result.workers}
    assert {"killed", "crashed"} <= fates
    assert len(result.workers) > config.workers  # every dead worker was replaced
    assert seen[-1] == (60, 60)
    assert no_process_left(result)
    with sqlite3.connect(result.path) as db:
        assert db.execute("SELECT COUNT(*) FROM chaos_workers").fetchone()[0] == len(result.workers)
        assert db.execute("SELECT COUNT(*) FROM chaos_faults").fetchone()[0] == len(result.faults)
        assert db.execute("SELECT started FROM chaos_run").fetchone()[0] == result.started
    assert all(j.finished_at is not None and j.finished_at >= 0 for j in result.jobs)
    assert result.report()[-1].startswith("PASS")


def test_a_run_out_of_time_fails_and_leaves_no_worker_behind(tmp_path):
    config = ChaosConfig(jobs=8, workers=2, mix={"slow": 8}, timeout=0.3)
    result = run(config, tmp_path / "chaos.db")
    assert not result.passed
    assert "nothing is left queued or running" in result.report()[-1]
    assert {w.fate for w in result.workers} <= {"stopped at the end", "idle exit", "crashed"}
    assert no_process_left(result)


def test_a_stopped_run_fails_and_leaves_no_worker_behind(tmp_path):
    stop = threading.Event()
    config = ChaosConfig(jobs=4, workers=2, mix={"slow": 4})
    result = run(config, tmp_path / "chaos.db", progress=lambda done, total: stop.set(), stop=stop)
    assert not result.passed
    assert len(result.workers) == 2
    assert no_process_left(result)


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM and SIGSTOP are POSIX signals")
def test_sigterm_ends_the_command_and_thaws_and_kills_every_worker(tmp_path):
    path = tmp_path / "chaos.db"
    cmd = [sys.executable, "-m", "labqueue.chaos", "--jobs", "40", "--mix", "slow=40", "--db", str(path)]
    cmd += ["--pause-every", "0.2", "--pause-seconds", "30"]  # frozen workers must not outlive it
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        supervisor = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            workers = supervisor.children()
            if any(w.status() == psutil.STATUS_STOPPED for w in workers):
                break
            time.sleep(0.05)
        else:
            pytest.fail("no worker was ever frozen")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        kill_tree(proc)
    assert proc.returncode == 1
    assert "FAIL: nothing is left queued or running" in out
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]


def test_a_run_never_reuses_an_existing_file(tmp_path):
    path = tmp_path / "mine.db"
    path.write_bytes(b"keep me")
    with pytest.raises(InvalidArgument, match=r"mine\.db already exists"):
        run(ChaosConfig(jobs=1, mix={"credit": 1}), path)
    assert path.read_bytes() == b"keep me"


def test_the_command_line_prints_the_checks_and_exits_by_the_result(tmp_path, capsys):
    path = tmp_path / "cli.db"
    assert main(["--jobs", "12", "--workers", "2", "--mix", "credit=12", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "12 jobs (12 credit), 2 workers, lease 0.8 s" in out
    assert out.rstrip().endswith("PASS: every job finished exactly once or was dead-lettered")
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(path)])  # an existing file is never overwritten
    assert exit_info.value.code == 2
    assert "already exists" in capsys.readouterr().err
