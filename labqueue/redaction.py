"""The one redaction: a database location, or any text that may hold one, without its secrets.

Everything labqueue prints, logs, puts in an error or hands to another process that may
name a database goes through `redact()`:

    redact("postgresql://app:s3cret@db/jobs?password=x")  -> "postgresql://app:***@db/jobs?password=***"
    redact(str(exc), url)   # a driver's message, with every secret of `url` masked too

It never raises and never parses strictly, so a malformed URL is masked as well as a good
one: everything between ``://`` and the last ``@`` that holds a ``:`` is user info (the
user name is kept when it looks like one), every ``password`` parameter's value (in a URL's
query, percent-encoded or not, or ``key=value`` text) is masked, and the secrets of each
location passed after the text are masked wherever they appear in it as a whole token:
libpq's own messages can quote a password alone (``invalid percent-encoded token: "..."``).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from typing import NoReturn
from urllib.parse import unquote

MASK = "***"
# A URL in free text: a scheme, ://, then everything up to a space or a quote.
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]*")
# A query parameter of a URL (its key may be percent-encoded: libpq decodes it).
QUERY_PARAMETER = re.compile(r"([?&;])([^=&#;]*)=([^&#;]*)")
# key=value text outside URLs (a libpq conninfo string, an environment listing): any key
# naming a password, its value quoted or up to the next space.
KEY_VALUE = re.compile(r"(?i)(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'\"]+)")
# What a user name looks like; anything else before the last @ is masked whole.
USER_NAME = re.compile(r"[^/?#@\[\]:\s]*")


def redact(text: object, *locations: object) -> str:
    """`text` (a location, or a message that may quote one) with no password left in it: the
    password of every URL in it and every password parameter masked, and then every secret
    of each of `locations` (the URL or path the text may echo) masked where it appears."""
    text = str(text)
    pieces, start = [], 0
    for url in URL.finditer(text):
        pieces += [KEY_VALUE.sub(_mask_value, text[start : url.start()]), _redact_url(url)]
        start = url.end()
    out = "".join([*pieces, KEY_VALUE.sub(_mask_value, text[start:])])
    for secret in sorted({s for loc in locations for s in secrets_of(loc)}, key=len, reverse=True):
        out = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", MASK, out)
    return out


def secrets_of(location: object) -> set[str]:
    """Every password a location carries (as written and percent-decoded, and the pieces a
    parser that stops at "/" would read), or an empty set."""
    if location is None:
        return set()
    text = os.fspath(location) if isinstance(location, os.PathLike) else str(location)
    scheme_end = text.find("://")
    if scheme_end < 0:
        found = [m.group(2).strip("'") for m in KEY_VALUE.finditer(text)]
        pieces: list[str] = []
    else:
        rest = text[scheme_end + 3 :]
        at = rest.rfind("@")
        password = rest[:at].split(":", 1)[1] if at >= 0 and ":" in rest[:at] else ""
        parameters = QUERY_PARAMETER.findall(rest)
        found = [password, *(value for _, key, value in parameters if "password" in unquote(key).lower())]
        # a parser that stops at "/" (libpq) reads a password holding one as a port or a path
        pieces = [piece for piece in password.split("/") if len(piece) > 1] if "/" in password else []
    candidates = {form for value in [*found, *pieces] for form in (value, unquote(value))}
    return {secret for secret in candidates if secret and secret != MASK}


def _redact_url(match: re.Match[str]) -> str:
    url = match.group(0)
    scheme, _, rest = url.partition("://")
    at = rest.rfind("@")
    if at >= 0 and ":" in rest[:at]:
        user, _, password = rest[:at].partition(":")
        if password and password != MASK:
            shown = user if USER_NAME.fullmatch(user) else MASK
            rest = f"{shown}:{MASK}{rest[at:]}"
    return f"{scheme}://{QUERY_PARAMETER.sub(_mask_parameter, rest)}"


def _mask_parameter(match: re.Match[str]) -> str:
    separator, key, value = match.groups()
    if "password" in unquote(key).lower() and value:
        value = MASK
    return f"{separator}{key}={value}"


def _mask_value(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}"


class RedactingFilter(logging.Filter):
    """A logging filter that masks the secrets of `locations` (and any URL's password) in
    every record's message, for the handlers of a process that holds a secret location."""

    def __init__(self, *locations: object) -> None:
        super().__init__()
        self.locations = locations

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, *self.locations)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def guard_logging(location: object, logger: logging.Logger | None = None) -> None:
    """Add a RedactingFilter for `location` to every handler of `logger` (the root logger),
    when the location carries a secret at all."""
    if not secrets_of(location):
        return
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(location))


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, its usage errors redacted: a URL typed where another value was
    expected is echoed without its password. Its subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        super().error(redact(message))
