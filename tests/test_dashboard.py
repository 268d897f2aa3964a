"""labqueue dashboard: each view and each action on both backends (make_queue), the
escaping of every value from a row, the CSRF and access tokens, actions off, error pages
for a missing, locked or broken queue, and the overview's numbers against `labqueue stats`.

Most tests call Dashboard.respond() directly (one request in, one Response out); a few go
through the real HTTP server, and one through the `labqueue dashboard` command."""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from importlib import resources
from urllib.parse import urljoin

import pytest

from labqueue import cli
from labqueue.dashboard import Dashboard, NeedsToken, check_exposure, is_loopback, serve
from labqueue.dashboard.reading import PAGE_SIZE
from labqueue.errors import CannotOpen, InvalidArgument

EVIL = "<script>alert(1)</script>"


def board(make_queue, **options) -> Dashboard:
    return Dashboard(make_queue, where="test queue", **options)


def get(dash: Dashboard, target: str, **headers: str):
    response = dash.respond("GET", target, headers)
    return response.status, response.body.decode()


def post(dash: Dashboard, action: str, form: dict, *, csrf: bool = True, **headers: str):
    fields = {**form, **({"csrf": dash.guard.csrf} if csrf else {})}
    body = "&".join(f"{k}={urllib.request.quote(str(v))}" for k, v in fields.items()).encode()
    response = dash.respond("POST", f"/actions/{action}", headers, body)
    return response.status, response.body.decode()


def numbers(page: str, attribute: str) -> dict[str, str]:
    return dict(re.findall(rf'data-{attribute}="([^"]+)">([^<]*)<', page))


def queue_row(page: str, name: str) -> dict[str, str]:
    row = re.search(rf'<tr data-queue="{re.escape(name)}">(.*?)</tr>', page)
    assert row, f"no row for queue {name!r}"
    return numbers(row[1], "col")


