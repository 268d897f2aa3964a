"""Notebook 17's lab: the server it starts, the race, the drains, the clocks, the plot and the panel.
Small sizes; nothing here asserts a speed."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from labqueue.lab import postgres_lab as lab
from labqueue.lab.assets import FIGSIZE


@pytest.fixture(scope="module")
def server():
    from labqueue.postgres.server import NoServer

    try:
        running = lab.start_server()
    except NoServer as exc:
        if isinstance(exc.__cause__, ImportError):
            pytest.skip(str(exc))
        raise
    yield running
    running.stop()


def test_the_server_is_started_once_and_stopped(server):
    assert lab.start_server() is server
    assert lab.server_url() == server.url
    assert server.seconds_to_start > 0 and server.version
    assert "ready in" in server.line()


def test_the_wal_files_are_the_database_its_log_and_its_shared_memory_index(tmp_path):
    table = lab.wal_files(tmp_path)
    assert list(table.index) == ["jobs.db", "jobs.db-shm", "jobs.db-wal"]
    assert "shared memory" in table.loc["jobs.db-shm", "what it is for"]


def _claim_columns() -> tuple[str, list[str]]:
    """The side-by-side claim's HTML, and the text of its two columns as a reader sees it."""
    shown = lab.claim_statements().data
    return shown, [html.unescape(text) for text in re.findall(r"<pre[^>]*>(.*?)</pre>", shown, re.S)]


def test_both_claim_statements_are_the_ones_the_code_runs():
    from labqueue.drivers.postgres import sql as pg_sql
    from labqueue.drivers.sqlite import sql

    shown, (sqlite_side, pg_side) = _claim_columns()
    assert "SKIP LOCKED" in shown and "RETURNING" in shown
    # Word for word and in order: wrapping moves line breaks, never a token.
    assert sqlite_side.split() == f"{sql.RETIRE_EXHAUSTED.strip()};\n\n{sql.CLAIM.strip()}".split()
    assert pg_side.split() == pg_sql.CLAIM.split()
    assert sql.CLAIM.strip() in sqlite_side  # a statement whose lines fit is shown exactly


def test_the_claim_columns_wrap_between_tokens_and_scroll_rather_than_break_a_token():
    """JupyterLab's output <pre> breaks a line anywhere (word-break: break-all), which cut
    COALESCE(%(now)s into "COALESCE(%(n" and "ow)s": lines are wrapped by the lab, at spaces
    between tokens, and the browser is told to keep them: a column too wide scrolls sideways."""
    shown, columns = _claim_columns()
    for column in columns:
        for line in column.splitlines():
            assert len(line) <= lab.SQL_COLUMN_WIDTH or len(line.split()) == 1, line
    from labqueue.drivers.postgres import sql as pg_sql

    pg_side, now = columns[1], "COALESCE(%(now)s::double precision,"
    assert "'; previous error: '" in pg_side  # a quoted string stays on one line
    assert pg_side.count(now) == pg_sql.CLAIM.count(now) > 0  # nor is a parameter or a type split
    assert shown.count("white-space: pre;") == 2 and shown.count("word-break: normal") == 2
    # side by side where they fit, one under the other where they do not; a column scrolls
    assert shown.startswith("<div style='display: flex; flex-wrap: wrap")
    assert shown.count("overflow-x: auto") == 2


def test_wrap_sql_breaks_at_a_comma_first_and_indents_what_follows():
    line = "   SET a = COALESCE(%(now)s::double precision, extract(epoch FROM clock())), b = 'x, y z', c = 1"
    wrapped = lab.wrap_sql(line, width=50).splitlines()
    assert wrapped[0] == "   SET a = COALESCE(%(now)s::double precision,"
    assert all(len(part) <= 50 for part in wrapped)
    assert all(part.startswith(" " * 11) for part in wrapped[1:])  # its indent and eight more
    assert " ".join(wrapped).split() == line.split()
    assert any("'x, y z'" in part for part in wrapped)
    assert lab.wrap_sql("SELECT 1\n  FROM jobs", width=50) == "SELECT 1\n  FROM jobs"


@pytest.mark.slow
def test_the_race_on_postgres_hands_each_job_to_one_worker_with_skip_locked(server):
    naive, atomic = lab.claim_race(server.url, jobs=60, workers=2)
    assert (atomic.strategy, atomic.claims, atomic.duplicates, atomic.missed) == ("skip_locked", 60, 0, 0)
    assert sum(atomic.per_worker) == 60
    assert (
        naive.missed == 0 and naive.claims == naive.jobs + naive.duplicates
    )  # duplicates counted, not hidden
    table = lab.race_table([naive, atomic])
    assert list(table["duplicates"]) == [naive.duplicates, 0]


@pytest.mark.slow
def test_drains_on_both_backends_and_their_plot(server, tmp_path):
    runs = lab.drain_by_workers(server.url, procs=(1, 2), jobs=30, folder=tmp_path)
    assert sorted(set(runs["backend"])) == ["postgres", "sqlite"]
    assert (
        (runs["distinct"] == 30).all()
        and (runs["duplicates"] == 0).all()
        and (runs["left_in_store"] == 0).all()
    )
    summary = lab.drain_summary(runs)
    assert list(summary.index) == [1, 2]
    assert list(summary.columns) == ["SQLite jobs/s", "PostgreSQL jobs/s", "PostgreSQL / SQLite"]
    fig = lab.plot_throughput(runs, lab.published_drains())
    ax = fig.axes[0]
    assert ax.get_xlabel() == "worker processes" and "per second" in ax.get_ylabel()
    assert tuple(fig.get_size_inches()) == FIGSIZE


