"""The server's front door while halo is still loading (issue 23: a start in seconds).

Importing the Agents SDK and building halo take seconds. `halo serve` opens its port first,
behind this front: `/healthz` answers at once, and any other request waits until halo is
built, then goes to the real app. A message sent meanwhile is answered, only later.

Light on purpose: aiohttp and the standard library only, so it runs before the heavy imports.
The real app is reached through `Application._handle`, aiohttp's own per-request entry point
(the same call its server makes); the real app is frozen and started here as a runner would.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from aiohttp import web

CLIENT_MAX_SIZE = 1024**2  # the real app's limit too: the request object is made here
COULD_NOT_START = "halo could not start (see its log)"


def home_fingerprint(home: Path) -> str:
    """Which HALO_HOME a server serves, without saying where it is: a short hash of its path.
    `halo doctor` compares it with its own to tell "this halo" from "another halo on the port"."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


class StartingFront:
    """One catch-all route: `/healthz` now, everything else once `open()` has the real app."""

    def __init__(self, home: Path) -> None:
        self.fingerprint = home_fingerprint(home)
        self._app: web.Application | None = None
        self._why = COULD_NOT_START
        self._settled = asyncio.Event()  # the real app is open, or halo failed to start
        self.front = web.Application(client_max_size=CLIENT_MAX_SIZE)
        self.front.router.add_route("*", "/{tail:.*}", self._dispatch)

    async def open(self, app: web.Application) -> None:
        """Hand every request, waiting and future, to `app`."""
        app.freeze()
        await app.startup()
        self._app = app
        self._settled.set()

    def failed(self, why: str = COULD_NOT_START) -> None:
        """halo will not start: waiting requests get a 503 saying `why` instead of waiting for ever."""
        self._why = why
        self._settled.set()

    async def close(self) -> None:
        if self._app is not None:
            await self._app.shutdown()
            await self._app.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if self._app is None:
            if request.path == "/healthz" and request.method == "GET":
                return web.json_response({"ok": True, "home": self.fingerprint, "starting": True})
            if request.path == "/livez" and request.method == "GET":  # it runs; not ready
                return web.json_response({"ok": True, "role": "standby", "problem": "starting"})
            if request.path in ("/readyz", "/active") and request.method == "GET":  # no traffic while loading
                return web.json_response({"ok": False, "role": "standby", "problem": "starting"}, status=503)
            await self._settled.wait()
        if self._app is None:
            return web.json_response({"error": self._why}, status=503)
        return await self._app._handle(request)
