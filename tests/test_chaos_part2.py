"""The chaos run with Part 2's moving parts: named queues and priorities, a purge and
cancels from the supervisor while the workers run, and a schedule every worker ticks,
on SQLite and on PostgreSQL; and the checks those parts add, on hand-made rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from labqueue import JobQueue
from labqueue.chaos.check import JobRow, check_run
from labqueue.chaos.supervisor import SCHEDULED_KIND, ChaosConfig, Supervisor, main, prepare, run

PART2 = ChaosConfig(
    jobs=80, workers=4, kill_every=0.4, pause_every=1.2, pause_seconds=1.5, seed=5
).with_part2()


def assert_part2_ran(result) -> None:
    assert result.passed, "\n".join(result.report())
    assert result.purged > 0 and result.cancelled, "\n".join(result.report())
    assert {j.state for j in result.jobs if j.id in set(result.cancelled)} == {"cancelled"}
    assert sum(1 for j in result.jobs if j.kind == SCHEDULED_KIND) >= 1
    assert any(line.startswith("named queues default:1, mail:2, bulk:1") for line in result.report())


@pytest.mark.slow
def test_a_part2_run_on_sqlite_passes(tmp_path):
    assert_part2_ran(run(PART2, tmp_path / "chaos.db"))


@pytest.mark.slow
def test_a_part2_run_on_postgres_passes_over_tcp(request):
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    from labqueue.postgres.server import fresh_database

    url = request.getfixturevalue("pg_url")
    with fresh_database(url, prefix="chaos_part2") as database:
        assert_part2_ran(run(PART2, database))


def test_the_command_line_takes_the_part2_options(tmp_path, capsys):
    code = main(
        [
            "--jobs",
            "12",
            "--workers",
            "2",
            "--mix",
            "credit=10,bad=2",
            "--cancel-every",
            "0.05",
            "--schedule-every",
            "0.3",
            "--queues",
            "--purge-every",
            "0.2",
            "--db",
            str(tmp_path / "c.db"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "purged into jobs_archive while the workers ran:" in out and "scheduled noop every 0.3 s" in out


def job(job_id: int, kind: str, state: str, attempts: int = 1) -> JobRow:
    return JobRow(job_id, kind, state, attempts, 3, "boom" if state == "dead" else None, 1.0)


def claims(checks) -> dict[str, bool]:
    return {check.claim.split(" (")[0]: check.ok for check in checks}


def test_a_cancelled_job_with_an_effect_or_another_end_fails_the_run():
    jobs = [job(1, "credit", "cancelled"), job(2, "credit", "done"), job(3, "credit", "cancelled")]
    ok = claims(check_run(jobs, [(2, 1)], {}, lease=1.0, drained=True, cancelled=[1, 3]))
    assert all(ok.values()), ok
    leaked = claims(check_run(jobs, [(1, 1), (2, 1)], {}, lease=1.0, drained=True, cancelled=[1, 3]))
    assert not leaked["every job the run cancelled ended cancelled, with no effect"]
    stray = claims(check_run(jobs, [(2, 1)], {}, lease=1.0, drained=True, cancelled=[1]))
    assert not stray["no job is cancelled that the run did not cancel"]


def test_two_scheduled_jobs_for_one_period_fail_the_run():
    jobs = [job(1, "noop", "done"), job(2, "noop", "done"), job(3, "noop", "queued")]
    good = check_run(
        jobs,
        [],
        {},
        lease=1.0,
        drained=True,
        scheduled=("noop", ["every:noop:1", "every:noop:2", "every:noop:3"]),
    )
    assert all(c.ok for c in good), [c.line() for c in good]  # the last one may still be queued
    twice = check_run(jobs, [], {}, lease=1.0, drained=True, scheduled=("noop", ["every:noop:1"] * 3))
    assert not claims(twice)["one noop job per period of the schedule"]


@contextmanager
def supervising(path, config: ChaosConfig) -> Iterator[Supervisor]:
    """A run's supervisor over a prepared queue at `path`, its workers not started."""
    prepare(path, config)
    supervisor = Supervisor(path, config, time.time())
    try:
        yield supervisor
    finally:
        supervisor.close()


def test_a_run_with_a_schedule_is_not_over_before_its_first_scheduled_job(tmp_path):
    # Every job cancelled before any worker was up to tick the schedule: under load, the
    # run used to end there, and its schedule check had no period to check.
    config = ChaosConfig(jobs=4, workers=1, mix={"credit": 4}, schedule_every=0.3)
    with supervising(tmp_path / "c.db", config) as supervisor:
        with JobQueue(supervisor.path) as q:
            for job in q.jobs():
                q.cancel(job.id)
            assert supervisor.live_jobs() == 0 and not supervisor.drained()
            q.enqueue(SCHEDULED_KIND, {}, dedupe_key=f"{SCHEDULED_KIND}@0")
            assert not supervisor.drained()  # made, not yet done
            (job,) = q.claim("w")
            q.complete(job)
        assert supervisor.drained()


def test_a_purge_that_meets_a_held_write_lock_is_tried_again_and_counts_what_it_moved(tmp_path):
    # A worker the run froze (SIGSTOP) mid-transaction holds SQLite's write lock; the
    # supervisor's purge then waits its 0.5 s lock timeout and gives up, as a cancel does,
    # rather than ending the run, and the rows its committed windows moved still count.
    config = ChaosConfig(jobs=6, workers=1, mix={"credit": 6}, purge_every=0.01)
    with supervising(tmp_path / "c.db", config) as supervisor:
        with JobQueue(supervisor.path) as q:
            for job in q.jobs()[:4]:
                q.cancel(job.id)
            holder = q.db
            holder.execute("BEGIN IMMEDIATE")  # the frozen worker's transaction
            supervisor.next_purge = 0.0
            supervisor.tick()
            assert supervisor.busy_purges == 1 and supervisor.purged == 0
            holder.execute("ROLLBACK")  # thawed
            supervisor.next_purge = 0.0
            supervisor.tick()
        assert supervisor.busy_purges == 1 and supervisor.purged == 4
