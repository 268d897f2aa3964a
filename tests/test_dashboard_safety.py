"""The dashboard and the metrics endpoint tried as an attacker's web page would: a request
whose Host header names another site (DNS rebinding) gets 421 and no page on every route,
actions included; tokens shorter than 32 characters are refused; HEAD answers as GET does
without a body; error pages say what failed in one line, without an exception's text; the
job page shows the concurrency key and limit."""

from __future__ import annotations

import contextlib
import http.client
import sqlite3
import threading
import urllib.request

import pytest

from labqueue import cli, metrics
from labqueue.dashboard import Dashboard, check_exposure, serve
from labqueue.errors import InvalidArgument
from labqueue.hosts import AllowedHosts, allowed_name, host_name

TOKEN = "t" * 16 + "0123456789abcdef"  # 32 characters
FOREIGN = "rebind.attacker.example"
ROUTES = ["/", "/jobs", "/jobs?state=dead", "/dead", "/running", "/jobs/1", "/static/dashboard.css",
          "/static/refresh.js", "/favicon.ico", "/nowhere"]  # fmt: skip


def board(make_queue, **options) -> Dashboard:
    return Dashboard(make_queue, where="test queue", **options)


def form(dash: Dashboard, **fields: object) -> bytes:
    fields = {**fields, "csrf": dash.guard.csrf}
    return "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in fields.items()).encode()


# -- the Host allow-list ------------------------------------------------------------------


def test_a_foreign_host_gets_no_page_on_any_route(make_queue):
    q = make_queue()
    q.enqueue("secret-kind", {"card": "4111"})
    dash = board(make_queue)
    for route in ROUTES:
        for method in ("GET", "HEAD"):
            answer = dash.respond(method, route, {"Host": f"{FOREIGN}:9188"})
            assert answer.status == 421, (method, route, answer.status)
            assert b"secret-kind" not in answer.body and b"4111" not in answer.body
    assert dash.respond("GET", "/", {"Host": "127.0.0.1:9188"}).status == 200


def test_a_foreign_host_can_take_no_action_even_with_the_csrf_token_and_its_own_origin(make_queue):
    q = make_queue()
    job_id = q.enqueue("email", {})
    dash = board(make_queue, allow_actions=True)
    # what a rebinding page does: it read the form from its own Host, so Origin matches Host
    headers = {"Host": f"{FOREIGN}:9188", "Origin": f"http://{FOREIGN}:9188"}
    for action, fields in (("cancel", {"id": job_id}), ("pause", {"queue": "default"})):
        answer = dash.respond("POST", f"/actions/{action}", headers, form(dash, **fields))
        assert answer.status == 421
    assert q.job(job_id).state == "queued" and q.paused() == {}
    local = {"Host": "localhost:9188", "Origin": "http://localhost:9188"}
    assert dash.respond("POST", "/actions/cancel", local, form(dash, id=job_id)).status == 200


@pytest.mark.parametrize(
    "header", ["localhost", "LOCALHOST:9188", "localhost.:80", "127.0.0.1", "127.0.0.2:9188", "[::1]:9188"]
)
def test_localhost_and_the_loopback_addresses_are_answered(header):
    assert AllowedHosts("127.0.0.1").admits(header)


@pytest.mark.parametrize(
    "header",
    [FOREIGN, f"{FOREIGN}:9188", "localhost.attacker.example", "127.0.0.1.nip.io", "192.168.1.4", "",
     "local host", "[::1", "[evil]:80", "localhost:http", "a@localhost"],
)  # fmt: skip
def test_other_names_and_malformed_hosts_are_refused(header):
    assert not AllowedHosts("127.0.0.1").admits(header)


def test_the_listen_address_added_names_and_every_interface():
    assert AllowedHosts("dashboard.internal").admits("dashboard.internal:9188")
    added = AllowedHosts("127.0.0.1", ["hub.example.org", "10.0.0.5"])
    assert (
        added.admits("hub.example.org") and added.admits("HUB.example.org:443") and added.admits("10.0.0.5")
    )
    assert not added.admits("example.org") and not added.admits("10.0.0.6")
    every = AllowedHosts("0.0.0.0")
    assert every.admits("10.1.2.3:9188") and every.admits("[fe80::1]:9188")  # a visit by address
    assert not every.admits(f"{FOREIGN}:9188")
    assert AllowedHosts("::", ["*"]).admits(FOREIGN)
    assert AllowedHosts("127.0.0.1").admits(None)  # no Host: HTTP/1.0 or a script, not a browser
    assert host_name("[::1]:80") == "::1" and allowed_name("::1") == "::1"
    for bad in ("http://hub.example.org", "hub.example.org:80", "a b", ""):
        with pytest.raises(InvalidArgument, match="--allow-host"):
            allowed_name(bad)


