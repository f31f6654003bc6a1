"""Who is calling over HTTP: loopback is the socket's peer address, never a header.

Headers can only take trust away, never grant it: a loopback peer whose request names
another host (DNS rebinding) or comes from another site's page (cross-site request from
a browser on this machine) is treated like any other machine and needs the token.
"""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web
from yarl import URL

from config.family import secret_bytes

_SAME_MACHINE_FETCH_SITES = frozenset({"same-origin", "none"})
FORWARDED_PEER = "X-Halo-Forwarded-Peer"  # the client's address, set by a standby that forwards


def is_loopback_address(host: str) -> bool:
    """127.0.0.0/8 and ::1, also written as an IPv4-mapped IPv6 address (dual-stack sockets)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def peer_is_loopback(request: web.BaseRequest) -> bool:
    """True when the TCP peer is 127.0.0.0/8 or ::1. X-Forwarded-For is ignored on purpose."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport else None
    if not peer or not isinstance(peer, tuple | list):  # unix sockets and the like are not loopback TCP
        return False
    forwarded_for = request.headers.get(FORWARDED_PEER)  # a standby passed it on (halo/cluster/forward.py)
    if forwarded_for is not None and not is_loopback_address(forwarded_for):
        return False  # only ever takes trust away: the client itself was not on this machine
    return is_loopback_address(str(peer[0]))


def _host_url(host: str, scheme: str = "http") -> URL | None:
    try:
        return URL(f"{scheme}://{host}")
    except ValueError:
        return None


def _names_this_machine(host: str | None) -> bool:
    url = _host_url(host) if host else None
    hostname = url.host if url is not None else None
    if not hostname:
        return False
    return hostname.lower() == "localhost" or is_loopback_address(hostname.strip("[]"))


def _same_authority(origin: URL, host: str) -> bool:
    served = _host_url(host, origin.scheme or "http")
    if served is None:
        return False
    return (origin.host or "").lower() == (served.host or "").lower() and origin.port == served.port


def _browser_context_is_local(request: web.BaseRequest) -> bool:
    """The Host names this machine and, for browsers, the page making the request is ours."""
    host = request.headers.get("Host")
    if host is not None and not _names_this_machine(host):
        return False  # a rebound name (evil.example → 127.0.0.1) or a proxy in front
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site not in _SAME_MACHINE_FETCH_SITES:
        return False
    origin = request.headers.get("Origin")
    if origin is not None:
        try:
            parsed = URL(origin)
        except ValueError:
            return False
        if host is None or not _names_this_machine(parsed.host) or not _same_authority(parsed, host):
            return False
    return True


def is_local_request(request: web.BaseRequest) -> bool:
    """A request from this machine that another site cannot have forged: loopback peer,
    a Host that names this machine, and no cross-site browser context."""
    return peer_is_loopback(request) and _browser_context_is_local(request)


def bearer_token(request: web.BaseRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def token_matches(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; no expected token means no token can match."""
    if not given or not expected:
        return False
    return hmac.compare_digest(secret_bytes(given), secret_bytes(expected))