def ids_shown(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-id="(\d+)">', page)]


def seed(q, clock) -> dict[str, list[int]]:
    """Jobs in every state across two named queues, and a pause."""
    made = {"queued": [], "scheduled": []}
    for i in range(6):
        made["queued"].append(q.enqueue("email", {"n": i}, queue="mail" if i % 2 else "default"))
    made["scheduled"].append(q.enqueue("report", {"n": 99}, delay=600, queue="mail"))
    done, dead, running = q.claim("w-a", limit=1), q.claim("w-b", limit=1), q.claim("w-c", limit=1)
    q.complete(done[0])
    q.fail(dead[0], "boom: the mail server said no", retry=False)
    made.update(done=[done[0].id], dead=[dead[0].id], running=[running[0].id])
    q.pause("mail", reason="the mail server is down")
    clock.advance(5)
    return made


# -- the overview -------------------------------------------------------------------------


def test_the_overview_shows_what_stats_says_per_queue_with_the_chart(make_queue, clock):
    q = make_queue()
    seed(q, clock)
    status, page = get(board(make_queue), "/")
    assert status == 200
    stats = q.stats()
    assert numbers(page, "stat") == {key: str(value) for key, value in stats.items()}
    for name, live in q.queue_stats().items():
        row = queue_row(page, name)
        assert {key: row[key] for key in live} == {key: str(value) for key, value in live.items()}
    mail = queue_row(page, "mail")
    assert (mail["scheduled"], mail["dead"], queue_row(page, "default")["dead"]) == ("1", "1", "0")
    totals = q.queue_totals()
    assert sum(int(queue_row(page, n)["dead"]) for n in totals) == stats["dead"] == 1
    assert sum(int(queue_row(page, n)["finished_last_minute"]) for n in ("default", "mail")) == 2
    assert "paused" in page and "the mail server is down" in page
    assert '<svg class="chart"' in page and "1 done, 1 dead (in the last step)" in page


def test_the_overview_names_the_full_keys_that_hold_ready_jobs_back(make_queue):
    q = make_queue()
    q.enqueue_many("sync", [{"n": n} for n in range(3)], concurrency_key="customer:<1>", concurrency_limit=1)
    q.enqueue("sync", {}, concurrency_key="customer:2", concurrency_limit=2)
    assert "Waiting on a full concurrency key" not in get(board(make_queue), "/")[1]  # no key full yet
    q.claim_batch("w", 10)  # customer:<1> at its limit, with two jobs behind it; customer:2 has room
    page = get(board(make_queue), "/")[1]
    assert q.waiting_on_keys() == {"customer:<1>": 2}
    assert 'data-waiting-on-keys="2"' in page
    assert '<tr data-key="customer:&lt;1&gt;"><th scope="row">customer:&lt;1&gt;</th><td>2</td></tr>' in page
    assert 'data-key="customer:2"' not in page


def test_the_overview_numbers_match_the_labqueue_stats_command(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue_many("email", [{"n": n} for n in range(7)], queue="mail")
        q.enqueue("email", {}, delay=3600)
        q.fail(q.claim("w")[0], "no", retry=False)
        q.claim("w")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["stats", str(path), "--json"]) == 0
    printed = json.loads(out.getvalue())
    dash = Dashboard(lambda: cli.open_existing(str(path)), where=str(path))
    page = get(dash, "/")[1]
    shown = numbers(page, "stat")
    for key in ("queued", "running", "ready_now", "dead"):
        assert shown[key] == str(printed[key]), key
    assert abs(float(shown["oldest_ready_age_s"]) - printed["oldest_ready_age_s"]) < 2
    for name, row in printed["queues"].items():
        assert queue_row(page, name)["queued"] == str(row["queued"])


# -- the lists ----------------------------------------------------------------------------


def test_the_jobs_list_is_newest_first_filtered_and_paged_by_id(make_queue, clock):
    q = make_queue()
    q.enqueue_many("email", [{"n": n} for n in range(PAGE_SIZE + 20)])
    other = q.enqueue("sms", {"to": "+44"}, queue="texts")
    dash = board(make_queue)
    page = get(dash, "/jobs")[1]
    first = ids_shown(page)
    assert first == sorted(first, reverse=True) and len(first) == PAGE_SIZE and first[0] == other
    older = re.search(r'rel="next" href="([^"]+)"', page)[1]
    assert html.unescape(older) == f"jobs?before={first[-1]}"
    second = ids_shown(get(dash, "/" + html.unescape(older))[1])
    assert len(second) == 21 and second[0] == first[-1] - 1  # no row twice, none missed
    assert 'rel="next"' not in get(dash, html.unescape(older))[1]
    assert ids_shown(get(dash, "/jobs?kind=sms")[1]) == [other]
    assert ids_shown(get(dash, "/jobs?queue=texts&state=queued")[1]) == [other]
    assert ids_shown(get(dash, "/jobs?queue=texts&state=done")[1]) == []
    assert get(dash, "/jobs?state=nonsense")[0] == 400
    assert get(dash, "/jobs?before=12abc")[0] == 400


def test_the_dead_letters_show_their_errors(make_queue, clock):
    q = make_queue()
    made = seed(q, clock)
    status, page = get(board(make_queue), "/dead")
    assert status == 200 and ids_shown(page) == made["dead"]
    assert "boom: the mail server said no" in page


def test_the_running_jobs_show_their_holder_and_the_lease_left(make_queue, clock):
    q = make_queue()
    made = seed(q, clock)
    page = get(board(make_queue), "/running")[1]
    assert ids_shown(page) == made["running"]
    assert "w-c" in page
    assert re.search(r'data-left="25\.0">25\.0 s<', page)  # a 30 s lease, 5 s gone
    clock.advance(40)
    assert "expired 15 s ago" in get(board(make_queue), "/running")[1]


def test_a_jobs_page_shows_its_payload_attempts_error_and_times(make_queue, clock):
    q = make_queue()
    made = seed(q, clock)
    dash = board(make_queue)
    status, page = get(dash, f"/jobs/{made['dead'][0]}")
    assert status == 200
    assert "1 of 3" in page and "boom: the mail server said no" in page
    assert re.search(r"&quot;n&quot;: \d", page)  # the payload as indented JSON
    assert "1970-01-01 00:16:40 UTC" in page and "(5 s ago)" in page  # created at 1000.0
    assert get(dash, "/jobs/987654")[0] == 404
    assert get(dash, "/nowhere")[0] == 404
    assert get(dash, "/favicon.ico")[0] == 204


def test_every_value_from_a_row_is_shown_as_text(make_queue, clock):
    q = make_queue()
    job = q.enqueue(EVIL, {"html": "</pre><script>x()</script>"}, queue="<img src=x onerror=alert(1)>")
    q.fail(q.claim("<b>worker</b>")[0], f"{EVIL}\nsecond line", retry=False)
    q.pause("<img src=x onerror=alert(1)>", reason=EVIL)
    dash = board(make_queue, allow_actions=True)
    for target in ("/", "/jobs", "/dead", f"/jobs/{job}", f"/jobs?kind={urllib.request.quote(EVIL)}"):
        page = get(dash, target)[1]
        assert "<script>alert" not in page and "<script>x" not in page and "<img src=x" not in page, target
        assert "&lt;script&gt;" in page or "&lt;img" in page, target
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\nsecond line" in get(dash, f"/jobs/{job}")[1]


def test_pages_allow_only_the_packages_own_css_and_script(make_queue):
    response = board(make_queue).respond("GET", "/", {})
    policy = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
    page = response.body.decode()
    assert re.findall(r"<script[^>]*>", page) == ['<script src="static/refresh.js" defer>']
    assert " style=" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_every_link_stays_under_a_proxys_prefix_and_reaches_a_page(make_queue, clock):
    """Behind Jupyter's /proxy/9188/ (Binder) the server sees /jobs; the browser resolves
    each link against the page's own URL and <base>: every one must land under the prefix."""
    made = seed(make_queue(), clock)
    dash = board(make_queue, allow_actions=True)
    prefix = "http://lab.example/user/x/proxy/9188"
    seen = set()
    for target in ("/", "/jobs", "/dead", "/running", f"/jobs/{made['dead'][0]}", "/nowhere/at/all"):
        page = get(dash, target)[1]
        base = urljoin(prefix + target, re.search(r'<base href="([^"]+)">', page)[1])
        for link in re.findall(r'(?<!<base )(?:href|src|action)="([^"]+)"', page):
            resolved = urljoin(base, html.unescape(link))
            assert resolved.startswith(prefix + "/"), (target, link, resolved)
            seen.add(resolved[len(prefix) :])
    assert {"/", "/jobs", "/dead", "/running", "/static/dashboard.css", f"/jobs/{made['dead'][0]}"} <= seen
    for path in seen - {p for p in seen if p.startswith("/actions/")}:
        assert get(dash, path)[0] == 200, path
    status, page = post(dash, "requeue", {"id": made["dead"][0]})
    assert status == 200
    back = re.search(r'<a href="([^"]+)">Back</a>', page)[1]
    base = re.search(r'<base href="([^"]+)">', page)[1]
    assert urljoin(urljoin(f"{prefix}/actions/requeue", base), back) == f"{prefix}/jobs/{made['dead'][0]}"


def test_a_page_reads_in_one_read_only_transaction(make_queue):
    q = make_queue()
    with q.read_only(), pytest.raises(CannotOpen):
        q.enqueue("email", {})
    assert q.enqueue("email", {}) is not None  # writable again after it


# -- actions ------------------------------------------------------------------------------


def test_requeue_one_filtered_and_all(make_queue, clock):
    q = make_queue()
    ids = [q.enqueue("email" if n < 3 else "sms", {"n": n}, queue="a" if n % 2 else "b") for n in range(5)]
    for job in q.claim("w", limit=5):
        q.fail(job, "no", retry=False)
    dash = board(make_queue, allow_actions=True)
    assert post(dash, "requeue", {"id": ids[0]})[0] == 200
    assert q.job(ids[0]).state == "queued"
    assert post(dash, "requeue", {"id": ids[0]})[0] == 400  # not dead any more
    status, page = post(dash, "requeue", {"kind": "sms", "queue": "a"})
    assert status == 200 and "1 dead job(s) requeued" in page
    assert q.job(ids[3]).state == "queued" and q.job(ids[4]).state == "dead"
    assert post(dash, "requeue", {})[0] == 400  # says which, or all
    assert "3 dead job(s) requeued" in post(dash, "requeue", {"all": "1"})[1], q.counts()
    assert q.counts()["dead"] == 0


def test_cancel_pause_and_resume(make_queue, clock):
    q = make_queue()
    job = q.enqueue("email", {})
    dash = board(make_queue, allow_actions=True)
    status, page = post(dash, "cancel", {"id": job})
    assert status == 200 and "cancelled (it was queued)" in page and q.job(job).state == "cancelled"
    assert post(dash, "cancel", {"id": job})[0] == 409
    assert post(dash, "pause", {"queue": "mail", "reason": "maintenance"})[0] == 200
    assert q.paused()["mail"]["reason"] == "maintenance"
    assert "paused already" in post(dash, "pause", {"queue": "mail"})[1]
    assert post(dash, "resume", {"queue": "mail"})[0] == 200 and q.paused() == {}
    assert post(dash, "resume", {"queue": ""})[0] == 400


def test_actions_are_refused_when_off_and_their_forms_not_shown(make_queue, clock):
    q = make_queue()
    made = seed(q, clock)
    dash = board(make_queue)
    assert post(dash, "requeue", {"id": made["dead"][0]})[0] == 403
    assert q.job(made["dead"][0]).state == "dead"
    assert '<form class="action"' not in get(dash, "/dead")[1]
    assert dash.respond("PUT", "/", {}).status == 405


def test_a_post_without_the_csrf_token_or_from_another_site_is_refused(make_queue, clock):
    q = make_queue()
    made = seed(q, clock)
    dash = board(make_queue, allow_actions=True)
    dead = made["dead"][0]
    assert post(dash, "requeue", {"id": dead}, csrf=False)[0] == 403
    assert post(dash, "requeue", {"id": dead, "csrf": "guess"}, csrf=False)[0] == 403
    assert post(dash, "requeue", {"id": dead}, Origin="http://evil.example", Host="127.0.0.1:9188")[0] == 403
    assert q.job(dead).state == "dead"
    assert f'value="{dash.guard.csrf}"' in get(dash, "/dead")[1]
    assert Dashboard(make_queue, where="x").guard.csrf != dash.guard.csrf  # made per process
    assert (
        post(dash, "requeue", {"id": dead}, Origin="http://127.0.0.1:9188", Host="127.0.0.1:9188")[0] == 200
    )


# -- the access token ---------------------------------------------------------------------


def test_with_a_token_every_request_needs_it(make_queue):
    dash = board(make_queue, token="s3cret-token-0123456789abcdefghijk")
    assert get(dash, "/")[0] == 401
    assert get(dash, "/static/dashboard.css")[0] == 401
    assert get(dash, "/?token=wrong")[0] == 401
    first = dash.respond("GET", "/jobs?state=dead&token=s3cret-token-0123456789abcdefghijk", {})
    assert first.status == 303 and first.headers["Location"] == "jobs?state=dead"
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, page = get(dash, "/", Cookie=cookie.split(";")[0])
    assert status == 200 and "s3cret-token-0123456789abcdefghijk" not in page
    assert get(dash, "/", Cookie="labqueue_dashboard=wrong")[0] == 401
    assert get(dash, "/", Authorization="Bearer s3cret-token-0123456789abcdefghijk")[0] == 200


def test_listening_beyond_this_machine_needs_a_token(tmp_path, capsys):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    with pytest.raises(NeedsToken, match="--token"):
        check_exposure("0.0.0.0", None)
    check_exposure("0.0.0.0", "abc123" * 6)
    with pytest.raises(InvalidArgument):
        check_exposure("127.0.0.1", "has space")
    from labqueue import JobQueue

    JobQueue(tmp_path / "jobs.db").close()
    assert cli.main(["dashboard", str(tmp_path / "jobs.db"), "--host", "0.0.0.0", "--port", "0"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--token" in err and "LABQUEUE_DASHBOARD_TOKEN" in err
    assert err.startswith("labqueue dashboard: error: --host 0.0.0.0")


# -- errors and secrets -------------------------------------------------------------------


@contextlib.contextmanager
def running_server(dash: Dashboard):
    stop = threading.Event()
    started: list = []
    thread = threading.Thread(
        target=serve, args=(dash, "127.0.0.1", 0), kwargs={"ready": started.append, "stop": stop}, daemon=True
    )
    thread.start()
    for _ in range(100):
        if started:
            break
        threading.Event().wait(0.05)
    try:
        yield f"http://127.0.0.1:{started[0].server_address[1]}"
    finally:
        stop.set()
        thread.join(5)


def fetch(url: str, **headers: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_missing_locked_or_broken_file_gives_an_error_page_and_the_server_goes_on(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    JobQueue(path).close()
    dash = Dashboard(lambda: cli.open_existing(str(path), timeout=0.3), where=str(path))
    with running_server(dash) as url:
        # locked before the dashboard's threads connect: an open connection in WAL mode
        # would keep another from taking the exclusive lock at all
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("PRAGMA locking_mode = EXCLUSIVE")
        locker.execute("BEGIN EXCLUSIVE")
        status, page = fetch(url + "/jobs")
        assert status == 503 and "Cannot read the queue" in page
        locker.execute("ROLLBACK")
        locker.close()
        assert fetch(url + "/jobs")[0] == 200
        assert fetch(url + "/")[0] == 200
        path.write_bytes(b"this is not a database, just text " * 100)
        for name in ("jobs.db-wal", "jobs.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        status, page = fetch(url + "/")
        assert status == 503 and "Cannot read the queue" in page
        path.unlink()
        status, page = fetch(url + "/running")
        assert status == 503 and "no such file" in page
        assert fetch(url + "/static/refresh.js")[0] == 200  # still serving


def test_an_unreachable_postgres_url_gives_an_error_page_without_its_password(caplog):
    pytest.importorskip("psycopg")
    url = "postgresql://app:pa55w0rd-xyz@127.0.0.1:1/jobs?connect_timeout=2"
    dash = Dashboard(lambda: cli.open_existing(url), where=url, location=url)
    status, page = get(dash, "/")
    assert status == 503 and "Cannot read the queue" in page
    assert "pa55w0rd-xyz" not in page and "pa55w0rd-xyz" not in caplog.text
    assert "app:***@127.0.0.1" in page


def test_the_command_serves_the_dashboard_until_stopped(tmp_path):
    from labqueue import JobQueue

    path = tmp_path / "jobs.db"
    with JobQueue(path) as q:
        q.enqueue("email", {"to": "ada@example.com"})
    command = [sys.executable, "-m", "labqueue", "dashboard", str(path), "--port", "0"]
    env = {**os.environ, "LABQUEUE_DASHBOARD_TOKEN": "from-the-environment-0123456789abcdef"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        try:
            line = proc.stdout.readline()
            assert "(read-only; open it once with ?token=" in line, line + proc.stderr.read()
            assert "from-the-environment-0123456789abcdef" not in line
            url = re.search(r"http://\S+/", line)[0]
            assert fetch(url + "jobs/1")[0] == 401
            status, page = fetch(url + "jobs/1", Authorization="Bearer from-the-environment-0123456789abcdef")
            assert status == 200 and "ada@example.com" in page
        finally:
            proc.terminate()
            proc.wait(10)


def test_the_assets_ship_in_the_package():
    static = resources.files("labqueue.dashboard") / "static"
    assert (static / "dashboard.css").is_file() and (static / "refresh.js").is_file()
    import tomllib  # noqa: I001  (3.11+: the test environment's Python)
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "dashboard/static/*" in project["tool"]["setuptools"]["package-data"]["labqueue"]
