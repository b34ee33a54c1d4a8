"""Which ``Host`` a request may name, and which origin may post to the viewer.

A browser sends the name it resolved in ``Host``. A page of another site that rebinds its own
name to the viewer's address (DNS rebinding) therefore names that site, and is refused: the
viewer answers only the names it was told about and, when bound to every interface, IP
literals (an IP literal cannot be rebound: its origin is the viewer's own address).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ConfigurationError

__all__ = ["HostCheck", "HostPolicy", "normalise_host"]

# host, or [IPv6 literal], then an optional :port
_HOST = re.compile(r"(?:\[(?P<v6>[^\]]*)\]|(?P<name>[^:\[\]]+))(?::(?P<port>[0-9]{1,5}))?")
# Methods that change nothing: only the others are checked against Origin.
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _ip(text: str) -> str | None:
    """``text`` as a canonical IP address (``::1`` for ``0:0::1``), or None if it is a name."""
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return None


def normalise_host(value: str) -> tuple[str, str] | None:
    """(host, port) of a ``Host`` header value, or None if it is not one.

    Names are case-insensitive and ``name.`` is the same name as ``name``, so the host is
    lowercased and loses one trailing dot; an IP literal is written canonically, without
    brackets. The port is "" when the header names none.
    """
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    if match["v6"] is not None:
        try:
            host = ipaddress.IPv6Address(match["v6"]).compressed
        except ValueError:
            return None
    else:
        name = match["name"].lower()
        name = name[:-1] if name.endswith(".") else name
        if not name:
            return None
        host = _ip(name) or name
    return host, match["port"] or ""


@dataclass(frozen=True)
class HostPolicy:
    """The hosts a viewer answers to, from a list of names and addresses.

    ``"*"`` admits any host (for a proxy in front that checks it); an unspecified address
    (``0.0.0.0``, ``::``) admits every IP literal, as a server bound to it is reachable at
    every address; any other entry admits that name or address.
    """

    hosts: frozenset[str]
    any_ip: bool
    any_host: bool

    @classmethod
    def of(cls, allowed: Iterable[str]) -> HostPolicy:
        """The policy of ``allowed`` (names, IP addresses, ``[v6]`` literals, ``*``)."""
        hosts: set[str] = set()
        any_ip = any_host = False
        for entry in allowed:
            if entry == "*":
                any_host = True
                continue
            # An IPv6 address is given bare ("::1") as often as bracketed ("[::1]").
            parsed = normalise_host(f"[{entry}]" if ":" in entry else entry)
            if parsed is None or parsed[1]:
                raise ConfigurationError(f"not a host name or IP address: {entry!r}")
            host = parsed[0]
            any_ip = any_ip or (_ip(host) is not None and ipaddress.ip_address(host).is_unspecified)
            hosts.add(host)
        return cls(frozenset(hosts), any_ip, any_host)

    def allows(self, host_header: str | None) -> bool:
        """Whether a request with this ``Host`` header (None: absent) is answered."""
        if self.any_host:
            return True
        parsed = normalise_host(host_header or "")
        if parsed is None:
            return False
        host = parsed[0]
        return host in self.hosts or (self.any_ip and _ip(host) is not None)


def _same_origin(origin: str, host_header: str | None) -> bool:
    """Whether the ``Origin`` of a request is the viewer itself, as its ``Host`` names it."""
    scheme, sep, netloc = origin.partition("://")
    if not sep or scheme not in ("http", "https"):
        return False  # "null" (a sandboxed frame, a file) or something stranger
    ours, theirs = normalise_host(host_header or ""), normalise_host(netloc)
    return ours is not None and ours == theirs


class HostCheck:
    """Refuses requests naming a host the policy does not admit (400), and writes from a page
    of another origin (403), before they reach the application."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.policy.allows(host):
            # Nothing of the viewer, and no echo of the name: a plain refusal.
            await PlainTextResponse("Invalid host header", 400)(scope, receive, send)
            return
        origin = headers.get("origin")
        if (
            scope.get("method", "GET") not in _SAFE_METHODS
            and origin is not None
            and not _same_origin(origin, host)
        ):
            # The CSRF token already stops a forged form; this refuses it before the body.
            await PlainTextResponse("Cross-origin request refused", 403)(scope, receive, send)
            return
        await self.app(scope, receive, send)
