"""What an operator types, or another program stored, never ends badly (issue 36, the
operator-input half): the metrics endpoint listens where it was told and answers HEAD;
rows whose text is not UTF-8 or holds terminal control characters are shown escaped by
`stats`, `jobs`, `job` and the metrics; numbers and durations are bounded where they are
read, with one line naming the option and the value; a LABQUEUE_* variable a command does
not use cannot break it, and the command line wins over the environment; `health` flags a
job that has waited too long whatever holds it back; a crashed worker's note says which
job it was running and which it only held.

In-process through labqueue.cli.main where that is enough; on both backends where the
case concerns the queue (the PostgreSQL ones on a database of their own)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import urllib.request
from pathlib import Path

import pytest

from labqueue import JobQueue, open_queue
from labqueue.cli import main
from labqueue.errors import InvalidArgument
from labqueue.listing import printable
from labqueue.metrics import serve

# What a terminal would act on: clear the screen, set the window title, colour, reverse the text.
CONTROL = "\x1b[2J\x1b]0;pwned\x07\x1b[31m\u202e"
ESCAPED = "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[31m\\u202e"


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    """A queue the commands can open: a file, or a database of its own on the session's server."""
    if request.param == "sqlite":
        path = str(tmp_path / "jobs.db")
        JobQueue(path).close()
        yield path
        return
    from labqueue.postgres.server import fresh_database

    with fresh_database(request.getfixturevalue("pg_url")) as url:
        open_queue(url).close()
        yield url


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(capsys, *argv: object) -> str:
    """The command is refused as a usage error (exit code 2) in one line, which is returned."""
    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "error:" in line]
    return line


def plant(path: str, **columns: str) -> None:
    """A row written as another program might, behind the queue's back: SQL expressions."""
    values = {"kind": "'t'", "payload": "'{}'", "visible_at": "0", "created_at": "0", **columns}
    db = sqlite3.connect(path)
    db.execute(f"INSERT INTO jobs ({', '.join(values)}) VALUES ({', '.join(values.values())})")
    db.commit()
    db.close()


# -- 1. the metrics endpoint: where it listens, and HEAD ----------------------------------------


def test_an_empty_host_is_refused_naming_it(tmp_path, capsys):
    db = tmp_path / "jobs.db"
    JobQueue(db).close()
    line = usage_error(capsys, "metrics", db, "--host", "")
    assert "argument --host: an empty host would listen on every interface" in line
    assert "0.0.0.0 or ::" in line and line.endswith("got ''")
    with pytest.raises(InvalidArgument, match="got ' '"):
        serve(lambda: JobQueue(db, create=False), " ", 0)


def serving(db: Path, host: str = "127.0.0.1"):
    """The endpoint in a thread: its base URL, and the event that stops it."""
    stop, listening, where = threading.Event(), threading.Event(), []

    def ready(server):
        where.append(server.server_address[1])
        listening.set()

    reader = lambda: JobQueue(db, create=False)  # noqa: E731
    thread = threading.Thread(target=serve, args=(reader, host, 0), kwargs={"ready": ready, "stop": stop})
    thread.start()
    assert listening.wait(30)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{where[0]}", stop, thread


def test_head_answers_as_get_without_a_body(tmp_path):
    db = tmp_path / "jobs.db"
    with JobQueue(db) as q:
        q.enqueue("x", {})
    base, stop, thread = serving(db)
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as got:
            body = got.read()
        asked = urllib.request.Request(base + "/metrics", method="HEAD")
        with urllib.request.urlopen(asked, timeout=10) as head:
            assert head.status == 200
            assert head.headers["Content-Type"] == got.headers["Content-Type"]
            assert int(head.headers["Content-Length"]) == len(body) > 0
            assert head.read() == b""
    finally:
        stop.set()
        thread.join(30)


