"""The `labqueue` command, run as a user runs it: in a subprocess, checking the exit code,
the output, and what changed in the database."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import LogReader, handler_module, labqueue, one_line_error, start, wait_for

from labqueue import JobQueue
from labqueue.cli import build_parser


def parser_commands() -> list[str]:
    """Every command the `labqueue` parser knows, in its order, read from its subcommands:
    a new command is covered by the tests below without editing them."""
    parser = build_parser()
    (subcommands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(subcommands.choices)


COMMANDS = parser_commands()


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "jobs.db"


def dead_jobs(db: Path, n: int) -> list[int]:
    """n jobs of kind 'x', each claimed and failed for good."""
    with JobQueue(db) as q:
        ids = [q.enqueue("x", {"n": i}) for i in range(n)]
        for job in q.claim("w", limit=n):
            q.fail(job, "RuntimeError: no", retry=False)
    return ids


# -- every command documents itself ---------------------------------------------------


def test_the_console_script_is_installed_and_lists_every_command():
    script = shutil.which("labqueue", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the labqueue console script is not installed here (pip install -e .)")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for command in COMMANDS:
        assert f"\n    {command}" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_documents_itself(command):
    result = labqueue(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:")
    assert len(result.stdout.splitlines()) > 5  # a description and its options, not just a usage line


def test_the_help_lists_every_command_the_parser_knows():
    result = labqueue("--help")
    assert result.returncode == 0, result.stderr
    assert re.findall(r"^    (\S+)", result.stdout, flags=re.M) == COMMANDS  # and the walk found them


def test_python_dash_m_labqueue_is_the_same_command():
    result = labqueue("--version")
    assert result.returncode == 0 and result.stdout.startswith("labqueue ")


def test_importing_the_command_loads_no_course_or_tool_module():
    code = "import sys, labqueue.cli; print(sorted(m for m in sys.modules if m.startswith(%r)))"
    rooms = ("labqueue.lab", "labqueue.bench", "labqueue.chaos")
    out = subprocess.run([sys.executable, "-c", code % (rooms,)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- enqueue --------------------------------------------------------------------------


def test_enqueue_prints_the_new_id_and_stores_the_job(db):
    result = labqueue("enqueue", db, "email", '{"to": "ada@example.com"}', "--max-attempts", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"
    with JobQueue(db) as q:
        [job] = q.jobs()
    assert (job.kind, json.loads(job.payload), job.state, job.max_attempts) == (
        "email",
        {"to": "ada@example.com"},
        "queued",
        2,
    )


def test_enqueue_with_a_dedupe_key_says_duplicate_the_second_time(db):
    assert labqueue("enqueue", db, "k", "{}", "--dedupe-key", "once").stdout == "1\n"
    again = labqueue("enqueue", db, "k", '{"other": 1}', "--dedupe-key", "once")
    assert again.returncode == 0 and again.stdout == "duplicate\n"
    with JobQueue(db) as q:
        assert [json.loads(r.payload) for r in q.jobs()] == [{}]


def test_enqueue_with_a_delay_is_not_ready_yet(db):
    assert labqueue("enqueue", db, "k", "[1, 2]", "--delay", "3600").returncode == 0
    with JobQueue(db) as q:
        assert q.stats()["queued"] == 1 and q.stats()["ready_now"] == 0


def test_enqueue_dash_reads_json_lines_from_stdin_as_one_batch(db):
    result = labqueue("enqueue", db, "k", "-", "--max-attempts", "4", stdin='{"n": 1}\n\n[2]\n"three"\n')
    assert result.returncode == 0, result.stderr
    assert result.stdout == "enqueued 3 job(s)\n"
    with JobQueue(db) as q:
        records = q.jobs()
    assert [json.loads(r.payload) for r in records] == [{"n": 1}, [2], "three"]
    assert {r.max_attempts for r in records} == {4}


def test_a_bad_line_in_the_batch_writes_nothing(db):
    assert labqueue("enqueue", db, "k", "{}").returncode == 0
    result = labqueue("enqueue", db, "k", "-", stdin='{"n": 1}\n{"n": \n')
    assert "stdin line 2 is not valid JSON" in one_line_error(result, 2)
    with JobQueue(db) as q:
        assert q.counts()["queued"] == 1


# -- stats, jobs, requeue-dead ------------------------------------------------------------


def test_stats_prints_a_table_and_json(db):
    dead_jobs(db, 2)
    labqueue("enqueue", db, "k", "{}")
    table = labqueue("stats", db)
    assert table.returncode == 0
    totals, per_queue = table.stdout.split("\n\n")
    rows = dict(line.split() for line in totals.splitlines())
    assert rows["queued"] == "1" and rows["dead"] == "2" and rows["running"] == "0"
    assert [line.split()[:4] for line in per_queue.splitlines()] == [
        ["queue", "queued", "running", "ready_now"],
        ["default", "1", "0", "1"],
    ]
    as_json = json.loads(labqueue("stats", db, "--json").stdout)
    assert as_json["queued"] == 1 and as_json["dead"] == 2 and as_json["ready_now"] == 1
    assert as_json["queues"]["default"]["queued"] == as_json["queues"]["default"]["ready_now"] == 1


def test_stats_watch_refreshes_until_interrupted(db):
    labqueue("enqueue", db, "k", "{}")
    proc = start("stats", db, "--watch", "0.05", "--json")
    try:
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        assert first["queued"] == second["queued"] == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()
        proc.communicate()


def test_jobs_lists_newest_first_with_times_and_filters_as_a_table_or_json(db):
    dead_jobs(db, 2)
    labqueue("enqueue", db, "other", '{"a": 1}')
    table = labqueue("jobs", db)
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    heads = "id kind queue state attempts created (UTC) finished (UTC) worker last_error"
    assert lines[0].split() == heads.split()
    assert [line.split()[:4] for line in lines[1:]] == [
        ["3", "other", "default", "queued"],
        ["2", "x", "default", "dead"],
        ["1", "x", "default", "dead"],
    ]
    assert "RuntimeError: no" in lines[2]
    assert re.search(r"\b20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\b", lines[2])  # created, in UTC
    oldest = labqueue("jobs", db, "--oldest", "--limit", "1", "--json")
    assert [json.loads(line)["id"] for line in oldest.stdout.splitlines()] == [1]
    dead = labqueue("jobs", db, "--state", "dead", "--json", "--limit", "1")
    assert [json.loads(line)["id"] for line in dead.stdout.splitlines()] == [2]
    by_kind = labqueue("jobs", db, "--kind", "other", "--json")
    [other] = [json.loads(line) for line in by_kind.stdout.splitlines()]
    assert (other["state"], other["payload"]) == ("queued", {"a": 1})  # the payload as JSON, not a string


def test_job_shows_one_job_whole_and_an_unknown_id_is_an_error(db):
    dead_jobs(db, 1)
    shown = labqueue("job", db, "1")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line and not line.startswith(" ")]
    fields = dict(line.split(":", 1) for line in lines)
    assert fields["state"].strip() == "dead"
    assert fields["last_error"].strip() == "RuntimeError: no"
    assert " UTC (" in fields["created_at"]
    assert '"n": 0' in shown.stdout  # the payload, indented JSON
    assert json.loads(labqueue("job", db, "1", "--json").stdout)["payload"] == {"n": 0}
    assert "no job has id 7" in one_line_error(labqueue("job", db, "7"), 1)


def test_requeue_dead_by_id_by_filter_or_all_and_a_missed_id_fails(db):
    dead_jobs(db, 3)
    some = labqueue("requeue-dead", db, "2", "9")
    assert some.returncode == 1 and some.stdout == "2\n"
    assert "job 9 not requeued: no job has this id" in some.stderr
    again = labqueue("requeue-dead", db, "2")
    assert again.returncode == 1 and "job 2 not requeued: it is queued, not dead" in again.stderr
    with JobQueue(db) as q:
        assert q.counts() == {"queued": 1, "running": 0, "done": 0, "dead": 2, "cancelled": 0}
        assert q.job(2).attempts == 0
    assert labqueue("requeue-dead", db, "--kind", "other").stdout == ""  # nothing of that kind
    rest = labqueue("requeue-dead", db, "--all")
    assert rest.returncode == 0 and rest.stdout.split() == ["1", "3"]
    with JobQueue(db) as q:
        assert q.counts()["queued"] == 3


def test_requeue_dead_and_cancel_say_which_jobs_and_refuse_a_mix(db):
    dead_jobs(db, 1)
    for command in ("requeue-dead", "cancel"):
        assert "say which jobs" in one_line_error(labqueue(command, db), 2)
        assert "not both" in one_line_error(labqueue(command, db, "1", "--all"), 2)
    with JobQueue(db) as q:
        assert q.counts()["dead"] == 1


def test_cancel_by_filter_cancels_only_the_live_jobs_selected(db):
    with JobQueue(db) as q:
        mail = [q.enqueue("email", {}, queue="mail") for _ in range(2)]
        q.enqueue("report", {}, queue="reports")
    done = labqueue("cancel", db, "--queue", "mail")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{i} cancelled (was queued)" for i in mail]
    with JobQueue(db) as q:
        assert [r.state for r in q.jobs()] == ["cancelled", "cancelled", "queued"]
    assert labqueue("cancel", db, "1").returncode == 1  # a named job already finished


# -- worker -----------------------------------------------------------------------------


def test_worker_drains_the_queue_and_logs_start_failures_and_stop_as_json(db, tmp_path):
    env = handler_module(tmp_path / "app")
    labqueue("enqueue", db, "noop", "{}")
    labqueue("enqueue", db, "boom", "{}", "--max-attempts", "1")
    result = labqueue(
        "worker", db, "--handlers", "cli_test_jobs", "--idle-exit", "0.2", "--id", "w1",
        "--log-format", "json", env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with JobQueue(db) as q:
        assert [(r.kind, r.state, r.worker) for r in q.jobs()] == [
            ("noop", "done", "w1"),
            ("boom", "dead", "w1"),
        ]
    records = [json.loads(line) for line in result.stderr.splitlines()]
    messages = [r["message"] for r in records]
    assert any(m.startswith("worker w1 started") for m in messages)
    [failure] = [r for r in records if "boom" in r["message"]]
    assert failure["level"] == "ERROR" and "RuntimeError: boom 2" in failure["exception"]
    fields = {k: failure[k] for k in ("job_id", "kind", "queue", "attempt", "worker")}
    assert fields == {"job_id": 2, "kind": "boom", "queue": "default", "attempt": 1, "worker": "w1"}
    assert failure["duration_ms"] >= 0
    assert not any("noop" in m for m in messages)  # a success is logged at DEBUG unless --log-success
    assert any("stopped (idle for 0.2 s) after 2 job(s)" in m for m in messages)
    assert messages[-1] == "all workers stopped (0 restart(s))"  # the supervisor's last word


def test_worker_log_level_hides_the_routine(db, tmp_path):
    env = handler_module(tmp_path / "app")
    labqueue("enqueue", db, "noop", "{}")
    result = labqueue(
        "worker", db, "--handlers", "cli_test_jobs", "--idle-exit", "0", "--log-level", "warning", env=env
    )
    assert result.returncode == 0 and result.stderr == ""


def test_every_worker_setting_reaches_the_queue_it_opens(db, tmp_path):
    env = handler_module(tmp_path / "app")
    out = tmp_path / "seen.json"
    labqueue("enqueue", db, "settings", json.dumps({"out": str(out)}))
    result = labqueue(
        "worker", db, "--handlers", "cli_test_jobs", "--idle-exit", "0", "--lease", "11",
        "--max-attempts", "7", "--backoff-base", "0.5", "--backoff-cap", "9", "--synchronous", "full",
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == {
        "lease_seconds": 11.0,
        "max_attempts": 7,
        "backoff_base": 0.5,
        "backoff_cap": 9.0,
        "synchronous": "FULL",
    }


def test_a_single_worker_stops_warm_on_sigterm_after_its_job(db, tmp_path):
    env = handler_module(tmp_path / "app")
    for _ in range(2):
        labqueue("enqueue", db, "gated", json.dumps({"folder": str(tmp_path)}))
    proc = start("worker", db, "--handlers", "cli_test_jobs", env=env)
    reader = LogReader(proc)
    try:
        wait_for(lambda: (tmp_path / "started-1").exists())
        proc.send_signal(signal.SIGTERM)
        reader.wait_for_line("warm stop: asked 1 worker(s)")  # the supervisor has passed it on
        (tmp_path / "release").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        log = reader.text()
    with JobQueue(db) as q:
        assert [r.state for r in q.jobs()] == ["done", "queued"]
    assert "stopped (warm stop) after 1 job(s)" in log


def test_the_tutorials_positional_worker_command_still_works(db, tmp_path):
    env = handler_module(tmp_path / "app")
    labqueue("enqueue", db, "noop", "{}")
    command = [
        sys.executable,
        "-m",
        "labqueue.worker",
        str(db),
        "w9",
        "5",
        "0.1",
        "--handlers",
        "cli_test_jobs",
    ]
    assert subprocess.run(command, env=env, timeout=60, capture_output=True).returncode == 0
    with JobQueue(db) as q:
        assert [(r.state, r.worker) for r in q.jobs()] == [("done", "w9")]


# -- bad arguments ------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("worker", "DB", "--lease", "nan"),
    ("worker", "DB", "--lease", "inf"),
    ("worker", "DB", "--lease", "-1"),
    ("worker", "DB", "--lease", "0"),
    ("worker", "DB", "--idle-exit", "-0.5"),
    ("worker", "DB", "--poll", "NaN"),
    ("worker", "DB", "--backoff-base", "-inf"),
    ("worker", "DB", "--backoff-cap", "0"),
    ("worker", "DB", "--max-attempts", "0"),
    ("worker", "DB", "--concurrency", "0"),
    ("worker", "DB", "--synchronous", "sometimes"),
    ("worker", "DB", "--id=-w1"),
    ("worker", "DB", "--id", ""),
    ("worker", "DB", "--handlers", "no_such_module_here"),
    ("enqueue", "DB", "", "{}"),
    ("enqueue", "DB", "k", "{}", "--delay", "nan"),
    ("enqueue", "DB", "k", "{}", "--delay", "-1"),
    ("enqueue", "DB", "k", "{}", "--max-attempts", "-3"),
    ("enqueue", "DB", "k", "NaN"),
    ("enqueue", "DB", "k", "[Infinity]"),
    ("enqueue", "DB", "k", "{not json"),
    ("enqueue", "DB", "k", "-", "--dedupe-key", "a"),
    ("stats", "DB"),
    ("stats", "DB", "--watch", "-1"),
    ("jobs", "DB"),
    ("jobs", "DB", "--limit", "-1"),
    ("jobs", "DB", "--state", "lost"),
    ("requeue-dead", "DB"),
    ("requeue-dead", "DB", "x"),
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=" ".join)
def test_a_bad_argument_is_a_one_line_usage_error_and_creates_nothing(argv, db):
    result = labqueue(*(str(db) if a == "DB" else a for a in argv), stdin="")
    one_line_error(result, 2)
    assert not db.exists()
    assert list(db.parent.iterdir()) == []


def test_read_commands_change_nothing_in_an_sqlite_file_that_is_not_a_queue(tmp_path):
    import sqlite3

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    conn.close()
    before = other.read_bytes()
    for command in (("stats",), ("jobs",), ("requeue-dead", "--all")):
        assert "no jobs table" in one_line_error(labqueue(command[0], other, *command[1:]), 2)
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.parametrize(
    "command", [("stats",), ("jobs",), ("requeue-dead", "--all"), ("enqueue", "k", "{}")]
)
def test_labqueues_own_errors_are_one_line_and_exit_1(command, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    line = one_line_error(labqueue(command[0], notes, *command[1:]), 1)
    assert "is not an SQLite database" in line
    assert notes.read_text() == "not a database\n"


# -- the tools ------------------------------------------------------------------------------


def test_chaos_and_bench_get_their_own_arguments():
    chaos = labqueue("chaos", "--jobs", "0")
    assert chaos.returncode == 2 and "jobs must be a whole number of at least 1" in chaos.stderr
    bench = labqueue("bench", "--rounds", "0")
    assert bench.returncode == 2 and "rounds" in bench.stderr


def test_the_read_and_write_commands_take_a_postgresql_url(request):
    url = request.getfixturevalue("pg_url")  # skips without the postgres extra
    from labqueue.postgres import drop_schema

    request.addfinalizer(lambda: drop_schema(url, "labqueue"))
    assert labqueue("stats", url).returncode == 2  # no queue there yet, and none is created
    assert labqueue("enqueue", url, "k", '{"n": 1}').stdout == "1\n"
    assert json.loads(labqueue("stats", url, "--json").stdout)["queued"] == 1
    assert [json.loads(line)["kind"] for line in labqueue("jobs", url, "--json").stdout.splitlines()] == ["k"]
