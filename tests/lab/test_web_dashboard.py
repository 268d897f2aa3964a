"""labqueue.lab.web_dashboard: notebook 10's `labqueue dashboard` process."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from labqueue import JobQueue
from labqueue.lab.web_dashboard import WebDashboard


@pytest.fixture
def queue_file(tmp_path):
    path = tmp_path / "jobs.db"
    q = JobQueue(path)
    for n in range(3):
        q.enqueue("email", {"n": n})
    q.fail(q.claim("w-1")[0], "boom", retry=False)
    q.close()
    return path


def test_it_serves_the_overview_numbers_of_stats_and_stops(queue_file):
    web = WebDashboard(queue_file)
    try:
        assert web.running and web.url == f"http://127.0.0.1:{web.port}/"
        shown = web.overview_numbers()
        with JobQueue(queue_file) as q:
            stats = q.stats()
        assert {k: v for k, v in shown.items() if k != "oldest_ready_age_s"} == {
            k: v for k, v in stats.items() if k != "oldest_ready_age_s"
        }
        assert shown["queued"] == 2 and shown["dead"] == 1
        assert web.read("jobs").count("<td>email</td>") == 3
        assert "read-only" in web.read()
    finally:
        assert web.stop() == 0
    assert not web.running and "stopped" in web._repr_html_()


def test_the_links_go_through_jupyters_proxy_under_the_hubs_prefix(queue_file, monkeypatch):
    web = WebDashboard(queue_file)
    try:
        monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX", raising=False)
        assert web.proxy_link == f"/proxy/{web.port}/"
        monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/someone-abc/")
        assert web.proxy_link == f"/user/someone-abc/proxy/{web.port}/"
        shown = web._repr_html_()
        assert f'href="/user/someone-abc/proxy/{web.port}/"' in shown and web.url in shown
    finally:
        web.stop()


def get(url: str, host: str, **headers: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Host": host, **headers}), timeout=10
        ):
            return 200
    except urllib.error.HTTPError as exc:
        return exc.code


def test_on_your_own_machine_it_answers_the_labs_loopback_host_only(queue_file, monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX", raising=False)
    web = WebDashboard(queue_file)
    try:
        assert web.token is None and "token" not in web.proxy_link
        assert get(web.url, "localhost:8888") == 200  # what the lab's /proxy/PORT/ forwards
        assert get(web.url, "rebind.attacker.example:8888") == 421
    finally:
        web.stop()


def test_behind_a_hub_the_link_carries_a_token_and_the_hubs_name_is_answered(queue_file, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/someone-abc/")
    web = WebDashboard(queue_file)
    try:
        assert web.token is not None and len(web.token) >= 32
        assert web.proxy_link == f"/user/someone-abc/proxy/{web.port}/?token={web.token}"
        assert web.token not in " ".join(web.process.args)  # in its environment, not on its command line
        hub = "hub.example.org"
        assert get(web.url, hub) == 401
        assert get(web.url, hub, Authorization=f"Bearer {web.token}") == 200
        assert web.overview_numbers()["dead"] == 1
    finally:
        web.stop()


def test_a_missing_file_is_an_error_that_says_what_the_command_said(tmp_path):
    with pytest.raises(RuntimeError, match=r"did not start.*nowhere\.db"):
        WebDashboard(tmp_path / "nowhere.db", timeout=20)


def test_the_dashboard_ends_when_the_kernel_that_started_it_is_killed(queue_file):
    started = (
        "import sys, time; from labqueue.lab.web_dashboard import WebDashboard; "
        "w = WebDashboard(sys.argv[1]); print(w.process.pid, flush=True); time.sleep(120)"
    )
    kernel = subprocess.Popen(
        [sys.executable, "-c", started, str(queue_file)], stdout=subprocess.PIPE, text=True
    )
    child = psutil.Process(int(kernel.stdout.readline()))
    kernel.kill()  # SIGKILL: no finalizer, no atexit
    kernel.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        child.kill()
        pytest.fail("the dashboard outlived the kernel that started it")
