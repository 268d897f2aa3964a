"""Who may look and who may act: the access token, the per-process CSRF token, and the
rule that a dashboard listening beyond this machine needs a token.

- With a token (--token or LABQUEUE_DASHBOARD_TOKEN), every request carries it: in the
  cookie a first visit with ``?token=...`` sets (HttpOnly, SameSite=Strict), or as
  ``Authorization: Bearer ...``. Compared in constant time; never logged or shown.
- Every form that acts carries the CSRF token, made afresh by each process and compared
  in constant time; a POST without it is refused, so another site cannot make a
  browser that holds the cookie act.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..errors import InvalidArgument, LabqueueError

TOKEN_VARIABLE = "LABQUEUE_DASHBOARD_TOKEN"
COOKIE = "labqueue_dashboard"
CSRF_FIELD = "csrf"
# What a token may hold: what `openssl rand -hex` and secrets.token_urlsafe() make, and
# nothing a cookie or a URL would have to quote.
TOKEN_TEXT = re.compile(r"[A-Za-z0-9._~+/=-]+")


class NeedsToken(LabqueueError):
    """A dashboard would listen beyond this machine with no token."""


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen on `host` beyond this machine without a token (NeedsToken), and
    refuse a token that is empty or holds what a cookie would quote (InvalidArgument)."""
    if token is not None and not TOKEN_TEXT.fullmatch(token):
        raise InvalidArgument(
            "a dashboard token must be letters, digits and . _ ~ + / = - only (try: openssl rand -hex 24)"
        )
    if token is None and not is_loopback(host):
        raise NeedsToken(
            f"--host {host} lets other machines reach the dashboard: give it a token with --token "
            f"or {TOKEN_VARIABLE} (every request must then carry it), or listen on 127.0.0.1"
        )


class Guard:
    """The tokens of one dashboard process."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.csrf = secrets.token_urlsafe(32)

    def admits(self, cookie_header: str | None, authorization: str | None) -> bool:
        """Does the request carry the access token (always, when there is none)?"""
        if self.token is None:
            return True
        if authorization and authorization.startswith("Bearer "):
            return self._same(authorization[len("Bearer ") :])
        return self._same(cookie_value(cookie_header))

    def token_in_query(self, path: str) -> tuple[bool, str] | None:
        """For a first visit with ?token=...: (right token?, the same path without it).
        None when the query holds no token."""
        parts = urlsplit(path)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        given = [value for key, value in pairs if key == "token"]
        if not given:
            return None
        rest = urlencode([(key, value) for key, value in pairs if key != "token"])
        return self._same(given[-1]), parts.path + (f"?{rest}" if rest else "")

    def cookie(self) -> str:
        """The Set-Cookie value that carries the token from now on."""
        return f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

    def _same(self, given: str | None) -> bool:
        assert self.token is not None
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def cookie_value(header: str | None) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return None if morsel is None else morsel.value
