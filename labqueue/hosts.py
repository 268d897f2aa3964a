"""Which `Host` names an HTTP endpoint of labqueue answers (the dashboard, `labqueue metrics`):
the defence against DNS rebinding.

A web page the operator visits can point its own name at 127.0.0.1 once loaded; its
script then talks to a server on this machine as if it were its own site, and the
browser's Origin checks pass, since origin and Host are both the attacker's name. The
browser still sends that name in `Host`, so a server that answers only the names it
serves gives such a page nothing. The names served: `localhost`, any loopback address,
the address it listens on, and the names an operator adds (`--allow-host`, for a proxy in
front: JupyterLab's /proxy/PORT/ forwards the lab's own Host). Listening on every
interface (0.0.0.0 or ::) serves this machine's addresses too, so any IP address is
answered then: an address in Host is a visit by address, which no rebinding produces.
`*` answers every name, for a server reached only through an authenticating proxy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from .errors import InvalidArgument

ANY = "*"
# What a refused request is told (the name it sent is not repeated back).
REFUSAL = (
    "This server does not answer the host name this request was sent to (its Host header): "
    "open it as localhost or 127.0.0.1, or start it with --allow-host NAME for a name it is reached by."
)
WILDCARDS = ("0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_name(header: str) -> str | None:
    """The name in a Host header, lower case, without its port, brackets or final dot
    ("[::1]:9188" -> "::1", "LocalHost.:80" -> "localhost"); None when it is malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name if is_address(name) else None
    name, colon, port = header.partition(":")
    if colon and not port.isdigit():
        return None
    name = name.rstrip(".")
    if not name or any(not (c.isalnum() or c in "-._") for c in name):
        return None
    return name


def allowed_name(text: str) -> str:
    """One --allow-host value checked: a host name or address (no port, no scheme), or *."""
    name = text.strip()
    if name == ANY:
        return ANY
    found = host_name(name if ":" not in name or name.startswith("[") else f"[{name}]")
    if found is None or (":" in name and not is_address(found)):
        raise InvalidArgument(
            f"--allow-host takes a host name or address as a browser's Host header names it "
            f"(no scheme, no port), or * for any, got {text!r}"
        )
    return found


class AllowedHosts:
    """The Host names one server answers: see the module's docstring."""

    def __init__(self, listen: str, extra: Iterable[str] = ()) -> None:
        added = [allowed_name(name) for name in extra]
        self.any = ANY in added
        self.every_address = listen.strip("[]") in WILDCARDS
        self.names = {"localhost", *(name for name in added if name != ANY)}
        if not self.every_address:
            self.names.add(allowed_name(listen))

    def admits(self, header: str | None) -> bool:
        """May a request with this Host header be answered? A request without one (HTTP/1.0,
        a script: no browser leaves it out) is; a malformed one is not."""
        if header is None:
            return True
        name = host_name(header)
        if name is None:
            return False
        if self.any or name in self.names or is_loopback(name):
            return True
        return self.every_address and is_address(name)
