"""The server's sockets, guarded against clients that never finish (issue 15, finding 6).

aiohttp has no read timeout for a request's head or body, so 300 connections that send
half a request were all held open for good. `GuardedSite` is a TCPSite whose connections
each get a watchdog: a connection is closed when its client has sent nothing for
`read_timeout` seconds while the server is waiting on that client (no request yet, or a
body still incomplete). A handler still working on a whole request (a model thinking for
45 s) is never cut. Past `max_connections` open at once, a new connection is closed at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class ConnectionLimits:
    max_connections: int = 256
    read_timeout: float = 30.0
    check_every: float = 1.0
    active: int = 0
    refused: int = 0  # turned away at the cap
    timed_out: int = 0  # closed by the read timeout
    checks: int = 0  # watchdog runs (so a test can wait past a timeout without the clock)


class GuardedProtocol(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the cap and the read-timeout watchdog."""

    def __init__(self, inner: Any, limits: ConnectionLimits) -> None:
        self.inner = inner
        self.limits = limits
        self.transport: asyncio.Transport | None = None
        self.counted = False
        self.last_read = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.limits.active >= self.limits.max_connections:
            self.limits.refused += 1
            transport.abort()
            return
        self.counted = True
        self.limits.active += 1
        loop = asyncio.get_running_loop()
        self.last_read = loop.time()
        self.timer = loop.call_later(self.limits.check_every, self._check)
        self.inner.connection_made(transport)

    def _waiting_on_client(self) -> bool:
        request = getattr(self.inner, "_current_request", None)  # aiohttp's request in progress
        return request is None or not request.content.is_eof()

    def _check(self) -> None:
        self.limits.checks += 1
        loop = asyncio.get_running_loop()
        if loop.time() - self.last_read >= self.limits.read_timeout and self._waiting_on_client():
            self.limits.timed_out += 1
            if self.transport is not None:
                self.transport.abort()
            return
        self.timer = loop.call_later(self.limits.check_every, self._check)

    def data_received(self, data: bytes) -> None:
        self.last_read = asyncio.get_running_loop().time()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.counted:
            self.counted = False
            self.limits.active -= 1
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
            lambda: GuardedProtocol(server(), self.limits), self._host, self._port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
