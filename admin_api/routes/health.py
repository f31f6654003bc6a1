"""Is halo up, and how is it: `/healthz` for anyone, `/status` for the admin."""

from __future__ import annotations

from aiohttp import web

from admin_api.base import halo_of
from admin_api.routes import Route
from admin_api.status import status_snapshot


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def status(request: web.Request) -> web.Response:
    return web.json_response(await status_snapshot(halo_of(request)))


ROUTES = [
    Route("GET", "/healthz", healthz, "anyone"),
    Route("GET", "/status", status, "token"),
]
