"""The pages, as HTML text: one function per view, each given what reading.py read.

Every value that came from a row or a request (a kind, a queue name, a payload, an error,
a worker's name, a filter) goes through `text()`: control characters and bidirectional
marks shown as escapes (labqueue.listing.printable), then html.escape, quotes included.
Pages are plain HTML: links and forms work with JavaScript off; refresh.js only reloads
the overview's numbers in place. No style attribute and no inline script: the server's
Content-Security-Policy allows the package's own CSS and script only.
"""

from __future__ import annotations

import json
from html import escape
from string import Template
from typing import Any
from urllib.parse import urlencode

from ..core import JobRecord
from ..listing import cut, decoded_payload, printable, result_and_attempts, utc
from ..validate import STATES
from .auth import CSRF_FIELD
from .chart import throughput_svg
from .reading import CHART_ROWS, CHART_STEP, CHART_STEPS, Listing, OneJob, Overview

ERROR_CUT = 120
REFRESH_SECONDS = 5
NAV = (("./", "Overview"), ("jobs", "Jobs"), ("dead", "Dead letters"), ("running", "Running"))

PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · labqueue dashboard</title>
<base href="$base">
<link rel="stylesheet" href="static/dashboard.css">
<script src="static/refresh.js" defer></script>
</head>
<body>
<header>
<a class="brand" href="./">labqueue</a> <span class="where">$where</span>
<nav>$nav</nav>
</header>
<main>
<h1>$title</h1>
$body
</main>
<footer>$footer</footer>
</body>
</html>
""")


class Page:
    """What every page shares: the queue's name (redacted), the CSRF token for forms,
    whether actions are on, and the base its links are relative to.

    Every link is relative (`jobs`, not `/jobs`) and each page's <base> climbs back to the
    dashboard's root, so the same pages work at / and behind a proxy's prefix (Jupyter's
    /proxy/9188/ on Binder)."""

    def __init__(
        self, where: str, csrf: str, actions: bool, why_off: str | None = None, base: str = "./"
    ) -> None:
        self.where, self.csrf, self.actions, self.why_off, self.base = where, csrf, actions, why_off, base

    def at(self, path: str) -> Page:
        """This page for a request to `path`: /jobs -> base ./, /jobs/7 -> base ../"""
        depth = max(path.count("/") - 1, 0)
        return Page(self.where, self.csrf, self.actions, self.why_off, "../" * depth or "./")

    def render(self, title: str, body: str, *, current: str = "") -> str:
        nav = " ".join(
            f'<a href="{href}"{" aria-current=page" if href == current else ""}>{label}</a>'
            for href, label in NAV
        )
        footer = "actions on (started with --allow-actions)" if self.actions else "read-only: actions are off"
        if self.why_off:
            footer = f"read-only: actions are unavailable, {text(self.why_off)}"
        return PAGE.substitute(
            base=text(self.base), title=text(title), where=text(self.where), nav=nav, body=body, footer=footer
        )

    def form(self, action: str, fields: dict[str, Any], button: str, *, extra: str = "") -> str:
        """A POST form for one action, with the CSRF token; nothing when actions are off."""
        if not self.actions:
            return ""
        hidden = "".join(
            f'<input type="hidden" name="{text(k)}" value="{text(v)}">' for k, v in fields.items()
        )
        return (
            f'<form class="action" method="post" action="actions/{action}">'
            f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(self.csrf)}">{hidden}{extra}'
            f'<button type="submit">{text(button)}</button></form>'
        )


def text(value: object) -> str:
    """Any value as HTML text: control characters escaped, then < > & " ' escaped."""
    return escape(printable(str(value)), quote=True)


def block(value: object) -> str:
    """text() for a <pre>: line by line, so the newlines stay (not split on \x85 and the like)."""
    return "\n".join(text(line) for line in str(value).split("\n"))


def href(path: str, query: dict[str, Any] | None = None) -> str:
    """A link's href attribute value, its query encoded and the whole escaped."""
    return escape(path + (f"?{urlencode(query)}" if query else ""), quote=True)


