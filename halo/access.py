"""Who is calling over HTTP: loopback is the socket's peer address, never a header."""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web


def peer_is_loopback(request: web.BaseRequest) -> bool:
    """True when the TCP peer is 127.0.0.0/8 or ::1. X-Forwarded-For is ignored on purpose."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport else None
    if not peer:
        return False
    try:
        return ipaddress.ip_address(peer[0]).is_loopback
    except ValueError:  # unix sockets and the like are not loopback TCP
        return False


def bearer_token(request: web.BaseRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def token_matches(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; no expected token means no token can match."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
