"""The aiohttp server: admin API, dashboard and the adapters' pages, built by one factory.

Tests call `create_app` with their own Halo; `halo serve` runs the same app.
"""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web

from admin_api.base import HALO, OPENAPI, errors_as_json, json_error, no_store
from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.guards import guard, is_admin, token_required
from admin_api.openapi import build_spec
from admin_api.routes import admin_routes
from config.settings import Settings
from halo.port import AdminRoutes
from halo.runtime.app import Halo, build_halo
from halo.runtime.heap import freeze_start_up_heap
from halo.web_auth import WEB_AUTH, DashboardLogin, dashboard_link

__all__ = ["HALO", "create_app", "is_admin", "json_error", "serve", "token_required"]


def create_app(halo: Halo) -> web.Application:
    app = web.Application(middlewares=[no_store, errors_as_json], client_max_size=1024**2)
    app[HALO] = halo
    app[WEB_AUTH] = DashboardLogin(halo.services.paths.logins)
    for route in admin_routes():
        app.router.add_route(route.method, route.path, guard(route.access, route.handler, route.on_unauthorized))
    extra_paths: dict[str, dict] = {}
    for adapter in halo.adapters:
        if isinstance(adapter, AdminRoutes):
            app.router.add_routes(adapter.admin_routes())
            extra_paths.update(adapter.openapi_paths())
    app[OPENAPI] = build_spec(extra_paths)
    return app


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then stop adapters and finish accepted messages."""
    halo = build_halo(settings)
    app = create_app(halo)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    limits = ConnectionLimits(settings.admin.max_connections, settings.admin.read_timeout_seconds)
    site = GuardedSite(runner, settings.admin.host, settings.admin.port, limits=limits)
    await site.start()
    await halo.start()
    freeze_start_up_heap()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0] if runner.addresses else (settings.admin.host, settings.admin.port)
    print(f"halo is running: http://{bound[0]}:{bound[1]}/  (chat: /chat)  HALO_HOME={settings.home}", flush=True)
    print(f"halo: open the dashboard (this link works once): {dashboard_link(settings, bound)}", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    print("halo: shutting down …", flush=True)
    halo.stopping()  # before waiting on requests in flight: a document being read is killed, not awaited
    await runner.shutdown()  # stop accepting; in-flight requests finish
    await runner.cleanup()
    await halo.close()
    print("halo: stopped", flush=True)
