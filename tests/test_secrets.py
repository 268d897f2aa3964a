"""No password leaves the process (issue 36): a password planted in a database URL never
appears in what any `labqueue` command prints, logs or reports, in an error message, in a
repr, or on a worker process's command line (/proc/PID/cmdline): the supervisor hands each
worker its location in LABQUEUE_DB instead. labqueue.redaction.redact is the one redaction.

The unreachable URL (port 1 refuses at once) plants the password in its user info and in a
`password=` parameter; the live tests plant it in a URL of the suite's throwaway server,
whose trust authentication ignores it."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import pytest
from cli_helpers import LogReader, labqueue, start, wait_for

from labqueue.procs import kill_tree
from labqueue.redaction import redact, secrets_of

SECRET = "Plant3dSecret"  # also the start of the second one: one search finds both
UNREACHABLE = f"postgresql://user:{SECRET}@127.0.0.1:1/db?password={SECRET}2&connect_timeout=5"
DEMO_HANDLERS = "labqueue.demo.handlers"
ENV_COMMANDS = ("worker", "stats", "jobs", "purge", "pause", "resume", "health", "metrics")


def clean(*texts: object) -> None:
    for text in texts:
        assert SECRET not in str(text), text


# -- the redaction itself -----------------------------------------------------------------

REDACTED = [
    ("postgresql://app:s3cret@db/jobs", "postgresql://app:***@db/jobs"),
    ("postgresql://app@db/jobs", "postgresql://app@db/jobs"),
    ("postgresql://postgres:@/postgres?host=/tmp/x", "postgresql://postgres:@/postgres?host=/tmp/x"),
    ("postgresql://db/jobs?password=s3cret&sslmode=require", "postgresql://db/jobs?password=***&sslmode=require"),
    ("postgresql://db/jobs?p%61ssword=s3cret", "postgresql://db/jobs?p%61ssword=***"),
    ("postgresql://db/jobs?sslpassword=s3cret", "postgresql://db/jobs?sslpassword=***"),
    ("postgresql://u:s3cret@[::1/db", "postgresql://u:***@[::1/db"),  # an unclosed IPv6 bracket
    ("postgresql://u:s3/cr?et@h/db", "postgresql://u:***@h/db"),  # unencoded / and ? in it
    ("postgresql://u:s3@cret@h/db", "postgresql://u:***@h/db"),  # an unencoded @
    ("postgresq://u:s3cret@h/db", "postgresq://u:***@h/db"),  # any scheme
    ("postgresql://a/b:s3cret@h/db", "postgresql://***:***@h/db"),  # no user name to keep
    ("host=db password=s3cret dbname=jobs", "host=db password=*** dbname=jobs"),
    ("host=db password = 's3 cret' dbname=jobs", "host=db password = *** dbname=jobs"),
    ("error at 'postgresql://u:s3cret@h/db' (x)", "error at 'postgresql://u:***@h/db' (x)"),
    ("/var/lib/app/jobs.db", "/var/lib/app/jobs.db"),
]


@pytest.mark.parametrize(("text", "shown"), REDACTED)
def test_redact_masks_every_password_and_keeps_the_rest(text, shown):
    assert redact(text) == shown
    assert redact(shown) == shown  # redacting twice changes nothing


@pytest.mark.parametrize(
    ("message", "location"),
    [
        ('invalid percent-encoded token: "s3c%zzret"', "postgresql://u:s3c%zzret@h/db"),
        ('invalid integer value "s3cr" for connection option "port"', "postgresql://u:s3cr/et@h/db"),
        ('unexpected spaces found in "s3c ret"', "postgresql://u:s3c%20ret@h/db"),
        ("password s3cret was refused", "postgresql://h/db?password=s3cret"),
    ],
)
def test_redact_masks_a_locations_password_quoted_alone(message, location):
    """libpq's own messages can quote a password, or the piece of one it misread, alone."""
    shown = redact(message, location)
    assert "***" in shown
    assert not any(secret in shown for secret in secrets_of(location))


def test_secrets_of_a_path_or_a_url_without_a_password_are_none():
    assert secrets_of(Path("/srv/jobs.db")) == set()
    assert secrets_of("postgresql://app@db/jobs?host=/tmp") == set()
    assert secrets_of(None) == set()


# -- every command, the server unreachable --------------------------------------------------

