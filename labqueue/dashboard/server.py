"""The dashboard's HTTP side: routing, the Host, token and CSRF checks, the headers, and
the server (labqueue.metrics.run_server: a fixed few threads, labqueue.serving).

Dashboard.respond() turns one request into one Response and never raises: a queue that is
missing, locked or broken gives a 503 page and the next request tries again. Each serving
thread keeps its queue open between requests (connections.py) and reads it in short
read-only transactions (reading.py); open tabs share one reading of the overview within
reading.OVERVIEW_MAX_AGE. Nothing secret reaches a page or the log: the queue is named by
its redacted location, every error message is redacted, and the log shows paths without
their query.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from ..errors import CannotCancel, InvalidArgument, JobNotFound, LabqueueError, is_database_error
from ..hosts import ANY, REFUSAL, AllowedHosts
from ..metrics import listen_host, run_server
from ..redaction import redact
from ..serving import REQUEST_TIMEOUT, PooledHTTPServer
from ..signals import StopEvent
from . import actions, reading, views
from .auth import CSRF_FIELD, Guard, check_exposure
from .connections import Connections

log = logging.getLogger("labqueue.dashboard")

STATIC = {"dashboard.css": "text/css; charset=utf-8", "refresh.js": "text/javascript; charset=utf-8"}
MAX_FORM_BYTES = 64 * 1024
JOB_PATH = re.compile(r"/jobs/(\d{1,18})")
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
HTML = "text/html; charset=utf-8"


class Headers(Protocol):
    """A request's headers: a dict, or http.server's Message."""

    def get(self, name: str, default: None = None) -> str | None: ...


class Unreadable(Exception):
    """The queue could not be opened or read for this request (its cause says why)."""


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class Dashboard:
    """One dashboard: how to open the queue (a context manager, once per serving thread), its name for
    pages (`where`, already redacted), the `location` whose secrets every message is cleaned
    of, whether actions are on, the access token (None: none needed), and the Host names
    it answers besides localhost, the loopback addresses and the address it listens on
    (`allow_hosts`, labqueue.hosts). `actions_off` says why no action can be taken whatever
    was asked (a file this user may only read)."""

    def __init__(
        self,
        open_queue: Callable[[], Any],
        *,
        where: str,
        location: object = None,
        allow_actions: bool = False,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
        actions_off: str | None = None,
    ) -> None:
        self.open_queue = open_queue
        self.connections = Connections(open_queue)
        self.overview = reading.Shared()
        self.allow_hosts = tuple(allow_hosts)
        if ANY in self.allow_hosts and token is None:
            raise InvalidArgument(
                "--allow-host * answers any host name, which a DNS-rebinding page can choose: "
                "give the dashboard a token too (--token or LABQUEUE_DASHBOARD_TOKEN)"
            )
        self.hosts = AllowedHosts("127.0.0.1", self.allow_hosts)  # serve() sets the address it listens on
        self.location = location
        self.allow_actions = allow_actions and actions_off is None
        self.actions_off = actions_off or "This dashboard is read-only: start it with --allow-actions to act."
        self.guard = Guard(token)
        self.page = views.Page(redact(where, location), self.guard.csrf, self.allow_actions, actions_off)
        # Each request renders with a Page whose links are relative to its own path (see
        # views.Page.at), so the dashboard works behind a proxy that serves it under a prefix.
        self.local = threading.local()

    # -- one request --------------------------------------------------------------------

    def respond(self, method: str, target: str, headers: Headers, body: bytes = b"") -> Response:
        self.local.page = self.page.at(urlsplit(target).path)
        try:
            return self._respond(method, target, headers, body)
        except Exception as exc:  # a bug of ours: a page saying so, never a dropped connection
            path = urlsplit(target).path
            log.error("dashboard: %s %s failed: %s: %s", method, path, type(exc).__name__, self.clean(exc))
            said = f"{method} {path} failed: see the dashboard's log."
            return self.html(500, views.problem(self.here, "The dashboard failed", said))

    def _respond(self, method: str, target: str, headers: Headers, body: bytes) -> Response:
        parts = urlsplit(target)
        path = parts.path
        if not self.hosts.admits(headers.get("Host")):  # DNS rebinding: no page, no action
            return self.refuse(421, "Wrong host name", REFUSAL)
        if self.guard.token is not None:
            first = self.guard.token_in_query(target)
            if first is not None:
                right, rest = first
                if not right:
                    return self.refuse(401, "Wrong token", "This dashboard's token is not the one given.")
                # relative, as every link is: right behind a proxy's prefix too
                return Response(303, headers={"Location": relative(rest), "Set-Cookie": self.guard.cookie()})
            if not self.guard.admits(headers.get("Cookie"), headers.get("Authorization")):
                return self.refuse(
                    401,
                    "Token needed",
                    "This dashboard needs its token: open it once as /?token=<the token>.",
                )
        if method == "POST":
            return self.post(path, headers, body)
        if method not in ("GET", "HEAD"):  # HEAD: the same answer; the server sends no body
            return self.refuse(405, "Not allowed", f"{method} is not served here.")
        if path.startswith("/static/"):
            return self.static(path[len("/static/") :])
        if path == "/favicon.ico":  # a browser asks for it: no icon, and no 404 in its console
            return Response(204, headers=dict(HEADERS))
        try:
            return self.get(path, parts.query)
        except InvalidArgument as exc:
            return self.refuse(400, "Bad request", str(exc))

    def get(self, path: str, query: str) -> Response:
        found = JOB_PATH.fullmatch(path)
        if path == "/":
            return self.view(lambda q: self.overview.get(lambda: reading.overview(q)), views.overview)
        if path == "/jobs":
            filters = reading.Filters.parse(query)
            return self.view(lambda q: reading.listing(q, filters), views.jobs)
        if path == "/dead":
            filters = reading.Filters.parse(query, state="dead")
            return self.view(lambda q: reading.listing(q, filters), views.dead)
        if path == "/running":
            return self.view(reading.running, views.running)
        if found:
            job_id = int(found[1])
            return self.view(
                lambda q: reading.one_job(q, job_id),
                lambda page, seen: views.job(page, seen, job_id),
                found=lambda seen: seen.job is not None,
            )
        return self.refuse(404, "Not found", f"There is no page at {path}.")

    def view(
        self,
        read: Callable[[Any], Any],
        render: Callable[[views.Page, Any], str],
        found: Callable[[Any], bool] = lambda seen: True,
    ) -> Response:
        """Read in one read-only transaction, close the queue, then render (a 404 page when
        `found` says what was read is not there)."""
        try:
            seen = self.using(read)
        except Unreadable as exc:
            return self.unreadable(exc.__cause__ or exc)
        return self.html(200 if found(seen) else 404, render(self.here, seen))

    def using(self, use: Callable[[Any], Any]) -> Any:
        """use(q) on this thread's queue (connections.py). Whatever stops it opening (a
        missing file, a broken one, a lock, a server down), and a database error while it
        is used, raise Unreadable, and the queue is closed: the next request opens it again.
        The queue's own refusals (a bad argument, a job that cannot be cancelled) go on as
        they are."""
        try:
            q = self.connections.get()
        except Exception as exc:
            raise Unreadable(exc) from exc
        try:
            return use(q)
        except (InvalidArgument, JobNotFound, CannotCancel):
            raise
        except Exception as exc:
            self.connections.drop()
            if isinstance(exc, LabqueueError) or is_database_error(exc) or isinstance(exc, OSError):
                raise Unreadable(exc) from exc
            raise

    def post(self, path: str, headers: Headers, body: bytes) -> Response:
        name = path.removeprefix("/actions/")
        if not path.startswith("/actions/") or name not in actions.ACTIONS:
            return self.refuse(404, "Not found", f"There is no action at {path}.")
        if not self.allow_actions:
            return self.refuse(403, "Actions are off", self.actions_off)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if not self.guard.csrf_ok(form.get(CSRF_FIELD)) or not same_origin(headers):
            return self.refuse(
                403, "Refused", "This form did not come from this dashboard's own page (CSRF token)."
            )
        back = {"requeue": "dead", "cancel": "running"}.get(name, "./")
        if form.get("id") and name in ("requeue", "cancel"):
            back = f"jobs/{form['id']}" if form["id"].isdigit() else back
        try:
            message = self.using(lambda q: actions.run(q, name, form))
        except InvalidArgument as exc:
            return self.refuse(400, "Not done", str(exc))
        except (JobNotFound, CannotCancel) as exc:
            return self.refuse(409, "Not done", str(exc))
        except Unreadable as exc:
            return self.unreadable(exc.__cause__ or exc)
        log.info("dashboard: %s", self.clean(message))
        self.overview = reading.Shared()  # the next overview reads what the action changed
        return self.html(200, views.result(self.here, message, back))

    def static(self, name: str) -> Response:
        if name not in STATIC:
            return self.refuse(404, "Not found", f"There is no file {name}.")
        data = (resources.files(__package__) / "static" / name).read_bytes()
        return Response(200, data, {"Content-Type": STATIC[name], **HEADERS, "Cache-Control": "max-age=300"})

    # -- answers ------------------------------------------------------------------------

    @property
    def here(self) -> views.Page:
        """The Page of the request this thread is answering."""
        return getattr(self.local, "page", self.page)

    def clean(self, what: object) -> str:
        return redact(" ".join(str(what).split()) or type(what).__name__, self.location)

    def unreadable(self, exc: BaseException) -> Response:
        log.warning("dashboard: cannot read the queue: %s: %s", type(exc).__name__, self.clean(exc))
        hint = "The dashboard keeps running: reload this page once the database is back."
        return self.html(503, views.problem(self.here, "Cannot read the queue", self.what_failed(exc), hint))

    def what_failed(self, exc: BaseException) -> str:
        """One line for a page: labqueue's own sentence (its first line, redacted), or only
        the kind of anything else (a driver's error, an OSError), whose text goes to the log."""
        if isinstance(exc, LabqueueError):
            return self.clean(str(exc).split("\n", 1)[0])
        return f"the database answered with an error ({type(exc).__name__}); the dashboard's log has its text"

    def refuse(self, status: int, title: str, message: str) -> Response:
        return self.html(status, views.problem(self.here, title, self.clean(message)))

    @staticmethod
    def html(status: int, page: str) -> Response:
        return Response(status, page.encode("utf-8"), {"Content-Type": HTML, **HEADERS})


def relative(target: str) -> str:
    """A path (and query) on this dashboard as a reference relative to itself: /jobs?x=1
    -> jobs?x=1, /jobs/7 -> 7, / -> ./ (what a redirect from that same path may say)."""
    path, mark, query = target.partition("?")
    return (path.rsplit("/", 1)[-1] or "./") + mark + query


def same_origin(headers: Headers) -> bool:
    """False when the browser's Origin header names another site (a second check after the
    CSRF token); no Origin, or "null" (what a browser sends under some referrer policies),
    leaves it to the token."""
    origin, host = headers.get("Origin"), headers.get("Host")
    if not origin or origin == "null" or not host:
        return True
    return urlsplit(origin).netloc == host


def handler_for(dashboard: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "labqueue-dashboard"
        sys_version = ""
        timeout = REQUEST_TIMEOUT  # a client that sends nothing holds a thread no longer

        def do_GET(self) -> None:
            self.answer("GET", b"")

        def do_HEAD(self) -> None:
            self.send(dashboard.respond("HEAD", self.path, self.headers), body=False)

        def do_POST(self) -> None:
            if not dashboard.hosts.admits(self.headers.get("Host")):
                self.send(dashboard.refuse(421, "Wrong host name", REFUSAL))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_FORM_BYTES:
                self.send(dashboard.refuse(413, "Too large", f"A form is at most {MAX_FORM_BYTES} bytes."))
                return
            self.answer("POST", self.rfile.read(length))

        def answer(self, method: str, body: bytes) -> None:
            self.send(dashboard.respond(method, self.path, self.headers, body))

        def send(self, response: Response, *, body: bool = True) -> None:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if body:
                self.wfile.write(response.body)

        def log_message(self, format: str, *args: Any) -> None:
            # the path without its query: a first visit's ?token=... is never logged
            path = urlsplit(getattr(self, "path", "")).path
            log.debug("%s %s %s", self.address_string(), getattr(self, "command", ""), path)

    return Handler


def serve(
    dashboard: Dashboard,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ready: Callable[[PooledHTTPServer], None] | None = None,
    stop: threading.Event | StopEvent | None = None,
) -> None:
    """Serve `dashboard` on `host`:`port` until `stop` is set. Listening beyond this machine
    without a token raises NeedsToken before anything listens. Requests whose Host header
    names another host are refused (421: labqueue.hosts)."""
    host = listen_host(host)
    check_exposure(host, dashboard.guard.token)
    dashboard.hosts = AllowedHosts(host, dashboard.allow_hosts)
    run_server(
        handler_for(dashboard), host, port, ready=ready, stop=stop, on_thread_exit=dashboard.connections.drop
    )
