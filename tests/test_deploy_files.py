"""The deployment examples (deploy/, shown in docs/deploy.md) say what the worker does: the
signal the service manager sends is the one the supervisor treats as a warm stop, it is sent
to the supervisor alone, the manager waits longer than --grace, and every command line parses."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import signal
from pathlib import Path

import pytest

from labqueue.cli import build_parser
from labqueue.durations import parse_duration
from labqueue.pool import StopSignals

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def warm_stop_signals() -> set[str]:
    """The signals whose first delivery the supervisor reads as a warm stop."""
    candidates = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
    before = {sig: signal.getsignal(sig) for sig in candidates}
    signals = StopSignals()
    try:
        signals.install()
        return {sig.name for sig in before if signal.getsignal(sig) is signals}
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def worker_args(argv: list[str]):
    assert Path(argv[0]).name == "labqueue", argv
    return build_parser().parse_args(argv[1:])


def test_the_systemd_unit_stops_warm_within_its_timeout():
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read(DEPLOY / "labqueue-worker.service")
    service = unit["Service"]
    assert service["KillSignal"] in warm_stop_signals()
    assert service["KillMode"] == "mixed"  # SIGTERM to the supervisor alone: one signal per worker
    args = worker_args(shlex.split(service["ExecStart"]))
    assert args.command == "worker" and args.handlers == ["myapp.jobs"] and args.grace is not None
    assert parse_duration(service["TimeoutStopSec"]) > args.grace


def test_the_container_stops_warm_and_checks_its_health():
    lines = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    steps = [line.split(None, 1) for line in lines if line and not line.startswith("#")]
    instruction = {word: rest for word, rest in steps}
    assert instruction["STOPSIGNAL"] in warm_stop_signals()
    cmd = json.loads(instruction["CMD"])
    assert worker_args(cmd).command == "worker"  # exec form: the supervisor is PID 1 and gets the signal
    health = json.loads(re.search(r"CMD (\[.*\])", instruction["HEALTHCHECK"]).group(1))
    assert worker_args(health).command == "health"
    env = dict(re.findall(r"(LABQUEUE_\w+)=(\S+)", instruction["ENV"]))
    assert {"LABQUEUE_DB", "LABQUEUE_HANDLERS", "LABQUEUE_GRACE"} <= set(env)

    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    worker = compose["worker"]
    assert worker["stop_signal"] in warm_stop_signals()
    assert parse_duration(worker["stop_grace_period"]) > parse_duration(env["LABQUEUE_GRACE"])
    assert worker_args(worker["healthcheck"]["test"][1:]).command == "health"
    assert worker_args(compose["metrics"]["command"]).command == "metrics"


def test_the_guide_shows_the_files_as_they_are():
    guide = (ROOT / "docs" / "deploy.md").read_text()
    for name in ("labqueue-worker.service", "Dockerfile", "compose.yaml"):
        assert (DEPLOY / name).read_text() in guide, name
