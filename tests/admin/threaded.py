"""halo served from its own thread and event loop, for synchronous clients (schemathesis, a browser)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.server import create_app
from config.settings import Settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.admin.peers import PeerSite


class ThreadedHalo:
    """`start()` returns once halo listens on 127.0.0.1 (and, if asked, behind a spoofed remote peer)."""

    def __init__(
        self,
        settings: Settings,
        prepare: Callable[[Halo], Any] | None = None,
        remote_peer: tuple[str, int] | None = None,
    ) -> None:
        self.settings = settings
        self.prepare = prepare
        self.remote_peer = remote_peer
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="halo-under-test")
        self.halo: Halo | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self.remote_url = ""

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        """Run a coroutine on halo's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> ThreadedHalo:
        self.thread.start()
        self.run(self._start())
        return self

    async def _start(self) -> None:
        self.halo = build_halo(self.settings)
        if self.prepare is not None:
            result = self.prepare(self.halo)
            if asyncio.iscoroutine(result):
                await result
        self.runner = web.AppRunner(create_app(self.halo))
        await self.runner.setup()
        site = GuardedSite(self.runner, "127.0.0.1", 0, limits=ConnectionLimits.from_settings(self.settings.admin))
        await site.start()
        self.url = f"http://127.0.0.1:{site.port}"
        if self.remote_peer is not None:
            remote = PeerSite(self.runner, self.remote_peer)
            await remote.start()
            self.remote_url = f"http://127.0.0.1:{remote.port}"

    async def _stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.halo is not None:
            await self.halo.close()

    def stop(self) -> None:
        try:
            self.run(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