def test_an_ipv6_host_listens_on_ipv6(tmp_path):
    import socket

    if not socket.has_ipv6:
        pytest.skip("this machine has no IPv6")
    db = tmp_path / "jobs.db"
    JobQueue(db).close()
    try:
        base, stop, thread = serving(db, "::1")
    except AssertionError:
        pytest.skip("::1 is not configured here")
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as got:
            assert got.status == 200
    finally:
        stop.set()
        thread.join(30)


# -- 2. text that is not UTF-8 -------------------------------------------------------------------


@pytest.mark.parametrize("output", ["table", "json", "prometheus"])
def test_stats_shows_a_queue_name_that_is_not_utf8_escaped(tmp_path, capsys, output):
    db = str(tmp_path / "jobs.db")
    with JobQueue(db) as q:
        q.enqueue("x", {})
        q.enqueue("x", {})
        q.complete(q.claim("w")[0])  # a finished job: the throughput reads every row
    plant(db, queue="CAST(x'ff41' AS TEXT)")
    plant(db, queue="CAST(x'fe' AS TEXT)", state="'done'", finished_at="strftime('%s', 'now')")
    code, out, err = run(capsys, "stats", db, "--format", output)
    assert (code, err) == (0, "")
    if output == "json":
        assert json.loads(out)["queues"]["\\xffA"]["queued"] == 1
    elif output == "prometheus":
        assert 'labqueue_jobs{queue="\\\\xffA",state="queued"} 1' in out
        assert 'labqueue_finished_last_minute{queue="\\\\xfe",state="done"} 1' in out
    else:
        assert any(line.split()[:2] == ["\\xffA", "1"] for line in out.splitlines())


def test_a_scrape_reads_a_queue_name_that_is_not_utf8(tmp_path):
    db = str(tmp_path / "jobs.db")
    JobQueue(db).close()
    plant(db, queue="CAST(x'ff' AS TEXT)")
    base, stop, thread = serving(Path(db))
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as got:
            assert got.status == 200 and 'queue="\\\\xff"' in got.read().decode()
    finally:
        stop.set()
        thread.join(30)


# -- 3. control characters, escaped for a terminal -------------------------------------------------


def test_printable_escapes_what_a_terminal_acts_on_and_nothing_else():
    assert printable(CONTROL) == ESCAPED
    assert printable("a\nb\tc\rd\x00\x7f\x9b") == "a\\nb\\tc\\rd\\x00\\x7f\\x9b"
    assert printable("déjà vu, 東京, 👩‍💻, back\\slash") == "déjà vu, 東京, 👩‍💻, back\\slash"


def test_listings_print_control_characters_escaped_and_json_keeps_them(location, capsys):
    with open_queue(location) as q:
        job_id = q.enqueue(f"kind{CONTROL}", {"text": f"pay{CONTROL}\x85"}, queue=f"queue{CONTROL}")
        (job,) = q.claim(f"worker{CONTROL}")
        q.fail(job, f"boom{CONTROL}\nsecond line{CONTROL}", retry=False)
        q.pause(f"paused{CONTROL}", reason=f"why{CONTROL}")
        q.enqueue("x", {}, queue=f"queue{CONTROL}")  # a live job: the per-queue table lists it
    runs = [run(capsys, "stats", location), watch_once(capsys, location)]
    runs += [run(capsys, "jobs", location), run(capsys, "job", location, job_id)]
    assert [(code, err) for code, _, err in runs] == [(0, "")] * 4
    shown = [out for _, out, _ in runs]
    text = "".join(shown)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\x85" not in text
    for name in ("queue", "paused", "why"):
        assert f"{name}{ESCAPED}" in shown[0] and f"{name}{ESCAPED}" in shown[1]
    for name in ("kind", "queue", "worker", "boom"):
        assert f"{name}{ESCAPED}" in shown[2]
    for name in ("kind", "queue", "worker", "boom", "second line"):
        assert f"{name}{ESCAPED}" in shown[3]
    # the JSON escapes, and ours (\x85 is no JSON escape)
    payload = '"text": "pay\\u001b[2J\\u001b]0;pwned\\u0007\\u001b[31m\\u202e\\x85"'
    assert payload in shown[3]
    indent = len("concurrency_limit: ")  # the longest field name, its colon and a space
    assert f"\n{'':<{indent}}second line{ESCAPED}\n" in shown[3]  # the error's second line, indented
    out = run(capsys, "job", location, job_id, "--json")[1]
    record = json.loads(out)
    assert record["kind"] == f"kind{CONTROL}" and record["payload"] == {"text": f"pay{CONTROL}\x85"}
    assert "\x1b" not in out  # JSON escapes them itself


