"""The aiohttp server: admin API, dashboard and the web chat, built by one factory."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from admin_api.family import FamilyRoutes
from halo.access import bearer_token, peer_is_loopback, token_matches
from halo.app import VERSION, Halo

log = logging.getLogger(__name__)

HALO = web.AppKey("halo", Halo)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_admin(request: web.Request) -> bool:
    """Loopback peers, or the admin token in constant time."""
    if peer_is_loopback(request):
        return True
    token = request.app[HALO].settings.admin.token
    return token_matches(bearer_token(request), token.get_secret_value() if token else None)


def json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error is JSON {"error": …}; no traceback ever reaches a client."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.content_type == "application/json" or exc.status < 400:
            raise
        return json_error(exc.status, exc.reason)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json_error(500, "internal error (see the server log)")


def token_required(handler: Handler) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        if not is_admin(request):
            return json_error(401, "admin token required: Authorization: Bearer <admin.token>")
        return await handler(request)

    return guarded


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def status(request: web.Request) -> web.Response:
    halo = request.app[HALO]
    settings = halo.settings
    paths = settings.paths
    return web.json_response(
        {
            "ok": True,
            "version": VERSION,
            "uptime_seconds": round(time.time() - halo.started_at, 1),
            "halo_home": {
                "home": str(paths.home),
                "config": str(paths.config_file),
                "transcripts": str(paths.transcripts),
                "sessions_db": str(paths.sessions_db),
                "memory": str(paths.scopes),
                "events_log": str(paths.events_log),
            },
            "provider": {
                "name": settings.llm.provider,
                "model": settings.llm.model if settings.llm.provider != "none" else None,
                "base_url": settings.llm.base_url,
            },
            "adapters": halo.adapter_status(),
            "config": settings.redacted(),
        }
    )


def create_app(halo: Halo) -> web.Application:
    app = web.Application(middlewares=[errors_as_json], client_max_size=1024**2)
    app[HALO] = halo
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/status", token_required(status))
    FamilyRoutes(halo).add_routes(app)
    for adapter in halo.adapters:
        add_routes = getattr(adapter, "add_routes", None)
        if add_routes is not None:
            add_routes(app)
    return app