def ago(moment: float | None, now: float) -> str:
    """How long before `now` (or after it) `moment` is: '12 s ago', 'in 3 min'."""
    if moment is None:
        return ""
    try:
        delta = float(now) - float(moment)
    except (TypeError, ValueError):
        return ""
    if abs(delta) < 1:
        return "now"
    amount = span(abs(delta))
    return f"{amount} ago" if delta > 0 else f"in {amount}"


def span(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.1f} s".replace(".0 ", " ")


def when(moment: float | None, now: float) -> str:
    """A moment as UTC and relative, in a <time> element."""
    if moment is None:
        return ""
    relative = f'<span class="ago">({text(ago(moment, now))})</span>'
    return f'<time title="{text(moment)}">{text(utc(moment))} UTC</time> {relative}'


# -- overview ---------------------------------------------------------------------------

TOTALS = (
    ("queued", "queued"),
    ("ready_now", "ready now"),
    ("running", "running"),
    ("dead", "dead"),
    ("oldest_ready_age_s", "oldest ready (s)"),
)
COLUMNS = (
    ("queued", "queued"),
    ("ready_now", "ready"),
    ("running", "running"),
    ("scheduled", "scheduled"),
    ("dead", "dead"),
    ("oldest_ready_age_s", "oldest ready (s)"),
    ("finished_last_minute", "finished, last minute"),
)


def overview(page: Page, seen: Overview) -> str:
    totals = "".join(
        f'<div><dt>{label}</dt><dd data-stat="{key}">{text(seen.stats[key])}</dd></div>'
        for key, label in TOTALS
    )
    heads = "".join(f'<th scope="col">{label}</th>' for _, label in COLUMNS)
    rows = []
    for name, numbers in seen.queues.items():
        cells = "".join(f'<td data-col="{key}">{text(numbers[key])}</td>' for key, _ in COLUMNS)
        pause = seen.paused.get(name)
        paused = (
            ""
            if pause is None
            else (
                f"paused {when(pause['paused_at'], seen.now)}"
                + (f": {text(pause['reason'])}" if pause["reason"] else "")
            )
        )
        link = href("jobs", {"queue": name})
        rows.append(
            f'<tr data-queue="{text(name)}"><th scope="row"><a href="{link}">{text(name)}</a></th>{cells}'
            f'<td class="paused">{paused}</td></tr>'
        )
    table = (
        '<table class="queues"><thead><tr><th scope="col">queue</th>'
        f'{heads}<th scope="col">paused</th></tr></thead>'
        f"<tbody>{''.join(rows) or '<tr><td colspan=9>No job in any queue yet.</td></tr>'}</tbody></table>"
    )
    chart = throughput_svg(seen.throughput, CHART_STEP, CHART_STEPS)
    if seen.chart_after_id:
        chart += (
            f'<p class="note" data-chart-after="{seen.chart_after_id}">Counted among the jobs with an id '
            f"above {seen.chart_after_id} (the newest {CHART_ROWS:,}), a bounded read: an older job that "
            "finished in the last hour is not in it.</p>"
        )
    live = (
        f'<section id="live" data-refresh="{REFRESH_SECONDS}">'
        f'<p class="stamp">Read at {text(utc(seen.now))} UTC. <a href="./">Refresh</a></p>'
        f'<dl class="totals">{totals}</dl>{table}{key_waits(seen.waiting_on_keys)}'
        f"<h2>Throughput, last hour</h2>{chart}</section>"
    )
    return page.render("Overview", live + pause_forms(page, seen), current="./")


SHOWN_KEYS = 10  # the keys with most jobs waiting that the overview lists


def key_waits(waiting: dict[str, int]) -> str:
    """Ready jobs a full concurrency key holds back (as `labqueue stats` says them): how
    many, and the keys with most of them; nothing while no key is full."""
    if not waiting:
        return ""
    rows = "".join(
        f'<tr data-key="{text(key)}"><th scope="row">{text(cut(key, 60))}</th><td>{n}</td></tr>'
        for key, n in list(waiting.items())[:SHOWN_KEYS]
    )
    more = len(waiting) - SHOWN_KEYS
    rest = f'<tr><td colspan="2">and {more} more keys</td></tr>' if more > 0 else ""
    total = sum(waiting.values())
    return (
        f'<h2>Waiting on a full concurrency key</h2><p data-waiting-on-keys="{total}">{total} ready '
        f"job(s) held back: each key already runs as many jobs as its limit.</p>"
        '<table class="keys"><thead><tr><th scope="col">concurrency key</th>'
        f'<th scope="col">jobs waiting</th></tr></thead><tbody>{rows}{rest}</tbody></table>'
    )


