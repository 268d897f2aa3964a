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
import re
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..environment import DASHBOARD_TOKEN_VARIABLE as TOKEN_VARIABLE
from ..errors import InvalidArgument, LabqueueError
from ..hosts import is_loopback

COOKIE = "labqueue_dashboard"
CSRF_FIELD = "csrf"
# What a token may hold: what `openssl rand -hex` and secrets.token_urlsafe() make, and
# nothing a cookie or a URL would have to quote.
TOKEN_TEXT = re.compile(r"[A-Za-z0-9._~+/=-]+")
# A token is as hard to guess as a password should be: `openssl rand -hex 24` makes 48 characters.
MIN_TOKEN_CHARS = 32


class NeedsToken(LabqueueError):
    """A dashboard would listen beyond this machine with no token."""


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen on `host` beyond this machine without a token (NeedsToken), and
    refuse a token that is shorter than MIN_TOKEN_CHARS or holds what a cookie would quote
    (InvalidArgument; the token itself is never repeated)."""
    check_token(token)
    if token is None and not is_loopback(host):
        raise NeedsToken(
            f"--host {host} lets other machines reach the dashboard: give it a token with --token "
            f"or {TOKEN_VARIABLE} (every request must then carry it), or listen on 127.0.0.1"
        )


def check_token(token: str | None) -> None:
    """A token is letters, digits and . _ ~ + / = - (nothing a cookie would quote), at least
    MIN_TOKEN_CHARS of them; None is no token. The message never repeats the token."""
    if token is None:
        return
    if not TOKEN_TEXT.fullmatch(token):
        raise InvalidArgument(
            "a dashboard token must be letters, digits and . _ ~ + / = - only (try: openssl rand -hex 24)"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidArgument(
            f"a dashboard token must be at least {MIN_TOKEN_CHARS} characters, got one of {len(token)} "
            "(try: openssl rand -hex 24)"
        )


class Guard:
    """The tokens of one dashboard process."""

    def __init__(self, token: str | None) -> None:
        check_token(token)
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
