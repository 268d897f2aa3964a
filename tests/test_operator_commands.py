"""Operator commands fit for a bad day (issue 23): health, metrics, purge explaining what
it kept, stats stamped with the time, settings from LABQUEUE_* variables. In-process
through labqueue.cli.main where that is enough; one subprocess for the metrics server."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
from cli_helpers import LogReader

from labqueue import JobQueue
from labqueue.cli import build_parser, main
from labqueue.health import judge
from labqueue.metrics import prometheus_text, read, serve


@pytest.fixture
def db(tmp_path):
    return tmp_path / "jobs.db"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- health ---------------------------------------------------------------------------------


def test_health_judges_the_thresholds_with_a_reason():
    stats = {"queued": 4, "running": 1, "ready_now": 3, "oldest_ready_age_s": 400.0, "dead": 2}
    assert judge(stats).healthy
    assert judge(stats, max_oldest_ready=600, max_dead=2).line.startswith("healthy: 3 ready")
    late = judge(stats, max_oldest_ready=300)
    assert not late.healthy
    assert late.reason == "the oldest ready job has waited 400 s, over --max-oldest-ready 5m"
    assert judge(stats, max_dead=1).line == "unhealthy: 2 dead job(s), over --max-dead 1"


def test_health_command_exits_0_or_1_with_one_line(db, capsys):
    with JobQueue(db) as q:
        q.enqueue("x", {})
        for job in q.claim("w"):
            q.fail(job, "boom", retry=False)
    code, out, _ = run(capsys, "health", db, "--max-dead", "0")
    assert (code, out) == (1, "unhealthy: 1 dead job(s), over --max-dead 0\n")
    code, out, _ = run(capsys, "health", db, "--max-dead", "1", "--max-oldest-ready", "5m")
    assert code == 0 and out.startswith("healthy: ")
    code, out, _ = run(capsys, "health", db.parent / "missing.db")
    assert code == 1 and out.startswith("unhealthy: cannot read the queue: no such file")
    assert not (db.parent / "missing.db").exists()


# -- purge says what it kept ------------------------------------------------------------------


def test_purge_takes_a_week_and_says_it_kept_the_newest_row(db, capsys):
    with JobQueue(db) as q:
        for _ in range(2):
            q.enqueue("x", {})
        for job in q.claim("w", limit=2):
            q.complete(job)
    code, out, _ = run(capsys, "purge", db, "--older-than", "1w")
    assert code == 0 and "removed 0 job(s)" in out and "kept" not in out  # finished just now (real clock)
    with JobQueue(db) as q:  # make them a fortnight old
        q.db.execute("UPDATE jobs SET created_at = created_at - 1209600, finished_at = finished_at - 1209600")
        q.db.commit()
    code, out, _ = run(capsys, "purge", db, "--older-than", "1w")
    assert "removed 1 job(s)" in out
    assert "kept the newest row, id 2, so ids are never reused" in out


def test_a_bad_duration_names_the_value(db, capsys):
    JobQueue(db).close()
    with pytest.raises(SystemExit) as exit_:
        main(["purge", str(db), "--older-than", "1 fortnight"])
    assert exit_.value.code == 2
    assert "got '1 fortnight'" in capsys.readouterr().err


# -- stats: stamped JSON, Prometheus text ----------------------------------------------------------


def test_stats_json_carries_the_time_of_the_reading(db, capsys):
    with JobQueue(db) as q:
        q.enqueue("x", {}, queue="mail")
    code, out, _ = run(capsys, "stats", db, "--json")
    sample = json.loads(out)
    assert code == 0 and sample["queued"] == 1 and sample["queues"]["mail"]["queued"] == 1
    assert isinstance(sample["at"], float)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", sample["at_utc"])


def test_prometheus_text_has_every_family_with_escaped_labels(make_queue, clock):
    q = make_queue()
    q.enqueue("x", {}, queue='say "hi"\\now')
    q.enqueue("x", {})
    (job,) = q.claim("w", queues=["default"])
    q.complete(job)
    clock.advance(30)
    text = prometheus_text(read(q))
    assert 'labqueue_jobs{queue="say \\"hi\\"\\\\now",state="queued"} 1' in text
    assert 'labqueue_oldest_ready_age_seconds{queue="say \\"hi\\"\\\\now"} 30.0' in text
    assert "labqueue_dead_jobs 0" in text
    assert 'labqueue_finished_last_minute{queue="default",state="done"} 1' in text
    clock.advance(60)
    assert "labqueue_finished_last_minute{" not in prometheus_text(read(q))  # older than a minute
    families = ("labqueue_jobs", "labqueue_ready_jobs", "labqueue_dead_jobs", "labqueue_finished_last_minute")
    for name in families:
        assert f"# TYPE {name} gauge" in text


def test_stats_prints_prometheus_text(db, capsys):
    with JobQueue(db) as q:
        q.enqueue("x", {})
    code, out, _ = run(capsys, "stats", db, "--format", "prometheus")
    assert code == 0 and 'labqueue_jobs{queue="default",state="queued"} 1' in out


# -- the metrics endpoint -------------------------------------------------------------------------


def scrape(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_the_endpoint_serves_metrics_and_stays_up_when_the_queue_cannot_be_read(db):
    with JobQueue(db) as q:
        q.enqueue("x", {})
    broken = threading.Event()
    stop, listening = threading.Event(), threading.Event()
    where: list[int] = []

    def open_reader():
        if broken.is_set():
            raise OSError("the disk went away")
        return JobQueue(db, create=False)

    def ready(server):
        where.append(server.server_address[1])
        listening.set()

    options = {"ready": ready, "stop": stop}
    thread = threading.Thread(target=serve, args=(open_reader, "127.0.0.1", 0), kwargs=options)
    thread.start()
    try:
        assert listening.wait(30)
        base = f"http://127.0.0.1:{where[0]}"
        status, kind, body = scrape(base + "/metrics")
        assert status == 200 and kind.startswith("text/plain; version=0.0.4")
        assert 'labqueue_jobs{queue="default",state="queued"} 1' in body
        assert scrape(base + "/")[0] == 404
        broken.set()
        status, _, body = scrape(base + "/metrics")
        assert status == 503 and "OSError" in body and "the disk went away" not in body  # one line, no text
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_the_metrics_command_listens_on_localhost_and_stops_on_sigterm(db):
    JobQueue(db).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "labqueue", "metrics", str(db), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log = LogReader(proc)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/metrics", line).group(0)
        assert scrape(url)[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in log.text()


# -- LABQUEUE_* variables ---------------------------------------------------------------------------


def test_environment_variables_stand_in_for_options_and_flags_win(monkeypatch, db):
    monkeypatch.setenv("LABQUEUE_DB", str(db))
    monkeypatch.setenv("LABQUEUE_CONCURRENCY", "3")
    monkeypatch.setenv("LABQUEUE_LOG_FORMAT", "json")
    monkeypatch.setenv("LABQUEUE_GRACE", "30s")
    args = build_parser().parse_args(["worker", "--concurrency", "2"])
    assert (args.concurrency, args.log_format, args.grace) == (2, "json", 30.0)


def test_labqueue_db_is_used_when_no_db_is_given(monkeypatch, db, capsys):
    with JobQueue(db) as q:
        q.enqueue("x", {})
    monkeypatch.setenv("LABQUEUE_DB", str(db))
    code, out, _ = run(capsys, "health")
    assert code == 0 and out.startswith("healthy: 1 ready")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [("LABQUEUE_CONCURRENCY", "many", "LABQUEUE_CONCURRENCY='many'"),
     ("LABQUEUE_LOG_FORMAT", "xml", "LABQUEUE_LOG_FORMAT='xml': expected one of text, json")],
)  # fmt: skip
def test_a_bad_variable_is_one_line_naming_it(monkeypatch, capsys, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exit_:
        main(["worker", "x.db"])  # the command that uses it; `labqueue stats` does not read it
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_no_db_and_no_variable_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("LABQUEUE_DB", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["stats"])
    assert exit_.value.code == 2 and "DB (or set LABQUEUE_DB)" in capsys.readouterr().err