def pause_forms(page: Page, seen: Overview) -> str:
    if not page.actions:
        return ""
    forms = []
    for name in seen.queues:
        if name in seen.paused:
            forms.append(f"<li>{text(name)}: {page.form('resume', {'queue': name}, 'Resume')}</li>")
        else:
            reason = '<input name="reason" placeholder="why (optional)" aria-label="reason">'
            forms.append(
                f"<li>{text(name)}: {page.form('pause', {'queue': name}, 'Pause', extra=reason)}</li>"
            )
    other = page.form(
        "pause",
        {},
        "Pause",
        extra='<input name="queue" required placeholder="queue name" aria-label="queue name">'
        '<input name="reason" placeholder="why (optional)" aria-label="reason">',
    )
    return (
        f'<h2>Pause and resume</h2><ul class="actions">{"".join(forms)}<li>Another queue: {other}</li></ul>'
    )


# -- lists of jobs ----------------------------------------------------------------------


def filter_form(path: str, seen: Listing, *, with_state: bool) -> str:
    chosen = seen.filters
    state = ""
    if with_state:
        options = "".join(
            f'<option value="{s}"{" selected" if s == chosen.state else ""}>{s}</option>' for s in STATES
        )
        state = f'<label>state <select name="state"><option value="">any</option>{options}</select></label> '
    return (
        f'<form class="filters" method="get" action="{path}">{state}'
        f'<label>queue <input name="queue" value="{text(chosen.queue or "")}"></label> '
        f'<label>kind <input name="kind" value="{text(chosen.kind or "")}"></label> '
        '<button type="submit">Filter</button></form>'
    )


def pager(path: str, seen: Listing, *, keep_state: bool) -> str:
    query = seen.filters.query(before=None)
    if not keep_state:
        query.pop("state", None)
    links = []
    if seen.filters.before is not None:
        links.append(f'<a href="{href(path, query)}">Newest</a>')
    if seen.older is not None:
        links.append(f'<a rel="next" href="{href(path, {**query, "before": seen.older})}">Older →</a>')
    return f'<p class="pager">{" ".join(links)}</p>' if links else ""


def short(error: str | None) -> str:
    return cut(str(error or ""), ERROR_CUT)


def job_row(r: JobRecord, now: float, last: str) -> str:
    return (
        f'<tr data-id="{r.id}"><td><a href="jobs/{r.id}">{r.id}</a></td><td>{text(r.kind)}</td>'
        f"<td>{text(r.queue)}</td><td>{text(r.state)}</td><td>{text(r.attempts)}/{text(r.max_attempts)}</td>"
        f"<td>{when(r.created_at, now)}</td>{last}</tr>"
    )


def jobs(page: Page, seen: Listing) -> str:
    heads = ["id", "kind", "queue", "state", "attempts", "created", "finished", "error"]
    rows = [
        job_row(
            r,
            seen.now,
            f'<td>{when(r.finished_at, seen.now)}</td><td class="error">{text(short(r.last_error))}</td>',
        )
        for r in seen.jobs
    ]
    body = (
        filter_form("jobs", seen, with_state=True)
        + table(heads, rows, "No job matches.")
        + pager("jobs", seen, keep_state=True)
    )
    return page.render("Jobs", body, current="jobs")


