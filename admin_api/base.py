"""What every admin handler shares: the app key, JSON errors, and parsing of common parameters.

Handlers raise ApiError for anything a client did wrong; the middleware turns it (and any
aiohttp HTTP error) into `{"error": …}` with the right status, and an unexpected exception
into a plain 500 — the traceback goes to the server log, never to a client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from admin_api.needs import AdminHalo, FamilyDesk, Front, HouseholdDesk, ScopeDesk, StatusSource
from halo.cluster.forward import unavailable
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError
from halo.family.scope_admin import parse_scope_id
from halo.http_body import BadBody, wants_body
from halo.http_routes import Handler
from halo.storage import Fenced
from halo.storage.db import unreachable

log = logging.getLogger(__name__)

HALO = web.AppKey("halo", AdminHalo)
OPENAPI: web.AppKey[Callable[[], dict[str, Any]]] = web.AppKey("openapi")  # built on the first ask

_DIGITS = re.compile(r"[0-9]{1,7}")
STORAGE_AWAY = "halo can't reach its storage right now: your message was not saved; send it again in a moment"
DEFAULT_LINES = 50
MAX_LINES = 1000


class ApiError(Exception):
    """A client-facing failure: becomes `{"error": message}` with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def scope_desk(request: web.Request) -> ScopeDesk:
    return request.app[HALO]


def family_desk(request: web.Request) -> FamilyDesk:
    return request.app[HALO]


def household_desk(request: web.Request) -> HouseholdDesk:
    return request.app[HALO]


def front(request: web.Request) -> Front:
    return request.app[HALO]


def status_source(request: web.Request) -> StatusSource:
    return request.app[HALO]


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error is JSON {"error": …}; no traceback ever reaches a client."""
    try:
        return await handler(request)
    except ApiError as exc:
        return json_error(exc.status, exc.message)
    except BadBody as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.content_type == "application/json" or exc.status < 400:
            raise
        response = json_error(exc.status, exc.reason)
        if "Allow" in exc.headers:  # 405 says which methods would do
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Fenced:
        log.warning(
            "%s %s: this process lost its family mid-request; nothing more was written", request.method, request.path
        )
        return unavailable("this process no longer serves the family; send it again in a moment")
    except Exception as exc:
        if unreachable(exc):
            log.warning("%s %s: PostgreSQL cannot be reached: %s", request.method, request.path, exc)
            return unavailable(STORAGE_AWAY)
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json_error(500, "internal error (see the server log)")


@web.middleware
async def no_unwanted_body(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A route that takes no body refuses one unread (issue 22, finding 3): nothing a client sends
    is read before a route that wants it, and its credential check, have run. aiohttp closes the
    connection after the answer rather than drain what was not read (admin_api.request_handler)."""
    if request.body_exists and request.match_info.http_exception is None and not wants_body(request.match_info.handler):
        return json_error(413, f"{request.method} {request.path} takes no request body")
    return await handler(request)


@web.middleware
async def no_store(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Admin answers describe a family: no cache, no sniffing, never framed by another site."""
    response = await handler(request)
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


def lines_param(request: web.Request, name: str = "lines") -> int:
    """`?lines=N`: 1 to MAX_LINES, DEFAULT_LINES when absent."""
    raw = request.query.get(name)
    if raw is None:
        return DEFAULT_LINES
    if not _DIGITS.fullmatch(raw):  # int() would take " 5", "+5", "1_0" and non-ASCII digits
        raise ApiError(400, f"{name} must be a whole number from 1 to {MAX_LINES}")
    value = int(raw)
    if not 1 <= value <= MAX_LINES:
        raise ApiError(400, f"{name} must be a whole number from 1 to {MAX_LINES}")
    return value


async def known_scope(request: web.Request, scope_id: str | None) -> Scope:
    """The scope a request names: 400 when the id cannot be a scope, 404 when halo has nothing of it."""
    if scope_id is None:
        raise ApiError(400, "scopeId is required, e.g. scopeId=telegram:123456")
    scopes = scope_desk(request).scope_admin
    try:
        scope = parse_scope_id(scopes.family(), scope_id)
    except UnknownScopeError as exc:
        raise ApiError(400, str(exc)) from None
    if scope.id not in await scopes.known_scope_ids():
        raise ApiError(404, f"no scope {scope.id!r}: halo has no session, transcript or memory for it")
    return scope


async def path_scope(request: web.Request) -> Scope:
    return await known_scope(request, request.match_info["scopeId"])


async def query_scope(request: web.Request) -> Scope:
    return await known_scope(request, request.query.get("scopeId"))