def test_the_published_run_has_both_backends_at_every_worker_count():
    published = lab.published_drains()
    assert published is not None
    summary, meta = published
    assert list(summary.index) == [1, 2, 4, 8]
    assert summary["postgres_jobs_per_s"].gt(0).all() and summary["sqlite_jobs_per_s"].gt(0).all()
    assert meta["sizes"]["jobs"] >= 1000


def test_the_published_peers_table_says_what_each_contender_promises():
    table = lab.published_peers()
    assert table is not None
    assert list(table.columns) == ["jobs/s", "labqueue / it", "what it promises about a job"]
    assert {workers for workers, _ in table.index} == {1, 4}
    contenders = {name for _, name in table.index}
    assert any("pgqueuer" in name for name in contenders) and any("labqueue" in name for name in contenders)
    assert table["what it promises about a job"].str.len().gt(20).all()
    assert (table["jobs/s"] > 0).all()


def test_only_the_servers_clock_keeps_skewed_machines_honest(server, tmp_path):
    rows = {row.deadlines: row for row in lab.clock_skew(server.url, skew=60.0, lease=0.5, folder=tmp_path)}
    local = [lab.SKEW_CASES["sqlite"], lab.SKEW_CASES["pg_local"]]
    for name in local:  # ahead: steals a live lease; behind: leaves a dead worker's job waiting
        assert rows[name].ahead_takes_live_job and not rows[name].behind_takes_expired_job
    honest = rows[lab.SKEW_CASES["pg_server"]]
    assert not honest.ahead_takes_live_job and honest.behind_takes_expired_job
    table = lab.skew_table(list(rows.values()))
    assert table.iloc[2].str.contains("wrong").sum() == 0 and table.iloc[0].str.contains("wrong").all()


def test_the_panel_runs_a_drain_and_redraws(server, tmp_path, monkeypatch):
    runs = pd.DataFrame(
        [
            {"backend": b, "procs": p, "jobs_per_s": v, "duplicates": 0}
            for b, p, v in [("sqlite", 1, 100.0), ("postgres", 1, 20.0)]
        ]
    )
    asked = {}

    def fake_drain(url, procs, jobs, **kwargs):
        asked.update(url=url, procs=procs, jobs=jobs)
        return runs

    monkeypatch.setattr(lab, "drain_by_workers", fake_drain)
    box = lab.panel(initial=runs, folder=tmp_path)
    assert box.image.value  # the initial chart
    box.controls["jobs"].value = 500
    box.controls["procs"].value = (1,)
    box.button.click()
    assert asked == {"url": server.url, "procs": (1,), "jobs": 500}  # the kernel's server
    assert "SQLite 100 jobs/s" in box.status.value and not box.button.disabled


KERNEL = """
import time
from labqueue.lab import postgres_lab as lab
import psycopg
server = lab.start_server()
with psycopg.connect(server.url) as db:
    print(db.execute("SHOW data_directory").fetchone()[0], flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_killed_kernels_server_is_stopped_and_its_folder_deleted(monkeypatch):
    """A kernel that is killed runs no cleanup: the watchdog stops its server instead."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psutil

    from labqueue.postgres.server import ENV_URL

    if os.environ.get(ENV_URL):
        pytest.skip(f"{ENV_URL} names the server: nothing is started, nothing to stop")
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], stdout=subprocess.PIPE, text=True)
    try:
        data = Path(kernel.stdout.readline().strip())
        postmaster = psutil.Process(int((data / "postmaster.pid").read_text().split()[0]))
        kernel.send_signal(signal.SIGKILL)
        kernel.wait(10)
        deadline = time.monotonic() + 30
        while (postmaster.is_running() or data.exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not postmaster.is_running() or postmaster.status() == psutil.STATUS_ZOMBIE
        assert not data.exists() and not data.parent.exists()
    finally:
        kernel.kill()


@pytest.mark.slow
def test_workers_survive_terminated_sessions_and_a_restart(tmp_path, monkeypatch):
    from labqueue.postgres.server import throwaway_server

    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    with throwaway_server(tcp=True) as url:
        run = lab.survive_server(url, jobs=80, workers=2)
    assert run.sessions_terminated >= 2 and run.reconnects >= 2
    assert run.done == 80 and run.dead == 0 and run.ledger_rows == 80 and run.not_once == 0
    table = run.table()
    assert table.loc["jobs without exactly one ledger row", "value"] == "0"


EXITING_KERNEL = """
from labqueue.lab import postgres_lab as lab
import psycopg
server = lab.start_server()
with psycopg.connect(server.url) as db:
    print(db.execute("SHOW data_directory").fetchone()[0], flush=True)
"""


def test_a_kernel_that_exits_stops_its_server_itself():
    """At a normal exit the kernel's own cleanup stops the server and deletes its folder
    (before the interpreter tears its modules down, where that cleanup used to fail)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from labqueue.postgres.server import ENV_URL

    if os.environ.get(ENV_URL):
        pytest.skip(f"{ENV_URL} names the server: nothing is started, nothing to stop")
    done = subprocess.run([sys.executable, "-c", EXITING_KERNEL], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    data = Path(done.stdout.strip())
    assert not data.exists() and not data.parent.exists()