def dead(page: Page, seen: Listing) -> str:
    heads = ["id", "kind", "queue", "state", "attempts", "created", "died", "last error", ""]
    rows = [
        job_row(
            r,
            seen.now,
            f"<td>{when(r.finished_at, seen.now)}</td>"
            f'<td class="error"><pre>{block(r.last_error or "")}</pre></td>'
            f"<td>{page.form('requeue', {'id': r.id}, 'Requeue')}</td>",
        )
        for r in seen.jobs
    ]
    chosen = seen.filters
    bulk = ""
    if page.actions and seen.jobs:
        if chosen.queue or chosen.kind:
            picked = {k: v for k, v in (("queue", chosen.queue), ("kind", chosen.kind)) if v}
            bulk += page.form("requeue", picked, "Requeue every dead job matching these filters")
        bulk += page.form("requeue", {"all": "1"}, "Requeue every dead job")
    body = (
        filter_form("dead", seen, with_state=False)
        + f'<div class="bulk">{bulk}</div>'
        + table(heads, rows, "No dead job matches.")
        + pager("dead", seen, keep_state=False)
    )
    return page.render("Dead letters", body, current="dead")


def running(page: Page, seen: Listing) -> str:
    heads = ["id", "kind", "queue", "state", "attempts", "created", "held by", "lease ends", "left", ""]
    rows = []
    for r in seen.jobs:
        left = float(r.visible_at) - seen.now
        shown = f"{left:.1f} s" if left >= 0 else f"expired {span(-left)} ago"
        rows.append(
            job_row(
                r,
                seen.now,
                f"<td>{text(r.worker or '')}</td><td>{when(r.visible_at, seen.now)}</td>"
                f'<td class="lease" data-left="{left:.1f}">{text(shown)}</td>'
                f"<td>{page.form('cancel', {'id': r.id}, 'Cancel')}</td>",
            )
        )
    return page.render("Running", table(heads, rows, "No job is running."), current="running")


def table(heads: list[str], rows: list[str], empty: str) -> str:
    head = "".join(f'<th scope="col">{h}</th>' for h in heads)
    body = "".join(rows) or f'<tr><td colspan="{len(heads)}">{empty}</td></tr>'
    return f'<table class="jobs"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# -- one job ------------------------------------------------------------------------------


def job(page: Page, seen: OneJob, job_id: int) -> str:
    r = seen.job
    if r is None:
        return page.render(
            f"Job {job_id}", "<p>No job has this id (it never existed, or a purge removed it).</p>"
        )
    now = seen.now
    due = "lease ends" if r.state == "running" else "due"
    fields = [
        ("kind", text(r.kind)),
        ("queue", text(r.queue)),
        ("state", f'<span class="state" data-state="{text(r.state)}">{text(r.state)}</span>'),
        ("attempts", f"{text(r.attempts)} of {text(r.max_attempts)}"),
        ("priority", text(r.priority)),
        ("worker", text(r.worker or "")),
        ("dedupe key", text(r.dedupe_key or "")),
        ("concurrency key", text(r.concurrency_key or "")),
        ("concurrency limit", "" if r.concurrency_limit is None else text(r.concurrency_limit)),
        ("created", when(r.created_at, now)),
        (due, when(r.visible_at, now)),
        ("finished", when(r.finished_at, now)),
    ]
    facts = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in fields)
    payload = json.dumps(decoded_payload(r.payload), indent=2, ensure_ascii=False, default=str)
    actions = ""
    if r.state in ("queued", "running"):
        actions = page.form("cancel", {"id": r.id}, "Cancel this job")
    elif r.state == "dead":
        actions = page.form("requeue", {"id": r.id}, "Requeue this job")
    attempts = "\n".join(result_and_attempts(r))
    body = (
        f'<dl class="job">{facts}</dl>'
        f'<h2>Last error</h2><pre class="error">{block(r.last_error or "(none)")}</pre>'
        f'<h2>Payload</h2><pre class="payload">{block(payload)}</pre>'
        f'<h2>Result and attempts</h2><pre class="attempts">{block(attempts)}</pre>{actions}'
    )
    return page.render(f"Job {r.id}", body, current="jobs")


# -- results and errors -------------------------------------------------------------------


def result(page: Page, message: str, back: str) -> str:
    return page.render("Done", f'<p class="result">{text(message)}</p><p><a href="{href(back)}">Back</a></p>')


def problem(page: Page, title: str, message: str, hint: str = "") -> str:
    extra = f"<p>{text(hint)}</p>" if hint else ""
    return page.render(
        title, f'<p class="problem">{text(message)}</p>{extra}<p><a href="./">Overview</a></p>'
    )
