"""What the dashboard lets in before any page runs: which ``Host`` it answers, which
state-changing requests it believes came from its own pages, and how often one browser
may fail to log in.

Owns :func:`allowed_hosts` (the loopback names, the bound address and the operator's
``--allowed-host`` names), :func:`host_refusal` (a foreign ``Host``: DNS rebinding),
:func:`origin_refusal` (a POST another site made: CSRF, login CSRF) and
:class:`LoginThrottle` (failed logins per browser address). Used by ``_app``'s
middlewares; knows nothing of sessions or the scheduler.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from aiohttp import web

from scheduler._throttle import FailureThrottle

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names every dashboard answers (a browser reaches them only from this machine)."""
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request the dashboard's own pages (or the user, typing
the address) made."""


def _name(host: str) -> str:
    """A host name as compared: lower case, no trailing dot, IPv6 without brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names the dashboard answers: the loopback names, the address it is
    bound to (unless that is a wildcard) and ``extra``."""
    names = set(LOOPBACK_NAMES)
    if bind_host not in WILDCARD_BINDS:
        names.add(_name(bind_host))
    names.update(_name(h) for h in extra if _name(h))
    return frozenset(names)


def host_name(header: str | None) -> str | None:
    """The name part of a ``Host`` header (``[::1]:8090`` -> ``::1``); None when it has
    none or is malformed."""
    if not header:
        return None
    try:
        parsed = urlsplit("//" + header.strip())
        name = parsed.hostname
        parsed.port  # noqa: B018 - raises ValueError on a port that is no number
    except ValueError:
        return None
    return _name(name) if name else None


def host_refusal(request: web.Request, allowed: frozenset[str]) -> str | None:
    """Why ``request``'s ``Host`` is not answered (a DNS-rebinding page sends its own
    name), or None when it is one of ``allowed``."""
    name = host_name(request.headers.get("Host"))
    if name is None:
        return "the request names no host"
    if name in allowed:
        return None
    return (
        f"this dashboard does not answer for the host name {name[:100]!r}; "
        "start it with --allowed-host NAME to allow it"
    )


def origin_refusal(request: web.Request) -> str | None:
    """Why a state-changing ``request`` is refused as another site's, or None.

    An ``Origin`` a browser sends must be this dashboard's own (scheme aside: a TLS
    proxy in front changes it). Our pages send ``Referrer-Policy: no-referrer``, so
    their own form posts say ``Origin: null``: then (and without ``Origin``)
    ``Sec-Fetch-Site`` decides, and must say same-origin. A client that sends neither
    (curl, a very old browser) is no cross-site page: the CSRF token still guards it;
    ``null`` without ``Sec-Fetch-Site`` (an opaque origin) is refused."""
    if request.method in SAFE_METHODS:
        return None
    origin = request.headers.get("Origin")
    if origin is not None and origin != "null":
        try:
            netloc = urlsplit(origin).netloc.lower()
        except ValueError:
            netloc = ""
        if netloc != request.headers.get("Host", "").strip().lower():
            return f"the request comes from another site ({origin[:100]})"
        return None
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is None:
        return "the request comes from an opaque origin" if origin == "null" else None
    if fetch_site not in SAME_SITE_FETCHES:
        return f"the request comes from another site (Sec-Fetch-Site: {fetch_site[:20]})"
    return None


def client_address(request: web.Request) -> str:
    """The browser's address as the dashboard sees it (its TCP peer)."""
    remote = request.remote or "unknown"
    try:
        return str(ipaddress.ip_address(remote))
    except ValueError:
        return remote[:64]


class LoginThrottle(FailureThrottle):
    """Failed logins per browser address: after ``limit`` failures within ``window_s``
    that address may not try again for ``block_s``; other browsers are not affected."""

    MAX_CLIENTS = 10_000
    """Addresses remembered at most (the oldest windows are dropped first)."""

    def __init__(
        self,
        limit: int = 5,
        window_s: float = 60.0,
        block_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(limit, window_s, block_s, max_callers=self.MAX_CLIENTS, clock=clock)