def watch_once(capsys, location: str) -> tuple[int, str, str]:
    """`stats --watch`: one reading, then Ctrl-C (the stop flag its signal handler sets)."""
    import signal

    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    try:
        return run(capsys, "stats", location, "--watch", "0.2")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [
        ("created_at", "1e300", "1e+300"),
        ("created_at", "'yesterday'", "yesterday"),
        ("visible_at", "9e999", "inf"),
        ("finished_at", "-1e20", "-1e+20"),
        ("payload", "x'00ff10'", '"\\u0000\\\\xff\\u0010"'),
        ("worker", "x'1b5b324a'", "b'\\x1b[2J'"),
    ],
)
def test_job_and_jobs_show_any_stored_value(tmp_path, capsys, column, value, shown):
    db = str(tmp_path / "jobs.db")
    JobQueue(db).close()
    plant(db, **{column: value})
    for argv in (["job", db, "1"], ["job", db, "1", "--json"], ["jobs", db], ["jobs", db, "--json"]):
        code, out, err = run(capsys, *argv)
        assert (code, err) == (0, ""), argv
    code, out, _ = run(capsys, "job", db, "1")
    assert shown in out


# -- 4. numbers and durations have bounds, refused where they are read ----------------------------

HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    ("argv", "option", "value"),
    [
        (["worker", "{db}", "--concurrency", HUGE], "--concurrency", HUGE),
        (["worker", "{db}", "--concurrency", "1025"], "--concurrency", "1025"),
        (["worker", "{db}", "--batch", HUGE], "--batch", HUGE),
        (["worker", "{db}", "--poll", "1e300"], "--poll", "1e300"),
        (["worker", "{db}", "--poll", "1e-300"], "--poll", "1e-300"),
        (["worker", "{db}", "--lease", "1e300"], "--lease", "1e300"),
        (["worker", "{db}", "--grace", "1e300"], "--grace", "1e300"),
        (["worker", "{db}", "--job-timeout", "6000w"], "--job-timeout", "6000w"),
        (["worker", "{db}", "--every", "report=1e-300"], "--every", "1e-300"),
        (["worker", "{db}", "--every", "report=1e300"], "--every", "1e300"),
        (["stats", "{db}", "--watch", "1e300"], "--watch", "1e300"),
        (["enqueue", "{db}", "x", "{{}}", "--delay", "1e12"], "--delay", "1e12"),
        (["purge", "{db}", "--older-than", "1e300"], "--older-than", "1e300"),
        (["health", "{db}", "--max-oldest-ready", "1e300"], "--max-oldest-ready", "1e300"),
    ],
)
def test_a_number_out_of_bounds_is_one_line_naming_the_option_and_the_value(
    tmp_path, capsys, argv, option, value
):
    db = tmp_path / "jobs.db"
    JobQueue(db).close()
    line = usage_error(capsys, *(word.format(db=db) for word in argv))
    assert f"argument {option}: " in line and f"{value}'" in line
    with JobQueue(db) as q:
        assert q.counts()["queued"] == 0  # nothing was changed


def test_labqueue_concurrency_out_of_bounds_names_the_variable(tmp_path, capsys, monkeypatch):
    db = tmp_path / "jobs.db"
    JobQueue(db).close()
    monkeypatch.setenv("LABQUEUE_CONCURRENCY", HUGE)
    line = usage_error(capsys, "worker", db, "--handlers", "labqueue.demo.handlers")
    assert f"LABQUEUE_CONCURRENCY='{HUGE}'" in line and "1024" in line


