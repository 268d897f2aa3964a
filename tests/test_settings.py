"""The worker's settings, declared once (labqueue.settings): the parser, the LABQUEUE_*
variables, the value a worker process is started with and the loop all come from the fields."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
from pathlib import Path

import pytest

from labqueue import InvalidArgument
from labqueue.cli import build_parser
from labqueue.environment import (
    WORKER_SETTINGS_VARIABLE,
    take_worker_start,
    worker_defaults,
    worker_variables,
)
from labqueue.pool import WorkerPool
from labqueue.procs import worker_command, worker_environment
from labqueue.queue import JobQueue
from labqueue.schedule import Every
from labqueue.settings import PoolSettings, WorkerSettings, WorkerStart
from labqueue.worker import WorkerLoop

CHANGED = WorkerSettings(
    handlers=("myapp.jobs", "other.jobs"),
    poll=0.2,
    max_attempts=3,
    backoff_base=0.5,
    backoff_cap=30.0,
    synchronous="FULL",
    batch=4,
    commit_interval=0.0,
    queues="mail:3,reports",
    every=("report=60.0", "tidy=3600.0"),
    purge_after=86400.0,
    purge_every=30.0,
    reconnect_limit=0,
    job_timeout=900.0,
    wake=False,
    log_level="DEBUG",
    log_format="json",
    log_success=True,
)
STRICT = WorkerSettings(queues="mail,reports", strict=True)  # weights only go without --strict


def parsed(argv: list[str], cls: type = WorkerSettings, environ: dict[str, str] | None = None):
    parser = argparse.ArgumentParser(exit_on_error=False)
    cls.add_options(parser)
    worker_defaults(parser, {} if environ is None else environ)
    return cls.from_args(parser.parse_args(argv))


def test_every_field_is_changed_by_an_example():
    """So the round trip below covers every option there is."""
    for f in dataclasses.fields(WorkerSettings):
        assert getattr(CHANGED, f.name) != f.default or getattr(STRICT, f.name) != f.default, f.name


def test_no_options_are_the_defaults():
    assert parsed([]) == WorkerSettings()
    assert parsed([], PoolSettings) == PoolSettings()


RICH = Every("report", 60, payload={"to": ["ops"], "n": 1.5}, name="ops report", priority=3, queue="mail")


@pytest.mark.parametrize("settings", [CHANGED, STRICT, WorkerSettings(every=(RICH, "tidy=1h"))])
def test_every_field_travels_whole_to_a_worker_process(settings):
    start = WorkerStart("w1", 30, None, settings)
    env = worker_environment("jobs.db", "w1", 30, None, settings, environ={})
    assert env == {"LABQUEUE_DB": "jobs.db", WORKER_SETTINGS_VARIABLE: start.to_json()}
    assert take_worker_start(env) == start and WORKER_SETTINGS_VARIABLE not in env  # taken out
    assert take_worker_start(env) is None
    assert worker_command() == [sys.executable, "-m", "labqueue.worker"]  # nothing else on it


def test_a_pool_worker_process_receives_every_setting(tmp_path, monkeypatch):
    """A new field is enough for it to reach a pool's workers: what the worker process reads
    (its own environment, by labqueue.environment) is what the pool was given, field by field."""
    received = tmp_path / "received.json"
    program = (
        "import os; from labqueue.environment import take_worker_start\n"
        "start = take_worker_start()\n"
        "inherited = 'LABQUEUE_WORKER_SETTINGS' in os.environ\n"
        f"open({str(received)!r}, 'w').write('' if inherited else start.to_json())"
    )
    monkeypatch.setattr("labqueue.pool.worker_command", lambda: [sys.executable, "-c", program])
    pool = WorkerPool(tmp_path / "q.db", 1, lease_seconds=5, idle_exit=None, settings=CHANGED)
    [worker] = pool.fill()
    assert worker.proc.wait(timeout=60) == 0
    pool.reap()
    assert WorkerStart.from_json(received.read_text()) == WorkerStart("w0", 5, None, CHANGED)


def test_keywords_change_the_settings_given():
    assert worker_environment("q.db", "w", 30, 2.0, CHANGED, batch=1) == worker_environment(
        "q.db", "w", 30, 2.0, dataclasses.replace(CHANGED, batch=1)
    )
    with pytest.raises(InvalidArgument, match="WorkerSettings has no setting 'batchsize'"):
        WorkerSettings().replace(batchsize=3)


def started(**settings: object) -> str:
    """A LABQUEUE_WORKER_SETTINGS value with these settings."""
    return json.dumps({"worker_id": "w", "lease_seconds": 5, "idle_exit": None, "settings": settings})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"LABQUEUE_WORKER_SETTINGS: not JSON"),
        ("[]", r"expected a JSON object of worker_id, lease_seconds, idle_exit, settings"),
        ('{"worker_id": "w"}', r"expected a JSON object of worker_id"),
        (started().replace('"lease_seconds": 5', '"lease_seconds": 0'), r"lease_seconds"),
        (started().replace('"worker_id": "w"', '"worker_id": ""'), r"worker_id"),
        (started().replace('"settings": {}', '"settings": []'), r"WorkerSettings must be a JSON object"),
        (started(batchsize=3), "WorkerSettings has no setting 'batchsize'"),
        (started(batch="4"), r"batch: expected what --batch takes, got '4'"),
        (started(batch=0), r"batch: expected a whole number of at least 1, got '0'"),
        (started(batch=None), r"batch: expected a value like 10, got None"),
        (started(wake=1), r"wake: expected a value like True, got 1"),
        (started(handlers="m"), r"handlers: expected a JSON list"),
        (started(handlers=[5]), r"handlers: expected what --handlers takes, got 5"),
        (started(every=[{"k": 1}]), r"every: not a schedule's fields"),
    ],
)
def test_a_bad_value_is_refused_naming_the_problem(text, message):
    with pytest.raises(InvalidArgument, match=message):
        take_worker_start({WORKER_SETTINGS_VARIABLE: text})


def test_a_worker_process_with_a_bad_value_says_so(tmp_path, monkeypatch, capsys):
    from labqueue.worker import main

    monkeypatch.setenv(WORKER_SETTINGS_VARIABLE, "{not json")
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "error: LABQUEUE_WORKER_SETTINGS: not JSON" in capsys.readouterr().err
    monkeypatch.setenv(WORKER_SETTINGS_VARIABLE, WorkerStart("w", 5).to_json())
    with pytest.raises(SystemExit):
        main(["q.db", "w", "5"])  # one way at a time
    assert "LABQUEUE_WORKER_SETTINGS gives every argument; got more: q.db w 5" in capsys.readouterr().err


def test_settings_that_json_cannot_hold_are_refused_before_a_process_starts():
    odd = WorkerSettings(every=(Every("report", 60, payload={1, 2}),))
    with pytest.raises(InvalidArgument, match="cannot go to a worker process as JSON"):
        worker_environment("q.db", "w", 30, None, odd)
    assert json.loads(WorkerStart("w", 5).to_json())["idle_exit"] == 2.0  # the library's default


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch": 0}, r"batch: expected a whole number of at least 1, got '0'"),
        ({"batch": 10_001}, r"batch: expected at most 10000 jobs"),
        ({"poll": float("nan")}, r"poll: .*'nan'"),
        ({"job_timeout": 0}, r"job_timeout: .*'0'"),
        ({"synchronous": "SOMETIMES"}, r"synchronous: expected one of OFF, NORMAL, FULL, EXTRA"),
        ({"log_format": "xml"}, r"log_format: expected one of text, json, got 'xml'"),
        ({"queues": "mail:0"}, r"queues: .*weight of queue 'mail'"),
        ({"every": ("report",)}, r"every: --every needs KIND=DURATION, got 'report'"),
        ({"handlers": ("--poll=0",)}, r"handlers: a handler module name cannot be empty or begin with '-'"),
        ({"handlers": ("a\x00b",)}, r"handlers: .*handler module"),
        ({"queues": "mail:2"}, r"set turns between several queues; --queues mail:2 names one"),
        ({"queues": "mail:2,reports", "strict": True}, r"--strict orders jobs by priority across --queues"),
    ],
)
def test_settings_made_in_code_are_checked_like_the_command_lines(change, message):
    with pytest.raises(InvalidArgument, match=message):
        WorkerSettings(**change)


def test_names_for_queues_are_taken_as_written():
    settings = WorkerSettings(queues=["mail", "reports"])
    assert settings.queues == "mail,reports" and settings.queue_names == ["mail", "reports"]
    assert WorkerSettings(queues="mail:3,reports").turn_weights == {"mail": 3}


def test_a_schedule_made_in_code_is_kept_whole():
    plain = Every("report", 60)
    assert WorkerSettings(every=(plain, "tidy=1h")).schedules == [plain, Every("tidy", 3600.0)]
    assert WorkerSettings.from_json(WorkerSettings(every=(RICH,)).as_json()).schedules == [RICH]


def test_the_loop_takes_what_the_settings_say():
    loop = WorkerLoop("q.db", "w", 30, None, WorkerSettings(queues="mail:3,reports", batch=4, poll=0.2))
    assert (loop.batch, loop.poll, loop.names) == (4, 0.2, ["mail", "reports"])
    assert loop.turns is not None and loop.options == {}
    strict = WorkerLoop(
        "q.db", "w", 30, None, WorkerSettings(queues="mail,reports", strict=True, max_attempts=2)
    )
    assert strict.turns is None and strict.options == {"max_attempts": 2}


def test_the_variables_come_from_the_fields_and_the_help_names_them():
    variables = worker_variables()
    assert variables == {
        "LABQUEUE_LEASE": "lease",
        "LABQUEUE_CONCURRENCY": "concurrency",
        "LABQUEUE_GRACE": "grace",
        "LABQUEUE_QUEUES": "queues",
        "LABQUEUE_JOB_TIMEOUT": "job_timeout",
        "LABQUEUE_LOG_LEVEL": "log_level",
        "LABQUEUE_LOG_FORMAT": "log_format",
        "LABQUEUE_HANDLERS": "handlers",
    }
    worker = build_parser()._subparsers._group_actions[0].choices["worker"]  # type: ignore[union-attr]
    text = worker.format_help().replace("\n", " ")
    for variable in variables:
        assert f"[env var: {variable}]" in " ".join(text.split())


def test_labqueue_handlers_stands_in_for_handlers_not_given():
    environ = {"LABQUEUE_HANDLERS": "myapp.jobs, other.jobs"}
    assert parsed([], environ=environ).handlers == ("myapp.jobs", "other.jobs")
    assert parsed(["--handlers", "mine"], environ=environ).handlers == ("mine",)  # the command line wins
    assert parsed(["--handlers", "a", "--handlers", "b"], environ=environ).handlers == ("a", "b")
    with pytest.raises(argparse.ArgumentError, match="argument --handlers: LABQUEUE_HANDLERS='-x'"):
        parsed([], environ={"LABQUEUE_HANDLERS": "ok, -x"})


def test_only_labqueue_environment_reads_the_environment():
    """One place reads LABQUEUE_* settings: no other module of the commands and the worker
    touches os.environ, but to pass it on (procs, watchdog) or take its own slot (attribution)."""
    import labqueue

    root = Path(labqueue.__file__).parent
    readers = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "os.environ" in path.read_text()
        and not {"lab", "tutorial", "bench", "chaos", "website", "demo"} & set(path.relative_to(root).parts)
    }
    assert readers <= {"environment.py", "procs.py", "watchdog.py", "attribution.py", "postgres/server.py"}


def test_a_worker_process_reads_no_variable(tmp_path, monkeypatch, capsys):
    """Its supervisor passed on what it read; a variable must not undo an option given there."""
    from labqueue.worker import main

    monkeypatch.setenv("LABQUEUE_HANDLERS", "no_such_module_here")
    monkeypatch.setenv("LABQUEUE_DB", str(tmp_path / "q.db"))
    main(["-", "w", "30", "0"])  # no handlers of its own: it refuses, or runs those registered
    assert "no_such_module_here" not in capsys.readouterr().err


def test_the_worker_process_help_names_no_variable(capsys):
    from labqueue.worker import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "env var" not in capsys.readouterr().out


# -- defaults: stated once, and the help says the true one ------------------------------------

# Settings whose None means "the queue's own": their help names JobQueue's default.
QUEUES_OWN = {"max_attempts", "backoff_base", "backoff_cap", "synchronous"}


def shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def the_queues_defaults() -> dict[str, object]:
    return {name: p.default for name, p in inspect.signature(JobQueue).parameters.items()}


@pytest.mark.parametrize("cls", [WorkerSettings, PoolSettings])
def test_each_options_help_shows_its_true_default(cls):
    queues = the_queues_defaults()
    for f, opt in cls.options():
        default = queues[f.name] if f.name in QUEUES_OWN else f.default
        if isinstance(default, (bool, tuple)):
            continue  # a switch, or a repeatable option: nothing to show
        if default is None:
            assert "(default" in opt.help, f.name  # said in words: "(default: no limit)"
            continue
        pattern = rf"\(default[^)]*\b{re.escape(shown(default))}\b"
        assert re.search(pattern, opt.help), (f.name, default, opt.help)


def test_the_queue_defaults_are_the_same_on_both_backends_and_for_enqueue():
    pg = pytest.importorskip("labqueue.postgres.queue")
    queues = the_queues_defaults()
    pg_defaults = {name: p.default for name, p in inspect.signature(pg.PgJobQueue).parameters.items()}
    for name in QUEUES_OWN - {"synchronous"}:
        assert pg_defaults[name] == queues[name], name
    enqueue = build_parser()._subparsers._group_actions[0].choices["enqueue"]  # type: ignore[union-attr]
    [attempts] = [a for a in enqueue._actions if a.dest == "max_attempts"]
    assert f"(default {queues['max_attempts']})" in str(attempts.help)
