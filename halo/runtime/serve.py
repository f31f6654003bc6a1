"""`halo serve`: open the port, build halo, serve the admin server and the adapters' pages,
run until a signal.

Here, in the composition root, because it joins the core (`build_halo`) with the admin
server (`create_app`); the admin API itself never imports the root. This module is light
on purpose: the port opens first, behind `StartingFront`, so `/healthz` answers while the
Agents SDK loads in a thread, and a request that comes meanwhile waits for halo and is then
answered.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import threading
from typing import TYPE_CHECKING

from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from admin_api.starting import StartingFront
from config.settings import Settings
from halo.web_auth import dashboard_link

if TYPE_CHECKING:
    from halo.inventory import Halo


def _load_halo() -> None:
    """The heavy imports (the Agents SDK above all), run in a thread while the loop answers."""
    from halo.runtime.heap import skip_httpx_cli

    skip_httpx_cli()
    importlib.import_module("halo.runtime.app")
    importlib.import_module("admin_api.server")


def exit_at_deadline(seconds: float) -> threading.Timer:
    """Arm a hard stop: if shutting down takes longer than `seconds` (a stuck thread, a slow
    provider), the process exits anyway. Nothing acknowledged is lost: every message is in its
    fsync'd transcript, and one left unanswered is caught up on the next start."""

    def stop_now() -> None:
        print(
            f"halo: still stopping after {seconds:g}s; exiting now (unanswered messages are caught up on start)",
            flush=True,
        )
        os._exit(1)

    timer = threading.Timer(seconds, stop_now)
    timer.daemon = True
    timer.start()
    return timer


async def serve(settings: Settings, ready: asyncio.Event | None = None, *, hard_deadline: bool = False) -> None:
    """Run until SIGINT/SIGTERM, then stop adapters and finish accepted messages. With
    `hard_deadline` (`halo serve`), the process exits within `admin.shutdown_seconds` of the
    signal whatever is still running."""
    front = StartingFront(settings.home)
    runner = web.AppRunner(front.front, handle_signals=False)
    await runner.setup()
    limits = ConnectionLimits.from_settings(settings.admin)
    site = GuardedSite(runner, settings.admin.host, settings.admin.port, limits=limits)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    deadline: list[threading.Timer] = []  # armed by the first stop signal, even while loading

    def stop_signal() -> None:
        stop.set()
        if hard_deadline and not deadline:
            deadline.append(exit_at_deadline(settings.admin.shutdown_seconds))

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_signal)
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
        if stop.is_set():  # asked to stop while loading: start nothing (no adapter polls, no turn runs)
            front.failed("halo is stopping")
            await runner.cleanup()
            _disarm(deadline)
            print("halo: stopped before it started", flush=True)
            return
        from admin_api.server import create_app
        from halo.runtime.app import build_halo

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
    from halo.runtime.heap import freeze_start_up_heap

    freeze_start_up_heap()
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
    await front.close()
    await halo.close()
    _disarm(deadline)
    print("halo: stopped", flush=True)


def _disarm(deadline: list[threading.Timer]) -> None:
    """Stopped in time: the hard exit is not needed."""
    for timer in deadline:
        timer.cancel()
