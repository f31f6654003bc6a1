"""Serving one app to peers that are not loopback, decided where the server sees it: the socket.

Two ways, both below the HTTP layer (never a header):
- an interface address of this machine that is not loopback: the connection really comes
  from that address;
- a transport that reports another peer address to aiohttp (for machines with no such
  interface), exactly what `request.transport.get_extra_info("peername")` returns.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import socket
import subprocess
from typing import Any

from aiohttp import web

from admin_api.request_handler import request_handler
from tests import processes

SPOOFED_PEER = ("203.0.113.7", 40123)  # TEST-NET-3: nobody's real address


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine that is not loopback and accepts a connection to itself."""
    candidates: list[str] = []
    if shutil.which("ip"):
        try:
            out = processes.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, timeout=5).stdout
            candidates = [a["local"] for iface in json.loads(out) for a in iface.get("addr_info", [])]
        except (OSError, ValueError, KeyError, subprocess.SubprocessError):
            candidates = []
    for address in candidates:
        if ipaddress.ip_address(address).is_loopback:
            continue
        try:
            with socket.socket() as server:
                server.bind((address, 0))
                server.listen()
                with socket.create_connection(server.getsockname(), timeout=2):
                    return address
        except OSError:
            continue
    return None


class PeerTransport:
    """The real transport, except for the peer address it reports."""

    def __init__(self, inner: asyncio.Transport, peer: tuple[Any, ...]) -> None:
        self._inner = inner
        self._peer = peer

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        return self._inner.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PeerProtocol(asyncio.Protocol):
    """Hands aiohttp's protocol (as halo's server makes it) a PeerTransport; everything else passes straight through."""

    def __init__(self, inner: asyncio.Protocol, peer: tuple[Any, ...]) -> None:
        self.inner = inner
        self.peer = peer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(PeerTransport(transport, self.peer))  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class PeerSite(web.BaseSite):
    """A site on 127.0.0.1 whose every connection reports `peer` as its peer address."""

    def __init__(self, runner: web.BaseRunner, peer: tuple[Any, ...]) -> None:
        super().__init__(runner)
        self._peer = peer
        self.port = 0

    @property
    def name(self) -> str:
        return f"http://127.0.0.1:{self.port} (as {self._peer[0]})"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: PeerProtocol(request_handler(server), self._peer), "127.0.0.1", 0
        )
        self.port = self._server.sockets[0].getsockname()[1]