# A worker waits out a server it cannot reach, as after a lost connection: within its
# --reconnect-limit, each try logged (and redacted) too.
COMMANDS = [
    ("worker", "DB", "--handlers", DEMO_HANDLERS, "--idle-exit", "0", "--reconnect-limit", "1"),
    ("worker", "DB", "--handlers", DEMO_HANDLERS, "--concurrency", "2", "--idle-exit", "0", "--reconnect-limit", "1"),  # noqa: E501
    ("enqueue", "DB", "noop", "{}"),
    ("enqueue", "DB", "noop", "-"),
    ("stats", "DB"),
    ("stats", "DB", "--json"),
    ("stats", "DB", "--format", "prometheus"),
    ("stats", "DB", "--watch", "1"),
    ("jobs", "DB"),
    ("job", "DB", "1"),
    ("requeue-dead", "DB", "--all"),
    ("cancel", "DB", "1"),
    ("purge", "DB", "--older-than", "1d"),
    ("pause", "DB", "--queue", "q"),
    ("resume", "DB", "--queue", "q"),
    ("health", "DB"),
    ("metrics", "DB", "--port", "0"),
]


def run_with(argv: tuple[str, ...], location: str, *, by_env: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("LABQUEUE_DB", None)
    if by_env:
        env["LABQUEUE_DB"] = location
        args = [a for a in argv if a != "DB"]
    else:
        args = [location if a == "DB" else a for a in argv]
    return labqueue(*args, stdin='{"n": 1}\n', env=env)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_no_command_shows_the_password_when_the_server_cannot_be_reached(argv):
    result = run_with(argv, UNREACHABLE, by_env=False)
    assert result.returncode == 1, result.stderr
    clean(result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "postgresql://user:***@127.0.0.1:1/db?password=***" in result.stdout + result.stderr


@pytest.mark.parametrize("argv", [c for c in COMMANDS if c[0] in ENV_COMMANDS], ids=" ".join)
def test_no_command_shows_the_password_it_read_from_labqueue_db(argv):
    result = run_with(argv, UNREACHABLE, by_env=True)
    assert result.returncode == 1, result.stderr
    clean(result.stdout, result.stderr)


MALFORMED = [
    f"postgresql://user:{SECRET}@[::1/db",  # an unclosed IPv6 bracket
    f"postgresql://user:{SECRET}%zz@127.0.0.1:1/db",  # a bad percent escape, quoted by libpq
    f"postgresql://user:{SECRET}/x@127.0.0.1:1/db",  # libpq reads part of it as a port
    f"postgresql://127.0.0.1:1/db?password={SECRET}&nonsense=1",  # an unknown parameter
    f"postgresql://127.0.0.1:1/db?password={SECRET}%00",  # a forbidden escape, quoted by libpq
    f"postgresq://user:{SECRET}@127.0.0.1:1/db",  # a misspelt scheme: not a URL labqueue knows
    f"host=127.0.0.1 password={SECRET}",  # a libpq conninfo string: a file name to labqueue
]


@pytest.mark.parametrize("location", MALFORMED, ids=range(len(MALFORMED)))
@pytest.mark.parametrize("command", [("stats", "DB"), ("jobs", "DB"), ("health", "DB")], ids=" ".join)
def test_a_malformed_location_is_a_one_line_error_without_the_password(location, command):
    result = run_with(command, location, by_env=False)
    assert result.returncode in (1, 2), result.stderr
    clean(result.stdout, result.stderr)
    assert "Traceback" not in result.stderr


def test_a_url_given_where_another_value_belongs_is_echoed_without_its_password(tmp_path):
    result = labqueue("jobs", tmp_path / "jobs.db", "--limit", UNREACHABLE)
    assert result.returncode == 2
    clean(result.stderr)
    assert "user:***@" in result.stderr


def test_the_worker_module_typed_by_hand_shows_no_password():
    command = [sys.executable, "-m", "labqueue.worker", UNREACHABLE, "w1", "5", "0"]
    command += ["--handlers", DEMO_HANDLERS, "--reconnect-limit", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    clean(result.stdout, result.stderr)
    assert "stopped: cannot connect to postgresql://user:***@" in result.stderr


def test_a_dash_for_db_reads_labqueue_db_and_says_when_it_is_unset():
    env = {k: v for k, v in os.environ.items() if k != "LABQUEUE_DB"}
    command = [sys.executable, "-m", "labqueue.worker", "--handlers", DEMO_HANDLERS, "--reconnect-limit", "1"]
    command += ["--", "-", "w1", "5", "0"]
    unset = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert unset.returncode == 2 and "LABQUEUE_DB" in unset.stderr
    given = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**env, "LABQUEUE_DB": UNREACHABLE}
    )
    assert given.returncode == 1 and "cannot connect to postgresql://user:***@" in given.stderr
    clean(given.stderr)


def test_the_python_api_keeps_the_password_out_of_errors():
    from labqueue import CannotOpen, InvalidArgument, open_queue
    from labqueue.procs import worker_environment

    with pytest.raises(CannotOpen) as lost:
        open_queue(UNREACHABLE)
    with pytest.raises(InvalidArgument) as malformed:
        open_queue(MALFORMED[1])
    with pytest.raises(InvalidArgument) as nul:
        worker_environment(UNREACHABLE + "\x00", "w", 5)
    clean(lost.value, malformed.value, nul.value)


# -- a live server ----------------------------------------------------------------------------


@pytest.fixture
def planted(pg_url) -> str:
    """A fresh database on the session's server, its URL carrying the planted password
    (twice: in the user info and as a password parameter) unless it has one already."""
    from labqueue.postgres.server import fresh_database

    with fresh_database(pg_url, prefix="secrets") as database:
        parts = urlsplit(database)
        if parts.password:  # a server that checks passwords: its own one is the secret
            pytest.skip("LABQUEUE_PG_URL carries a password of its own; the test plants one")
        user = parts.username or "postgres"
        host = parts.netloc.rpartition("@")[2]
        query = "&".join(filter(None, [parts.query, f"password={SECRET}2"]))
        yield urlunsplit(parts._replace(netloc=f"{user}:{SECRET}@{host}", query=query))


def environment(location: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LABQUEUE_DB"}
    return env if location is None else {**env, "LABQUEUE_DB": location}


@contextmanager
def running(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """`labqueue ARGS...` in the background, killed on the way out with every worker it started
    (they run in sessions of their own: killing the supervisor alone would orphan them)."""
    proc = start(*args, env=env)
    try:
        yield proc
    finally:
        kill_tree(proc)


def stop(proc: subprocess.Popen, sig: signal.Signals) -> tuple[str, str]:
    """Send `sig` and read what the process wrote until it ended."""
    proc.send_signal(sig)
    return proc.communicate(timeout=60)


def exec_done(pid: int, timeout: float = 60.0) -> None:
    """Wait until a child just started has replaced this process's program with its own."""
    ours = psutil.Process().cmdline()
    deadline = time.monotonic() + timeout
    while psutil.Process(pid).cmdline() == ours:
        assert time.monotonic() < deadline, f"process {pid} did not start its program in {timeout} s"
        time.sleep(0.01)


def command_line(pid: int) -> str:
    """A process's command line as every local user can read it."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.exists():
        return proc.read_bytes().replace(b"\x00", b" ").decode(errors="replace")
    return " ".join(psutil.Process(pid).cmdline())


def test_every_command_on_a_live_server_shows_no_password(planted):
    outputs = []

    def ok(*args: str, by_env: bool = False) -> str:
        argv = [a for a in args if a != "DB"] if by_env else [planted if a == "DB" else a for a in args]
        result = labqueue(*argv, env=environment(planted if by_env else None), stdin='{"n": 2}\n')
        outputs.append(result.stdout + result.stderr)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert ok("enqueue", "DB", "noop", '{"n": 1}') == "1\n"
    assert ok("enqueue", "DB", "noop", "-") == "enqueued 1 job(s)\n"
    assert json.loads(ok("stats", "--json", by_env=True))["queued"] == 2
    ok("stats", "DB")
    ok("stats", "DB", "--format", "prometheus")
    assert len(ok("jobs", "DB", "--json").splitlines()) == 2
    ok("job", "DB", "1")
    ok("job", "DB", "1", "--json")
    ok("pause", "DB", "--queue", "default", "--reason", "maintenance")
    ok("resume", "--queue", "default", by_env=True)
    ok("cancel", "DB", "2")
    ok("health", "DB")
    ok("purge", "--older-than", "1w", by_env=True)
    ok("requeue-dead", "DB", "--all")
    ok("worker", "DB", "--handlers", DEMO_HANDLERS, "--idle-exit", "0", "--log-success")
    assert "started on" in outputs[-1] and ":***@" in outputs[-1]  # the worker's log was read
    assert json.loads(ok("stats", "DB", "--json"))["queued"] == 0
    clean(*outputs)


@pytest.mark.parametrize("by_env", [True, False], ids=["LABQUEUE_DB", "argument"])
def test_worker_processes_get_the_location_by_environment_never_on_their_command_line(planted, by_env):
    options = ["--handlers", DEMO_HANDLERS, "--concurrency", "2"]
    args = ["worker", *options] if by_env else ["worker", planted, *options]
    with running(*args, env=environment(planted if by_env else None)) as proc:
        log = LogReader(proc)
        wait_for(lambda: sum("started on" in line for line in log.lines) >= 2, timeout=60)
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert len(workers) == 2
        for worker in workers:
            clean(command_line(worker.pid))
            assert "labqueue.worker" in command_line(worker.pid)
            assert worker.environ()["LABQUEUE_DB"] == planted  # its owner alone can read this
        if by_env:
            clean(command_line(proc.pid))  # the supervisor's own: nothing typed, nothing shown
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    text = log.text()
    clean(text, proc.stdout.read())
    started = [line for line in text.splitlines() if "started on" in line]
    assert started and all(":***@" in line and "password=***" in line for line in started)


def test_stats_watch_heads_each_reading_without_the_password(planted):
    labqueue("enqueue", planted, "noop", "{}")
    headings: list[str] = []
    with running("stats", planted, "--watch", "0.2") as proc:
        while len(headings) < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            if " UTC (every " in line:
                headings.append(line)
        out, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 0
    assert all(":***@" in line for line in headings)
    clean(*headings, out, err)


def test_the_metrics_endpoint_starts_and_answers_without_the_password(planted):
    labqueue("enqueue", planted, "noop", "{}")
    with running("metrics", "--port", "0", env=environment(planted)) as proc:
        line = proc.stdout.readline()
        assert "serving metrics of" in line and ":***@" in line, proc.stderr.read()
        url = line.rsplit(" at ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read().decode()
        assert response.status == 200 and "labqueue_jobs" in body
        out, err = stop(proc, signal.SIGTERM)
    clean(line, body, out, err)


def test_the_pool_and_start_worker_pass_the_location_by_environment(planted):
    from labqueue.pool import WorkerPool
    from labqueue.procs import start_worker

    with ExitStack() as stack:
        pool = WorkerPool(planted, 2, idle_exit=None, handlers=[DEMO_HANDLERS])
        stack.callback(pool.kill_all)
        started = [w.proc for w in pool.fill()]
        alone = start_worker(planted, "alone", 5, idle_exit=60, handlers=[DEMO_HANDLERS])
        stack.callback(kill_tree, alone)
        for proc in [*started, alone]:
            assert proc.poll() is None
            exec_done(proc.pid)  # until then the child shows this process's command and environment
            clean(command_line(proc.pid), proc.args)
            assert psutil.Process(proc.pid).environ()["LABQUEUE_DB"] == planted


def test_reprs_show_no_password(planted):
    from labqueue.chaos.supervisor import ChaosResult
    from labqueue.lab.postgres_lab import Server
    from labqueue.postgres import PgJobQueue

    with PgJobQueue(planted) as q:
        clean(repr(q), q._pg.where)
    server = Server(planted, 1.0, "17", ExitStack())
    clean(repr(server), server.line())
    assert not next(f for f in dataclasses.fields(ChaosResult) if f.name == "path").repr


def test_a_chaos_run_on_a_url_with_a_password_shows_none(planted):
    result = labqueue("chaos", "--db", planted, "--jobs", "20", "--workers", "2", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "PASS" in result.stdout
    clean(result.stdout, result.stderr)


def test_the_throwaway_server_tool_prints_a_given_url_redacted(planted):
    proc = subprocess.Popen(
        [sys.executable, "-m", "labqueue.postgres.server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LABQUEUE_PG_URL": planted},
    )
    try:
        line = proc.stdout.readline()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert line.startswith("postgresql://") and ":***@" in line
    clean(line, out, err)
