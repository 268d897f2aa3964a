"""Notebooks 10 to 17 in real JupyterLab, in headless Chromium: each run clean, then its widget
panel used as a learner uses it (see test_notebooks_in_browser.py, which does the same for 00 to
09; the two files run side by side, each on a JupyterLab of its own)."""

from __future__ import annotations

import http.client
import os
import re
from pathlib import Path

import pytest
from browser_lab import LabServer
from panels import (
    NOTEBOOKS,
    SECOND_HALF,
    check_still_holds,
    finished,
    new_picture,
    run_clean,
    table_rows,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECOND = [nb for nb in NOTEBOOKS if nb.name >= SECOND_HALF]
PICTURES = Path(__file__).resolve().parents[2] / "docs" / "images"


@pytest.mark.parametrize("notebook", SECOND, ids=[nb.stem for nb in SECOND])
def test_notebook_runs_clean(
    notebook: Path, open_notebook, ran_pages, lab_server: LabServer, request: pytest.FixtureRequest
) -> None:
    run_clean(notebook, open_notebook, ran_pages, lab_server, request)


# --- 10: requeue the dead jobs, start the workers, watch the counts -------------------------


DASHBOARD_NAMES = {"queued", "running", "dead", "done", "workers_alive"}


def dashboard_counts(panel) -> dict[str, str]:
    """The dashboard's latest sample as it shows it: a value above each name. Live refresh
    replaces the table several times a second, so a read that lands mid-swap is read again."""

    def read() -> dict[str, str]:
        cells = [c.strip().split("\n") for c in panel.locator("table td").all_inner_texts()]
        return {lines[-1].strip(): lines[0].strip() for lines in cells if len(lines) >= 2}

    return wait_for(read, lambda counts: counts.keys() >= DASHBOARD_NAMES, "the dashboard's table")


@pytest.mark.drives("10")
def test_ops_dashboard_requeues_the_dead(ran_notebook) -> None:
    page = ran_notebook("10")
    panel = page.panel_of("Requeue dead")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    before = dashboard_counts(panel)
    assert (before["queued"], before["running"]) == ("0", "0") and int(before["dead"]) > 0, before

    page.button("Requeue dead").click()
    wait_for(panel.inner_text, lambda t: f"requeued {before['dead']} dead job(s)" in t, "the requeue")
    requeued = dashboard_counts(panel)
    assert (requeued["dead"], requeued["queued"]) == ("0", before["dead"]), (before, requeued)

    src = chart.get_attribute("src")
    page.button("Start workers").click()  # and Live: the counts refresh themselves
    settled = wait_for(
        lambda: dashboard_counts(panel),
        lambda c: (c["queued"], c["running"], c["dead"]) == ("0", "0", before["dead"]),
        "the bad jobs dying again",
        timeout=60,
    )
    assert settled["done"] == before["done"], (before, settled)
    new_picture(chart, src)
    page.button("Stop workers").click()
    wait_for(panel.inner_text, lambda t: "workers stopped" in t, "the workers stopping")
    assert dashboard_counts(panel)["workers_alive"] == "0"
    print(f"10 dashboard: {before} -> requeue -> {requeued} -> start -> {settled}")
    page.screenshot("10_ops-after-requeue", whole=False)
    open_the_web_dashboard(page, settled)
    assert page.problems() == []


def open_the_web_dashboard(page, settled: dict[str, str]) -> None:
    """The learner clicks the `labqueue dashboard` link the notebook printed: it opens in a new
    tab through JupyterLab's /proxy/PORT/ (as on Binder), shows the queue's numbers, and a dead
    `bad` job's page shows its error. With LABQUEUE_PICTURES=1 the overview is saved as the
    picture notebook 10 shows (docs/images/dashboard_overview.png)."""
    link = page.page.locator('.jp-OutputArea-output a[href*="/proxy/"]').first
    link.scroll_into_view_if_needed()
    with page.window.context.expect_page() as opened:
        link.click()
    tab = opened.value
    try:
        tab.wait_for_load_state()
        assert "/proxy/" in tab.url and tab.title().startswith("Overview"), (tab.url, tab.title())
        shown = {
            k: tab.locator(f'[data-stat="{k}"]').first.inner_text() for k in ("queued", "running", "dead")
        }
        assert shown == {k: settled[k] for k in ("queued", "running", "dead")}, (shown, settled)
        if os.environ.get("LABQUEUE_PICTURES") == "1":
            tab.set_viewport_size({"width": 900, "height": 700})
            tab.screenshot(path=str(PICTURES / "dashboard_overview.png"))
        tab.get_by_role("link", name="Dead letters").click()
        tab.wait_for_load_state()
        tab.locator("tr[data-id] a").first.click()
        tab.wait_for_load_state()
        assert "/proxy/" in tab.url and "/jobs/" in tab.url, tab.url
        body = tab.inner_text("main")
        assert "payload has no recipient" in body and "Last error" in body, body[:500]
        # The proxy forwarded the lab's own Host (a loopback name here), which the dashboard
        # answers; the same request sent as a DNS-rebinding page would send it gets 421.
        port = int(re.search(r"/proxy/(\d+)/", tab.url)[1])
        assert status_with_host(port, f"rebind.attacker.example:{port}") == 421
        assert status_with_host(port, f"localhost:{port}") == 200
    finally:
        tab.close()


def status_with_host(port: int, host: str) -> int:
    """The status of GET / on the dashboard at 127.0.0.1:`port`, sent with this Host header."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/", headers={"Host": host})
        return connection.getresponse().status
    finally:
        connection.close()


# --- 11: the tutorial's suite on the learner's workspace, filtered with -k ------------------

PINNED_TESTS = "leased_job_is_hidden or ceiling_doubles"  # two of the suite's tests the notebook shows


@pytest.mark.drives("11")
def test_testing_panel_runs_two_chosen_tests(ran_notebook) -> None:
    page = ran_notebook("11")
    panel = page.panel_of("Run")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert "Last run:" in panel.inner_text()  # the notebook's run of all 23
    page.type_text(panel, "-k", PINNED_TESTS)

    page.button("Run").click()
    result = finished(panel, r"(?m)^(?!Last run)(.+) in [\d.]+ s \(exit code (\d+)\)$", "pytest", 120)
    assert result[1] == "2 passed" and result[2] == "0", result[0]
    assert "Last run:" not in panel.inner_text()
    new_picture(chart, src)
    print(f"11 testing panel: the tutorial's suite -k <two tests>: {result[0]}")
    page.screenshot("11_testing-two-tests", whole=False)
    assert page.problems() == []


# --- 12: a small chaos run ------------------------------------------------------------------


@pytest.mark.drives("12")
def test_chaos_panel_runs_a_small_chaos(ran_notebook) -> None:
    page = ran_notebook("12")
    panel = page.panel_of("Run")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert "100 jobs (" in panel.inner_text()  # the notebook's run with faults, shown until Run
    page.choose(panel, "jobs", "30")
    page.set_slider(panel, "workers", 4)
    wait_for(
        lambda: (page.chosen(panel, "jobs"), page.slider_value(panel, "workers")),
        lambda v: v == ("30", 4),
        "the controls",
    )

    page.button("Run").click()  # SIGKILLs and SIGSTOPs as set: every 0.5 s and 1.5 s
    # the new report, not the notebook's run still shown as the click lands: 30 jobs, finished
    finished(panel, r"(?ms)^finished in [\d.]+ s$.*^30 jobs \(", "the chaos run of 30 jobs", timeout=120)
    report = panel.locator("pre").inner_text()
    assert report.startswith("30 jobs (") and ", 4 workers, lease" in report, report
    assert "PASS: every job finished exactly once or was dead-lettered" in report, report
    assert "PASS" in panel.locator("b").all_inner_texts()
    new_picture(chart, src)
    print("12 chaos panel: jobs 100 -> 30, workers 8 -> 4:", " | ".join(report.splitlines()[:3]))
    page.screenshot("12_chaos-30-jobs", whole=False)
    assert page.problems() == []


# --- 17: drains on both backends -------------------------------------------------------------

POSTGRES_RED = (196, 78, 82)  # the PostgreSQL lines' colour in labqueue.lab.postgres_lab


@pytest.mark.drives("17")
def test_postgres_panel_drains_both_backends(ran_notebook) -> None:
    page = ran_notebook("17")
    panel = page.panel_of("Run")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert page.pixels_of_colour(chart, POSTGRES_RED) > 100, "the notebook's run is drawn until Run"
    page.choose(panel, "jobs", "250")
    wait_for(lambda: page.chosen(panel, "jobs"), lambda v: v == "250", "the jobs dropdown")

    page.button("Run").click()  # 1, 2 and 4 workers on each backend, the panel's default
    best = r"best: SQLite [\d,]+ jobs/s, PostgreSQL [\d,]+ jobs/s; duplicates 0"
    status = finished(panel, best, "the drains", timeout=120)
    new_picture(chart, src)
    print(f"17 postgres panel: 250 jobs, 1/2/4 workers: {status[0]}")
    page.screenshot("17_postgresql-250-jobs", whole=False)
    assert page.problems() == []


# --- 16: cancel a running job on the board ---------------------------------------------------


@pytest.mark.drives("16")
def test_cancel_board_cancels_a_running_job(ran_notebook) -> None:
    page = ran_notebook("16")
    panel = page.panel_of("Cancel job")
    panel.scroll_into_view_if_needed()
    assert "t = 0 s" in panel.inner_text()  # a board of the panel's own: the story plays on another
    page.button("New jobs").click()
    wait_for(panel.inner_text, lambda t: "t = 0 s" in t and "queued 5" in t, "a fresh board")
    page.button("Step 1 s").click()
    wait_for(panel.inner_text, lambda t: "w1 claims job 1" in t, "the first step")
    page.choose(panel, "job", "1")
    wait_for(lambda: page.chosen(panel, "job"), lambda v: v == "1", "the dropdown")

    page.button("Cancel job").click()
    wait_for(panel.inner_text, lambda t: "cancel(1) -> 'running'" in t, "the cancel")
    page.button("Step 1 s").click()
    page.button("Step 1 s").click()  # t = 3: job 1's heartbeat is refused
    wait_for(panel.inner_text, lambda t: "heartbeat for job 1: refused" in t, "the refused heartbeat")
    page.button("Run to the end").click()
    wait_for(panel.inner_text, lambda t: "done 4, cancelled 1" in t, "the board running out")
    heads = [h.strip() for h in panel.locator("table th").all_inner_texts()]
    first = [c.strip() for c in panel.locator("table tr").nth(1).locator("td").all_inner_texts()]
    row = dict(zip(heads, first, strict=True))
    assert (row["job"], row["state"], row["ledger rows"]) == ("1", "cancelled", "0"), row
    assert "heartbeat refused at t=3" in row["what happened"], row
    print("16 cancel board: job 1 cancelled while running:", row["what happened"])
    page.screenshot("16_cancel-board", whole=False)
    page.button("New jobs").click()  # and once more, a learner's own play: cancel job 2 while queued
    wait_for(panel.inner_text, lambda t: "t = 0 s" in t, "a fresh board")
    page.choose(panel, "job", "2")
    wait_for(lambda: page.chosen(panel, "job"), lambda v: v == "2", "the dropdown")
    page.button("Cancel job").click()
    wait_for(panel.inner_text, lambda t: "cancel(2) -> 'queued'" in t, "the cancel")
    print("16 Check after the board was played:", check_still_holds(page).strip())
    assert page.problems() == []


# --- 15: strict priorities with fewer workers: reports starves ------------------------------


@pytest.mark.drives("15")
def test_fairness_panel_simulates_strict_priorities(ran_notebook) -> None:
    page = ran_notebook("15")
    panel = page.panel_of("simulate")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image").first  # completions over time (the waits follow)
    src = chart.get_attribute("src")
    assert "the runs above" in panel.inner_text()  # strict and fair from the notebook, until simulate
    page.choose(panel, "claims", "strict priorities")
    page.set_slider(panel, "workers", 3)
    wait_for(
        lambda: (page.chosen(panel, "claims"), page.slider_value(panel, "workers")),
        lambda v: v == ("strict priorities", 3),
        "the controls",
    )

    page.button("simulate").click()  # the webhook flood: 7 jobs/s against 3
    status = finished(panel, r"strict: 7 jobs/s arrive, 3 workers serve 3 jobs/s; .*", "the simulation")
    assert status[0].endswith("reports 0"), status[0]  # the priority-5 flood alone outruns 3 workers
    assert "fair" not in " ".join(r.get("mode", "") for r in table_rows(panel.locator("table")))
    new_picture(chart, src)
    print(f"15 fairness panel: strict, 3 workers: {status[0]}")
    page.screenshot("15_priorities-strict-3-workers", whole=False)
    print("15 Check after the panel:", check_still_holds(page).strip())
    assert page.problems() == []


# --- 14: a shorter retention, a smaller batch -----------------------------------------------


@pytest.mark.drives("14")
def test_retention_panel_reruns_a_shorter_retention(ran_notebook) -> None:
    page = ran_notebook("14")
    panel = page.panel_of("Run")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert "the runs above" in panel.inner_text()  # the notebook's two runs, shown until Run
    page.set_slider(panel, "retention (s)", 120)
    page.choose(panel, "batch size", "100")
    wait_for(
        lambda: (page.slider_value(panel, "retention (s)"), page.chosen(panel, "batch size")),
        lambda v: v == (120, "100"),
        "the controls",
    )

    page.button("Run").click()  # 30 simulated minutes with retention, then the backlog's first purge
    line = r"retention 120 s, batch 100, 30 min: file [\d.]+ MB at the end \(without retention [\d.]+ MB\)"
    status = finished(panel, line + r".*", "the run with a 120 s retention", timeout=120)
    rows = table_rows(panel.locator("table"))
    assert [r["run"] for r in rows] == ["no retention", "retention 120 s, batch 100"], rows
    new_picture(chart, src)
    print(f"14 retention panel: retention 300 -> 120 s, batch 1,000 -> 100: {status[0]}")
    page.screenshot("14_retention-120-s-batch-100", whole=False)
    print("14 Check after the panel:", check_still_holds(page).strip())
    assert page.problems() == []