def test_the_duration_bounds_hold_at_their_edges():
    from labqueue.durations import parse_duration
    from labqueue.validate import MAX_SECONDS, MIN_SECONDS

    assert parse_duration("5217w") == 5217 * 604800 < MAX_SECONDS < 5218 * 604800
    assert parse_duration(repr(MAX_SECONDS)) == MAX_SECONDS
    assert parse_duration("1e-6", allow_zero=False) == MIN_SECONDS
    assert parse_duration("0") == 0
    for text in ("5218w", "1e-7", "1e-300", "1e300"):
        with pytest.raises(InvalidArgument, match=f"got '{text}'"):
            parse_duration(text)


def test_the_queue_refuses_a_delay_or_period_no_clock_can_honour(make_queue, clock):
    from labqueue.schedule import Every

    q = make_queue()
    for call in (
        lambda: q.enqueue("x", {}, delay=1e12),
        lambda: q.enqueue("x", {}, delay=10**400),
        lambda: q.every("x", 1e-300),
        lambda: q.every("x", 1e300),
        lambda: Every("x", 1e-300),
    ):
        with pytest.raises(InvalidArgument, match=r"(delay|seconds) must be (a finite|at most|at least)"):
            call()
    assert q.counts()["queued"] == 0
    assert q.enqueue("x", {}, delay=86400 * 365) is not None  # a year is fine
    assert q.every("x", 1e-6) is not None  # and a microsecond's period


def test_a_pool_or_a_worker_loop_refuses_what_they_could_not_run(tmp_path):
    from labqueue import worker as worker_loop
    from labqueue.pool import WorkerPool

    with pytest.raises(InvalidArgument, match=f"size must be a whole number from 0 to 1024 .*got {HUGE}"):
        WorkerPool(tmp_path / "jobs.db", int(HUGE))
    JobQueue(tmp_path / "jobs.db").close()
    with pytest.raises(InvalidArgument, match=r"poll: .*got '1e\+300'"):
        worker_loop.run(str(tmp_path / "jobs.db"), "w", 30.0, poll=1e300)
    with pytest.raises(InvalidArgument, match=r"lease_seconds must be .*got 1e\+300"):
        JobQueue(tmp_path / "jobs.db", lease_seconds=1e300)


# -- 5. LABQUEUE_* variables: read by the command that uses them, and the command line wins -------

WORKER_VARIABLES = {
    "LABQUEUE_CONCURRENCY": "many",
    "LABQUEUE_LEASE": "soon",
    "LABQUEUE_GRACE": "-1",
    "LABQUEUE_QUEUES": ",",
    "LABQUEUE_LOG_LEVEL": "loud",
    "LABQUEUE_LOG_FORMAT": "xml",
    "LABQUEUE_JOB_TIMEOUT": "never",
}


def test_worker_variables_cannot_break_a_command_that_does_not_use_them(location, capsys, monkeypatch):
    for variable, bad in WORKER_VARIABLES.items():
        monkeypatch.setenv(variable, bad)
    with open_queue(location) as q:
        q.enqueue("x", {})
    for argv in (["health"], ["stats"], ["jobs"], ["purge", "--older-than", "1d"], ["job", "1"]):
        code, _, err = run(capsys, argv[0], location, *argv[1:])
        assert (code, err) == (0, ""), argv


@pytest.mark.parametrize(("variable", "option", "given", "value"), [
    ("LABQUEUE_LEASE", "--lease", "5", 5.0),
    ("LABQUEUE_CONCURRENCY", "--concurrency", "2", 2),
    ("LABQUEUE_LOG_FORMAT", "--log-format", "json", "json"),
    ("LABQUEUE_JOB_TIMEOUT", "--job-timeout", "1m", 60.0),
])  # fmt: skip
def test_the_command_line_wins_over_a_bad_variable(
    tmp_path, capsys, monkeypatch, variable, option, given, value
):
    from labqueue.cli import build_parser

    monkeypatch.setenv(variable, WORKER_VARIABLES[variable])
    args = build_parser().parse_args(["worker", str(tmp_path / "jobs.db"), option, given])
    assert getattr(args, option[2:].replace("-", "_")) == value
    line = usage_error(capsys, "worker", tmp_path / "jobs.db")  # without the option, the variable is read
    assert f"argument {option}: {variable}='{WORKER_VARIABLES[variable]}'" in line


