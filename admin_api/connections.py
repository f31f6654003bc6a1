"""The server's sockets, guarded against clients that hold connections without finishing requests.

aiohttp has no deadline for a request's head or body, and its idle timer restarts on every byte,
so 300 connections that each sent one header line every 5 s held every slot (issue 15 finding 6,
issue 22 finding 4). `GuardedSite` is a TCPSite whose every connection goes through
`GuardedProtocol`, which enforces:

- a deadline for a request's head (`header_timeout`), counted from when the server starts
  waiting for it (the connection opened, or the previous answer was sent), whatever trickles
  in meanwhile; an idle keep-alive connection is closed at the same deadline;
- a deadline for its body (`body_timeout`), counted from the end of the head;
- a silence limit (`read_timeout`) while the server waits on the client, as before.

A handler still working on a whole request (a model thinking for 45 s) is never cut.

Who gets a slot. At most `max_connections` are open, and at most `max_per_address` from one
address, so one machine never holds them all. When a new connection would pass either cap,
the server makes room by closing the connection that has waited longest for a request head
(from the same address when that address is at its cap, else from the address holding the
most), rather than turning the newcomer away. A waiting connection is all a client without
a credential can hold for long: an anonymous request is answered at once (a body it sends
is not read, halo.http_body), so only a request being served — in practice one carrying a
parent's or member's credential, or a page load — is safe from being displaced. A flood of
trickled heads from one address, even the parent's own (loopback, or a laptop shared with
malware), therefore displaces its own oldest members, and a real request, whose head arrives
in one packet, is served. The newcomer is turned away (503, JSON) only when every slot is
serving a request. Known limit: a request head that really does take long to arrive (a very
slow link) can be displaced under such a flood.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from admin_api.request_handler import request_handler
from config.settings import AdminSettings

Phase = Literal["head", "body", "serving"]

BUSY = b'{"error": "the server is busy: try again in a moment"}'
TOO_SLOW = b'{"error": "the request took too long to arrive"}'


@dataclass
class ConnectionLimits:
    max_connections: int = 256
    max_per_address: int = 32
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    read_timeout: float = 30.0
    check_every: float = 1.0
    active: int = 0
    refused: int = 0  # turned away: every slot was serving a request
    evicted: int = 0  # closed while waiting for a head, to make room for a newer connection
    timed_out: int = 0  # closed by a deadline or the silence limit
    checks: int = 0  # watchdog runs (so a test can wait past a timeout without the clock)
    by_address: dict[str, dict[GuardedProtocol, None]] = field(default_factory=lambda: defaultdict(dict))

    @classmethod
    def from_settings(cls, admin: AdminSettings, **overrides: Any) -> ConnectionLimits:
        return cls(
            max_connections=admin.max_connections,
            max_per_address=min(admin.max_connections_per_address, admin.max_connections),
            header_timeout=admin.header_timeout_seconds,
            body_timeout=admin.body_timeout_seconds,
            read_timeout=admin.read_timeout_seconds,
            **overrides,
        )

    def from_address(self, address: str) -> int:
        return len(self.by_address.get(address, ()))

    def admit(self, newcomer: GuardedProtocol) -> bool:
        """Room for `newcomer`, made by displacing a waiting connection if need be (module docstring)."""
        victim: GuardedProtocol | None = None
        if self.from_address(newcomer.address) >= self.max_per_address:
            victim = _longest_waiting(self.by_address[newcomer.address])
            if victim is None:
                return False
        elif self.active >= self.max_connections:
            for address in sorted(self.by_address, key=self.from_address, reverse=True):
                victim = _longest_waiting(self.by_address[address])
                if victim is not None:
                    break
            if victim is None:
                return False
        if victim is not None:
            self.evicted += 1
            self.release(victim)  # its slot is the newcomer's from now, not when its close completes
            victim.close_waiting(BUSY, 503)
        self.active += 1
        newcomer.counted = True
        self.by_address[newcomer.address][newcomer] = None
        return True

    def release(self, gone: GuardedProtocol) -> None:
        if not gone.counted:
            return
        gone.counted = False
        self.active -= 1
        mine = self.by_address.get(gone.address)
        if mine is not None:
            mine.pop(gone, None)
            if not mine:
                del self.by_address[gone.address]


def _longest_waiting(connections: dict[GuardedProtocol, None]) -> GuardedProtocol | None:
    waiting = [c for c in connections if c.phase() == "head"]
    return min(waiting, key=lambda c: c.phase_since, default=None)


def peer_address(transport: asyncio.BaseTransport) -> str:
    """The peer's IP address as one key per machine (an IPv4-mapped IPv6 address is its IPv4)."""
    peer = transport.get_extra_info("peername")
    host = str(peer[0]) if isinstance(peer, tuple | list) and peer else "unknown"
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _answer(status: int, body: bytes) -> bytes:
    reason = {408: "Request Timeout", 503: "Service Unavailable"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedProtocol(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the caps and the deadlines (module docstring)."""

    def __init__(self, inner: Any, limits: ConnectionLimits) -> None:
        self.inner = inner
        self.limits = limits
        self.transport: asyncio.Transport | None = None
        self.address = "unknown"
        self.counted = False  # holds a slot in limits
        self.started = False  # aiohttp's protocol has the connection
        self.last_read = 0.0
        self.current: Phase = "head"
        self.phase_since = 0.0
        self.head_bytes = 0  # bytes of a request head received since the server began waiting for one
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.address = peer_address(transport)
        loop = asyncio.get_running_loop()
        self.last_read = self.phase_since = loop.time()
        if not self.limits.admit(self):
            self.limits.refused += 1
            transport.write(_answer(503, BUSY))
            transport.close()
            return
        self.started = True
        self.timer = loop.call_later(self.limits.check_every, self._check)
        self.inner.connection_made(transport)

    def phase(self) -> Phase:
        """Where this connection is: waiting for a head, receiving a body, or serving a request."""
        inner = self.inner
        request = getattr(inner, "_current_request", None)  # aiohttp's request being handled
        if request is not None:
            return "serving" if request.content.is_eof() else "body"
        if getattr(inner, "_request_in_progress", False) or getattr(inner, "_messages", None):
            return "serving"  # an answer being written, or a parsed request queued behind one
        return "head"

    def _update_phase(self) -> Phase:
        now = self.phase()
        if now != self.current:
            self.current = now
            self.phase_since = asyncio.get_running_loop().time()
            self.head_bytes = 0
        return now

    def _check(self) -> None:
        self.timer = None
        if self.transport is None or self.transport.is_closing():
            return
        self.limits.checks += 1
        loop = asyncio.get_running_loop()
        now = loop.time()
        phase = self._update_phase()
        waited = now - self.phase_since
        silent = now - self.last_read >= self.limits.read_timeout
        if phase == "head" and (waited >= self.limits.header_timeout or silent):
            self.limits.timed_out += 1
            self.close_waiting(TOO_SLOW, 408)
            return
        if phase == "body" and (waited >= self.limits.body_timeout or silent):
            self.limits.timed_out += 1
            self.transport.abort()  # a handler is reading it: there is no answer to give
            return
        self.timer = loop.call_later(self.limits.check_every, self._check)

    def close_waiting(self, body: bytes, status: int) -> None:
        """Close a connection waiting for a head; say why if the client had begun one."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.head_bytes:
            self.transport.write(_answer(status, body))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.last_read = asyncio.get_running_loop().time()
        if self._update_phase() == "head":
            self.head_bytes += len(data)
        self.inner.data_received(data)
        self._update_phase()

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.limits.release(self)
        if self.started:
            self.started = False
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class GuardedSite(web.BaseSite):
    """A TCP site whose connections are capped and watched (see the module docstring)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, limits: ConnectionLimits | None = None) -> None:
        super().__init__(runner)
        self._host = host
        self._port = port
        self.limits = limits or ConnectionLimits()
        self.port = port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: GuardedProtocol(request_handler(server), self.limits), self._host, self._port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
