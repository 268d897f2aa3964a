"""labqueue dashboard in headless Chromium, as an operator uses it, on SQLite and on PostgreSQL,
with every request off this machine refused: open the overview (its numbers are the queue's
stats()), filter the jobs to one, open its page and read its payload, requeue a dead job with
actions on, and be refused with them off. A kind and an error holding <script> show as text
and run nothing; every page reads with JavaScript off; no page logs a console error (the
server's Content-Security-Policy would report an inline script or style there)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from offline import offline_tab

from labqueue import JobQueue
from labqueue.dashboard import Dashboard, serve

pytestmark = pytest.mark.browser

EVIL_KIND = "<script>window.hacked = 1</script>"
EVIL_ERROR = "<img src=x onerror='window.hacked = 2'> failed"
TOKEN = "browser-test-token-0123456789abcdef"  # the 32 characters a token needs at least


@contextmanager
def dashboard(open_queue, *, actions: bool) -> Iterator[str]:
    board = Dashboard(open_queue, where="the test queue", allow_actions=actions, token=TOKEN)
    stop, started = threading.Event(), threading.Event()
    servers: list = []

    def ready(server) -> None:
        servers.append(server)
        started.set()

    thread = threading.Thread(
        target=serve, args=(board, "127.0.0.1", 0), kwargs={"ready": ready, "stop": stop}
    )
    thread.start()
    assert started.wait(10), "the dashboard did not start"
    try:
        yield f"http://127.0.0.1:{servers[0].server_address[1]}"
    finally:
        stop.set()
        thread.join(10)


def reopener(q):
    """Queues on `q`'s store with its clock, for the server's threads (each opens and closes its
    own; make_queue's are closed by the test's thread, which may not close another's)."""
    if hasattr(q, "path"):
        return lambda: JobQueue(q.path, clock=q.clock)
    from labqueue.postgres import PgJobQueue

    return lambda: PgJobQueue(q.url, schema=q.schema, clock=q.clock)


def test_an_operator_finds_a_job_and_requeues_a_dead_one(browser, make_queue):
    q = make_queue()
    q.enqueue_many("email", [{"to": f"user{n}@example.com"} for n in range(30)])
    invoice = q.enqueue("invoice", {"customer": "ACME <Ltd>", "total": 42}, queue="billing")
    evil = q.enqueue(EVIL_KIND, {"n": 1}, queue="billing")
    for job in q.claim("worker-1", limit=40):
        if job.id == evil:
            q.fail(job, EVIL_ERROR, retry=False)
        elif job.id != invoice:
            q.complete(job)
    q.pause("billing", reason="month end")
    stats = q.stats()

    with dashboard(reopener(q), actions=True) as base:
        context, page = offline_tab(browser, base)
        try:
            page.goto(f"{base}/?token={TOKEN}")  # the cookie carries the token from here on
            shown = dict(re.findall(r'data-stat="([^"]+)">([^<]*)<', page.content()))
            assert shown == {key: str(value) for key, value in stats.items()}
            assert page.locator("svg.chart").is_visible()
            assert "month end" in page.inner_text("table.queues")

            page.click("nav >> text=Jobs")
            page.fill("input[name=kind]", "invoice")
            page.click("form.filters button")
            page.wait_for_url(re.compile(r".*kind=invoice.*"))  # the filtered page, loaded:
            page.wait_for_load_state("load")  # a click does not wait for the navigation it starts
            rows = page.locator("table.jobs tbody tr")
            rows.first.wait_for(state="attached")
            assert rows.count() == 1
            rows.first.locator("a").click()
            assert page.url.endswith(f"/jobs/{invoice}")
            payload = page.inner_text("pre.payload")
            assert '"customer": "ACME <Ltd>"' in payload and '"total": 42' in payload

            page.click("nav >> text=Dead letters")
            row = page.locator(f'tr[data-id="{evil}"]')
            assert EVIL_KIND in row.inner_text() and EVIL_ERROR in row.inner_text()
            assert page.evaluate("window.hacked") is None
            row.locator("button", has_text="Requeue").click()
            assert "requeued" in page.inner_text("p.result")
            assert q.job(evil).state == "queued"
            assert not page.troubles, page.troubles
            assert not page.outside, page.outside
        finally:
            context.close()

    with dashboard(reopener(q), actions=False) as base:
        context, page = offline_tab(browser, base, java_script_enabled=False)
        try:
            assert q.resume("billing")
            [again] = q.claim("worker-2", queues=["billing"])  # the requeued one: the invoice is leased
            q.fail(again, "again", retry=False)
            page.goto(f"{base}/dead?token={TOKEN}")
            assert page.locator("table.jobs tbody tr").count() == 1  # reads with JavaScript off
            assert page.locator("form.action").count() == 0
            refused = page.request.post(f"{base}/actions/requeue", form={"all": "1"})
            assert refused.status == 403
            assert q.counts()["dead"] == 1
            page.goto(f"{base}/")
            assert page.locator("dl.totals").is_visible() and not page.outside
        finally:
            context.close()
