"""The aiohttp server: admin API, dashboard and the adapters' pages, built by one factory.

Tests call `create_app` with their own Halo; `halo serve` (halo/runtime/serve.py) runs the
same app, behind its start-up front door (admin_api/starting.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aiohttp import web

from admin_api.base import HALO, OPENAPI, errors_as_json, json_error, no_store, no_unwanted_body
from admin_api.cluster_front import forward_to_active
from admin_api.guards import guard, is_admin, token_required
from admin_api.needs import AdminHalo
from admin_api.openapi import build_spec
from admin_api.routes import admin_routes
from admin_api.starting import CLIENT_MAX_SIZE
from halo.http_body import takes_body, wants_body
from halo.http_routes import Handler
from halo.port import AdminRoutes
from halo.web_auth import SESSION_COOKIE, WEB_AUTH, DashboardLogin

__all__ = ["HALO", "create_app", "is_admin", "json_error", "token_required"]


@web.middleware
async def stored_sessions(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A session cookie's row is read from halo.db before any credential check (they are sync)."""
    await request.app[WEB_AUTH].check(request.cookies.get(SESSION_COOKIE))
    return await handler(request)


def create_app(halo: AdminHalo) -> web.Application:
    app = web.Application(
        middlewares=[forward_to_active, no_store, errors_as_json, no_unwanted_body, stored_sessions],
        client_max_size=CLIENT_MAX_SIZE,
    )
    app[HALO] = halo
    app[WEB_AUTH] = DashboardLogin(halo.paths.logins, halo.db)
    adapter_routes = [route for a in halo.adapters if isinstance(a, AdminRoutes) for route in a.routes()]
    for route in [*admin_routes(), *adapter_routes]:
        handler = guard(route.access, route.handler, route.on_unauthorized)
        app.router.add_route(
            route.method,
            route.path,
            takes_body(handler) if route.body is not None and not wants_body(handler) else handler,
        )
    # built on the first GET /openapi.json, not at every start (~30 ms of schema generation)
    spec: Callable[[], dict[str, Any]] = functools.cache(functools.partial(build_spec, tuple(adapter_routes)))
    app[OPENAPI] = spec
    return app