def test_a_good_variable_still_stands_in_for_its_option(tmp_path, monkeypatch):
    from labqueue.cli import build_parser

    monkeypatch.setenv("LABQUEUE_LEASE", "2m")
    monkeypatch.setenv("LABQUEUE_LOG_LEVEL", "debug")
    args = build_parser().parse_args(["worker", str(tmp_path / "jobs.db")])
    assert (args.lease, args.log_level) == (120.0, "DEBUG")


# -- 6. health flags a job that has waited too long, whatever keeps it ----------------------------


def give_back(q, kind: str = "theirs") -> None:
    """What every worker does with a kind it has no handler for: give the job back, hidden."""
    from labqueue.unknown_kinds import UNKNOWN_KIND_DELAY

    jobs = [job for job in q.claim("w", limit=10) if job.kind == kind]
    assert q.put_back(jobs, UNKNOWN_KIND_DELAY, f"no handler for kind {kind!r}") == len(jobs)


def test_a_job_no_worker_handles_is_flagged_by_max_waiting_alone(make_queue, clock):
    from labqueue.health import judge

    q = make_queue()
    stuck = q.enqueue("theirs", {})
    for _ in range(40):  # ten minutes of workers giving it back
        give_back(q)
        clock.advance(15)
    give_back(q)
    clock.advance(1)
    stats = q.stats()
    assert stats["ready_now"] == 0 and stats["queued"] == 1  # hidden: the oldest ready job misses it
    assert q.longest_waiting() == (stuck, 601.0)
    assert judge(stats, max_oldest_ready=30, max_dead=0).healthy
    verdict = judge(stats, max_oldest_ready=30, max_waiting=300, longest_waiting=q.longest_waiting())
    assert verdict.line == (
        f"unhealthy: job {stuck} has waited 601 s since it was created, over --max-waiting 5m "
        f"('labqueue job DB {stuck}' shows why)"
    )
    assert judge(stats, max_waiting=900, longest_waiting=q.longest_waiting()).line.endswith(
        f"; job {stuck} queued longest, 601 s"
    )


def test_longest_waiting_is_the_queued_job_created_first_whatever_its_state_was(make_queue, clock):
    q = make_queue()
    assert q.longest_waiting() is None
    first = q.enqueue("x", {})
    clock.advance(10)
    q.enqueue("x", {}, delay=3600)
    clock.advance(10)
    (job,) = q.claim("w", limit=1)  # the first one runs: it waits no more
    assert job.id == first and q.longest_waiting() == (first + 1, 10.0)
    q.complete(job)
    q.pause("default")  # a paused queue's jobs wait too
    clock.advance(100)
    assert q.longest_waiting() == (first + 1, 110.0)


def test_health_max_waiting_on_the_command_line(location, capsys):
    with open_queue(location) as q:
        stuck = q.enqueue("theirs", {})
        give_back(q)
        q.db.execute("UPDATE jobs SET created_at = created_at - 7200")  # two hours ago
        q.db.commit()
    code, out, _ = run(capsys, "health", location, "--max-oldest-ready", "5m")
    assert (code, out.split(":")[0]) == (0, "healthy")
    code, out, _ = run(capsys, "health", location, "--max-oldest-ready", "5m", "--max-waiting", "1h")
    assert code == 1 and out.startswith(f"unhealthy: job {stuck} has waited 720")
    assert "over --max-waiting 1h" in out
    code, out, _ = run(capsys, "stats", location, "--format", "prometheus")
    (gauge,) = [line for line in out.splitlines() if line.startswith("labqueue_longest_waiting_seconds ")]
    assert 7200 <= float(gauge.split()[1]) < 7300


