"""A small web dashboard for one queue: `labqueue dashboard DB|URL`.

    labqueue dashboard jobs.db                       # http://127.0.0.1:9188/, read-only
    labqueue dashboard jobs.db --allow-actions       # with requeue, cancel, pause, resume
    LABQUEUE_DASHBOARD_TOKEN=... labqueue dashboard postgresql://app@db/jobs --host 0.0.0.0

Pages: the overview per named queue with the last hour's throughput (an SVG chart), the
jobs newest first (filtered, paged by id), one job whole, the dead letters, the running
jobs and their leases. The standard library only (http.server, html.escape,
string.Template): nothing to install, nothing loaded from a CDN, plain HTML that reads with
JavaScript off, and a few lines of script (static/refresh.js) that refresh the overview.

Modules, one job each: server.py (routing, headers, the HTTP server), reading.py (what each
page reads, in short read-only transactions with a timeout), connections.py (each serving
thread's open queue), views.py (the HTML), chart.py (the SVG), actions.py (what a form
does), auth.py (the access token and the CSRF token). The Host names it answers are
labqueue.hosts's; its server, labqueue.serving's (a fixed few threads), as metrics' are.
"""

from __future__ import annotations

from .auth import TOKEN_VARIABLE, NeedsToken, check_exposure, is_loopback
from .server import Dashboard, Response, serve

DEFAULT_PORT = 9188

__all__ = [
    "DEFAULT_PORT",
    "TOKEN_VARIABLE",
    "Dashboard",
    "NeedsToken",
    "Response",
    "check_exposure",
    "is_loopback",
    "serve",
]
