"""`halo serve`: build halo, serve the admin server and the adapters' pages, run until a signal.

Here, in the composition root, because it joins the core (`build_halo`) with the admin
server (`create_app`); the admin API itself never imports the root.
"""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.server import create_app
from config.settings import Settings
from halo.runtime.app import build_halo
from halo.runtime.heap import freeze_start_up_heap
from halo.web_auth import dashboard_link


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
    await runner.shutdown()  # stop accepting; in-flight requests finish
    await runner.cleanup()
    await halo.close()
    print("halo: stopped", flush=True)