# -- 7. a crashed worker's note: the job it was running, and the ones it only held ----------------

CRASHING = '''
import os

from labqueue import handler


@handler("crash")
def crash(job, q):
    os._exit(3)


@handler("noop")
def noop(job, q):
    return None
'''


def test_crash_messages_say_running_only_of_the_job_that_ran():
    from labqueue.attribution import crash_message

    assert crash_message(3, running=True) == "worker crashed (exit code 3) while running this job"
    killed = "worker crashed (signal SIGKILL) while holding this job"
    assert crash_message(-9, running=False) == f"{killed}, not running it"
    assert crash_message(-9) == killed  # nobody said which job ran
    assert crash_message(75, running=True) == (
        "worker stopped (exit code 75: a job ran past its time limit) while running this job"
    )


def test_a_running_slot_carries_the_running_job_to_the_supervisor(tmp_path):
    from labqueue.attribution import RUNNING_SLOT_VARIABLE, RunningSlot, running_publisher

    slot = RunningSlot()
    assert slot.environment() == {RUNNING_SLOT_VARIABLE: str(slot.fd)}
    inherited = os.dup(slot.fd)  # the worker's own descriptor of it (pass_fds), which it closes
    environ = {RUNNING_SLOT_VARIABLE: str(inherited), "OTHER": "kept"}
    publish = running_publisher(environ)
    assert publish is not None and environ == {"OTHER": "kept"}  # no process it starts inherits it
    assert slot.read() is None
    publish(42)
    assert slot.read() == 42
    publish(None)
    assert slot.read() is None
    publish(2**63 - 1)
    assert slot.read() == 2**63 - 1
    slot.close()
    assert slot.read() is None
    named = tmp_path / "eight.bytes"
    named.write_bytes(b"12345678")
    with named.open("r+b") as held:  # a descriptor that is no slot (a file with a name) is left alone
        assert running_publisher({RUNNING_SLOT_VARIABLE: str(held.fileno())}) is None
    assert named.read_bytes() == b"12345678"
    assert running_publisher({RUNNING_SLOT_VARIABLE: "not a number"}) is None
    assert running_publisher({}) is None


def test_a_crashed_workers_batch_says_which_job_ran_and_which_it_only_held(location, tmp_path, monkeypatch):
    from cli_helpers import wait_for

    from labqueue.pool import WorkerPool

    (tmp_path / "crashing_jobs.py").write_text(CRASHING)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with open_queue(location) as q:
        crash = q.enqueue("crash", {}, priority=1)  # claimed first, run first
        held = [q.enqueue("noop", {}) for _ in range(3)]  # claimed in its batch, never started
    pool = WorkerPool(location, 1, handlers=("crashing_jobs",), note_crashes=True, names="pool/{}".format)
    try:
        pool.fill()
        wait_for(lambda: pool.check() is not None and pool.restarts >= 1)
    finally:
        pool.kill_all()
    assert pool.crashed_jobs == {"pool/0": [crash, *held]}
    assert pool.ended[0].last_running == crash
    with open_queue(location) as q:
        notes = {job_id: q.job(job_id).last_error for job_id in (crash, *held)}
    assert notes[crash] == "worker crashed (exit code 3) while running this job (worker pool/0)"
    for job_id in held:
        assert notes[job_id] == (
            "worker crashed (exit code 3) while holding this job, not running it (worker pool/0)"
        )


def test_without_a_slot_every_note_says_holding(tmp_path):
    from labqueue.attribution import note_crash

    db = str(tmp_path / "jobs.db")
    with JobQueue(db) as q:
        q.enqueue_many("x", [{}] * 2)
        ids = [job.id for job in q.claim("w", limit=2)]
    assert note_crash(db, "w", -9) == ids
    with JobQueue(db) as q:
        notes = {q.job(i).last_error for i in ids}
    assert notes == {"worker crashed (signal SIGKILL) while holding this job (worker w)"}