def test_any_host_needs_a_token():
    with pytest.raises(InvalidArgument, match="token"):
        Dashboard(lambda: None, where="x", allow_hosts=["*"])
    Dashboard(lambda: None, where="x", allow_hosts=["*"], token=TOKEN)


@contextlib.contextmanager
def running(target, *args, **options):
    stop, started = threading.Event(), []
    thread = threading.Thread(
        target=target, args=args, kwargs={"ready": started.append, "stop": stop, **options}, daemon=True
    )
    thread.start()
    for _ in range(200):
        if started:
            break
        threading.Event().wait(0.05)
    try:
        yield started[0].server_address[1]
    finally:
        stop.set()
        thread.join(10)


def request(port: int, method: str, path: str, host: str, body: bytes = b"", **headers: str):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest(method, path, skip_host=True)
    connection.putheader("Host", host)
    for name, value in {**headers, "Content-Length": str(len(body))}.items():
        connection.putheader(name, value)
    connection.endheaders(body)
    answer = connection.getresponse()
    try:
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def test_over_http_a_foreign_host_is_refused_and_head_has_no_body(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        job_id = q.enqueue("email", {"to": "ada@example.com"})
    dash = Dashboard(lambda: cli.open_existing(str(path)), where="jobs.db", allow_actions=True,
                     allow_hosts=["hub.example.org"])  # fmt: skip
    with running(serve, dash, "127.0.0.1", 0) as port:
        status, _, body = request(port, "GET", "/", f"{FOREIGN}:{port}")
        assert status == 421 and b"ada@example.com" not in body and b"<dl" not in body
        foreign = {"Origin": f"http://{FOREIGN}:{port}", "Content-Type": "application/x-www-form-urlencoded"}
        assert request(port, "POST", "/actions/cancel", FOREIGN, form(dash, id=job_id), **foreign)[0] == 421
        assert request(port, "POST", "/actions/cancel", FOREIGN, b"x" * 70_000, **foreign)[0] == 421
        status, headers, body = request(port, "GET", f"/jobs/{job_id}", "hub.example.org")
        assert status == 200 and b"ada@example.com" in body
        status, head_headers, head_body = request(port, "HEAD", f"/jobs/{job_id}", f"127.0.0.1:{port}")
        assert status == 200 and head_body == b""
        assert head_headers["Content-Type"] == headers["Content-Type"]
    with JobQueue(path) as q:
        assert q.job(job_id).state == "queued"


def test_the_metrics_endpoint_answers_only_the_hosts_it_serves(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("x", {}, queue="payroll")

    def open_reader():
        return JobQueue(path, create=False)

    with running(metrics.serve, open_reader, "127.0.0.1", 0, allow_hosts=["prometheus.internal"]) as port:
        for method in ("GET", "HEAD"):
            status, _, body = request(port, method, "/metrics", f"{FOREIGN}:{port}")
            assert status == 421 and b"labqueue_" not in body and b"payroll" not in body
        assert b'queue="payroll"' in request(port, "GET", "/metrics", f"localhost:{port}")[2]
        assert request(port, "GET", "/metrics", "prometheus.internal:9187")[0] == 200


def test_the_commands_take_allow_host_and_refuse_a_bad_one(tmp_path, capsys):
    from labqueue import JobQueue

    JobQueue(tmp_path / "jobs.db").close()
    for command in ("metrics", "dashboard"):
        with pytest.raises(SystemExit) as stopped:
            cli.main([command, str(tmp_path / "jobs.db"), "--allow-host", "http://x.example/"])
        assert stopped.value.code == 2 and "--allow-host" in capsys.readouterr().err
    args = cli.build_parser().parse_args(["dashboard", "x.db", "--allow-host", "Hub.Example.org"])
    assert args.allow_host == ["hub.example.org"]


# -- tokens -------------------------------------------------------------------------------


def test_a_short_token_is_refused_everywhere(tmp_path, capsys, monkeypatch):
    for token in ("abcd", "x" * 31):
        with pytest.raises(InvalidArgument, match="at least 32 characters"):
            check_exposure("127.0.0.1", token)
        with pytest.raises(InvalidArgument, match="at least 32 characters"):
            Dashboard(lambda: None, where="x", token=token)
    check_exposure("0.0.0.0", TOKEN)
    from labqueue import JobQueue

    db = str(tmp_path / "jobs.db")
    JobQueue(db).close()
    with pytest.raises(SystemExit) as stopped:
        cli.main(["dashboard", db, "--token", "abcd", "--port", "0"])
    err = capsys.readouterr().err
    assert (
        stopped.value.code == 2 and "at least 32 characters" in err and "abcd" not in err.split("error:")[1]
    )
    monkeypatch.setenv("LABQUEUE_DASHBOARD_TOKEN", "abcd")
    with pytest.raises(SystemExit):
        cli.main(["dashboard", db, "--host", "0.0.0.0", "--port", "0"])
    assert "at least 32 characters" in capsys.readouterr().err


def test_a_token_in_the_url_becomes_a_strict_cookie_and_leaves_the_url(make_queue):
    dash = board(make_queue, token=TOKEN)
    first = dash.respond("GET", f"/jobs?kind=email&token={TOKEN}", {"Host": "localhost:9188"})
    assert first.status == 303 and TOKEN not in first.headers["Location"]
    assert first.headers["Location"] == "jobs?kind=email"
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and first.body == b""


# -- HEAD, the job page, error pages --------------------------------------------------------


def test_head_answers_as_get_does(make_queue):
    make_queue().enqueue("email", {})
    dash = board(make_queue)
    for route in ("/", "/jobs", "/jobs/1", "/static/dashboard.css", "/jobs/999", "/nowhere"):
        got, head = dash.respond("GET", route, {}), dash.respond("HEAD", route, {})
        assert head.status == got.status and head.headers == got.headers, route


def test_the_job_page_shows_its_concurrency_key_and_limit(make_queue):
    q = make_queue()
    job_id = q.enqueue("sync", {}, concurrency_key="customer-42", concurrency_limit=3)
    page = board(make_queue).respond("GET", f"/jobs/{job_id}", {}).body.decode()
    assert "<dt>concurrency key</dt><dd>customer-42</dd>" in page
    assert "<dt>concurrency limit</dt><dd>3</dd>" in page


class Broken:
    """A queue whose reads fail as `error` says."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def __getattr__(self, name: str):  # every method of a queue, none of its properties
        if name == "path":
            raise AttributeError(name)

        def fails(*args, **kwargs):
            raise self.error

        return fails


@pytest.mark.parametrize(
    ("error", "status"),
    [(sqlite3.OperationalError("disk I/O error reading /srv/secret/internal.db"), 503),
     (ValueError("internal state: /srv/secret/internal.db"), 500)],
)  # fmt: skip
def test_error_pages_say_what_failed_in_one_line_without_the_exception_text(error, status, caplog):
    dash = Dashboard(lambda: Broken(error), where="jobs.db")
    answer = dash.respond("GET", "/", {})
    page = answer.body.decode()
    assert answer.status == status
    assert "/srv/secret" not in page and "internal state" not in page and "Traceback" not in page
    problem = page.split('<p class="problem">')[1].split("</p>")[0]
    assert "\n" not in problem and problem
    assert "/srv/secret/internal.db" in caplog.text  # the operator's log has it


# -- a file this user may only read ----------------------------------------------------------


@pytest.fixture
def read_only_file(tmp_path):
    """A queue file (with a few jobs, and its -wal and -shm) this user may read but not write:
    mode 0444, and for root, which ignores modes, the immutable attribute (chattr +i)."""
    import os
    import shutil

    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("email", {"to": "ada@example.com"}, concurrency_key="acct-7", concurrency_limit=2)
        q.fail(q.claim("w")[0], "boom", retry=False)
        q.enqueue("email", {"to": "bob@example.com"})
    path.chmod(0o444)
    locked = []
    if os.access(path, os.W_OK):  # root
        if shutil.which("chattr") is None or not subprocess_ok(["chattr", "+i", str(path)]):
            path.chmod(0o644)
            pytest.skip("running as root, and chattr +i is not available to make a read-only file")
        locked.append(path)
    try:
        assert not os.access(path, os.W_OK)
        yield path
    finally:
        for each in locked:
            subprocess_ok(["chattr", "-i", str(each)])
        path.chmod(0o644)


def subprocess_ok(command: list[str]) -> bool:
    import subprocess

    return subprocess.run(command, capture_output=True).returncode == 0


def test_a_file_this_user_may_only_read_opens_read_only(read_only_file):
    from labqueue import JobQueue
    from labqueue.errors import CannotOpen
    from labqueue.queue import writable

    assert not writable(read_only_file)
    with pytest.raises(CannotOpen, match="read-only for this user"):
        JobQueue(read_only_file, create=False)
    with JobQueue(read_only_file, create=False, read_only=True) as q:
        with q.read_only():
            assert q.stats()["dead"] == 1
        with pytest.raises(CannotOpen):
            q.enqueue("email", {})
    assert [j.state for j in JobQueue(read_only_file, create=False, read_only=True).jobs()] == [
        "dead",
        "queued",
    ]


def test_the_dashboard_of_a_read_only_file_serves_every_page_and_says_why_it_cannot_act(read_only_file):
    import re
    import subprocess
    import sys

    command = [
        sys.executable,
        "-m",
        "labqueue",
        "dashboard",
        str(read_only_file),
        "--port",
        "0",
        "--allow-actions",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline()
            assert "this user may only read jobs.db" in line, line + proc.stderr.read()
            port = int(re.search(r":(\d+)/", line)[1])
            host = f"127.0.0.1:{port}"
            for route in ("/", "/jobs", "/dead", "/running", "/jobs/1", "/jobs/2"):
                status, _, body = request(port, "GET", route, host)
                assert status == 200, (route, body[:300])
                assert b"actions are unavailable, this user may only read jobs.db" in body
                assert b'<form class="action"' not in body
            assert b"acct-7" in request(port, "GET", "/jobs/1", host)[2]
            status, _, body = request(port, "POST", "/actions/requeue", host, b"all=1")
            assert status == 403 and b"this user may only read jobs.db" in body
        finally:
            proc.terminate()
            proc.wait(10)


# -- bounded reads ------------------------------------------------------------------------


def test_a_timed_read_only_block_stops_a_long_read(make_queue):
    from labqueue.errors import QueueBusy

    q = make_queue()
    q.enqueue("email", {})
    if hasattr(q, "path"):  # SQLite: a statement that counts for a long time
        slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    else:
        slow = "SELECT pg_sleep(30)"
    with pytest.raises(QueueBusy, match="statement timeout"), q.read_only(timeout=0.2):
        q.db.execute(slow).fetchall()
    with q.read_only(timeout=0.2):  # the next block reads as before
        assert q.stats()["queued"] == 1
    assert q.enqueue("email", {}) is not None  # and writes again after it


def test_the_chart_counts_only_the_jobs_above_an_id(make_queue, clock):
    q = make_queue()
    q.enqueue_many("email", [{"n": n} for n in range(6)])
    ids = []
    for job in q.claim("w", limit=6):
        q.complete(job)
        ids.append(job.id)
    ids.sort()
    every = q.throughput(3600, 60)["default"]["done"]
    newest = q.throughput(3600, 60, after_id=ids[3])["default"]["done"]
    assert (sum(every), sum(newest)) == (6, 2)


def test_the_overview_bounds_its_chart_and_tabs_share_one_reading(make_queue, monkeypatch):
    from labqueue.dashboard import reading

    q = make_queue()
    q.enqueue_many("email", [{"n": n} for n in range(5)])
    for job in q.claim("w", limit=5):
        q.complete(job)
    monkeypatch.setattr(reading, "CHART_ROWS", 2)
    dash = board(make_queue)
    page = dash.respond("GET", "/", {}).body.decode()
    assert 'data-chart-after="3"' in page and "3 done (in the last step)" not in page
    assert "2 done (in the last step)" in page
    q.enqueue("email", {})
    again = dash.respond("GET", "/", {}).body.decode()
    assert again == page  # within OVERVIEW_MAX_AGE: the same reading
    assert dash.connections.opened == 1  # one queue, kept open from request to request


def test_shared_reads_once_per_max_age():
    from labqueue.clock import FakeClock
    from labqueue.dashboard.reading import Shared

    clock, reads = FakeClock(), []
    shared = Shared(2.0, clock)
    for _ in range(5):
        shared.get(lambda: reads.append(1) or len(reads))
    clock.advance(2.0)
    assert shared.get(lambda: reads.append(1) or len(reads)) == 2 and len(reads) == 2


def test_the_server_answers_on_a_fixed_few_threads_and_turns_the_rest_away():
    import socket
    from http.server import BaseHTTPRequestHandler

    from labqueue.serving import LINE_PER_THREAD, PooledHTTPServer

    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(10)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    before = threading.active_count()
    server = PooledHTTPServer(("127.0.0.1", 0), Slow, threads=2)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    serving.start()
    port = server.server_address[1]
    clients = []
    try:
        for _ in range(2 + 2 * LINE_PER_THREAD + 3):
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            client.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            clients.append(client)
        for _ in range(100):
            if server.turned_away >= 3:
                break
            threading.Event().wait(0.05)
        assert server.turned_away == 3
        assert threading.active_count() == before + 3  # two answering, one accepting
        release.set()
        answers = [client.recv(64) for client in clients]
        assert sum(a.startswith(b"HTTP/1.0 204") for a in answers) == 2 + 2 * LINE_PER_THREAD
        assert sum(a.startswith(b"HTTP/1.0 503") for a in answers) == 3
    finally:
        release.set()
        for client in clients:
            client.close()
        server.shutdown()
        server.server_close()
