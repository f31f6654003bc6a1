"""The aiohttp server: admin API, dashboard and the adapters' pages, built by one factory.

Tests call `create_app` with their own Halo; `halo serve` runs the same app.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
from typing import TYPE_CHECKING

from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.starting import CLIENT_MAX_SIZE, StartingFront
from config.settings import Settings
from halo.web_auth import dashboard_link

if TYPE_CHECKING:
    from halo.runtime.app import Halo

__all__ = ["create_app", "serve"]


def create_app(halo: Halo) -> web.Application:
    from admin_api.base import HALO, OPENAPI, errors_as_json, no_store, no_unwanted_body
    from admin_api.guards import guard
    from admin_api.openapi import build_spec
    from admin_api.routes import admin_routes
    from halo.http_body import takes_body
    from halo.port import AdminRoutes
    from halo.web_auth import WEB_AUTH, DashboardLogin

    app = web.Application(middlewares=[no_store, errors_as_json, no_unwanted_body], client_max_size=CLIENT_MAX_SIZE)
    app[HALO] = halo
    app[WEB_AUTH] = DashboardLogin(halo.services.paths.logins)
    for route in admin_routes():
        handler = guard(route.access, route.handler, route.on_unauthorized)
        app.router.add_route(route.method, route.path, takes_body(handler) if route.body is not None else handler)
    extra_paths: dict[str, dict] = {}
    for adapter in halo.adapters:
        if isinstance(adapter, AdminRoutes):
            app.router.add_routes(adapter.admin_routes())
            extra_paths.update(adapter.openapi_paths())
    app[OPENAPI] = build_spec(extra_paths)
    return app


def _load_halo() -> None:
    """The heavy imports (the Agents SDK above all), run in a thread while the loop answers."""
    importlib.import_module("halo.runtime.app")
    importlib.import_module("admin_api.routes")
    importlib.import_module("admin_api.openapi")


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then stop adapters and finish accepted messages.

    The port opens first, behind `StartingFront`: `/healthz` answers while the SDK loads, and a
    request that comes meanwhile waits for halo and is then answered."""
    front = StartingFront(settings.home)
    runner = web.AppRunner(front.front, handle_signals=False)
    await runner.setup()
    limits = ConnectionLimits.from_settings(settings.admin)
    site = GuardedSite(runner, settings.admin.host, settings.admin.port, limits=limits)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    halo: Halo | None = None

    hup_while_loading = False

    def reload_config() -> None:  # SIGHUP applies halo.yaml now, as `halo reload` does
        nonlocal hup_while_loading
        if halo is None:  # the settings were read before loading: apply the file once halo is up
            hup_while_loading = True
        else:
            halo.config.ask()

    loop.add_signal_handler(signal.SIGHUP, reload_config)
    try:
        await asyncio.to_thread(_load_halo)
        from halo.runtime.app import build_halo
        from halo.runtime.heap import freeze_start_up_heap

        halo = build_halo(settings)
        app = create_app(halo)
        await halo.start()
        await front.open(app)  # the requests that waited go on now
        if hup_while_loading:
            halo.config.ask()
    except BaseException:
        front.failed()
        await runner.cleanup()
        if halo is not None:
            await halo.close()
        raise
    freeze_start_up_heap()
    bound = runner.addresses[0] if runner.addresses else (settings.admin.host, settings.admin.port)
    print(f"halo is running: http://{bound[0]}:{bound[1]}/  (chat: /chat)  HALO_HOME={settings.home}", flush=True)
    print(f"halo: open the dashboard (this link works once): {dashboard_link(settings, bound)}", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    print("halo: shutting down …", flush=True)
    await runner.shutdown()  # stop accepting; in-flight requests finish
    await runner.cleanup()
    await front.close()
    await halo.close()
    print("halo: stopped", flush=True)
