"""Who may call what (ARCHITECTURE §7): anyone, token (this machine or the admin token), or
loopback only (this machine, token or not).

"This machine" is the socket's peer address (halo.access), never a forwarded-for header.
"""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from admin_api.base import HALO, Handler, json_error
from halo.access import bearer_token, is_local_request, token_matches

# "member": a family member's own web_token (or this machine as the local owner); the handler
# finds the member and the policy decides what they may see (admin_api/routes/family.py).
Access = Literal["anyone", "token", "loopback", "member"]

TOKEN_REQUIRED = "admin token required: send Authorization: Bearer <admin.token>"
LOOPBACK_ONLY = "only from the machine halo runs on (loopback), token or not"


def is_local(request: web.Request) -> bool:
    return is_local_request(request)


def has_admin_token(request: web.Request) -> bool:
    token = request.app[HALO].settings.admin.token
    return token_matches(bearer_token(request), token.get_secret_value() if token else None)


def is_admin(request: web.Request) -> bool:
    """Loopback peers, or the admin token in constant time."""
    return is_local(request) or has_admin_token(request)


def unauthorized() -> web.Response:
    response = json_error(401, TOKEN_REQUIRED)
    response.headers["WWW-Authenticate"] = 'Bearer realm="halo admin"'
    return response


def guard(access: Access, handler: Handler, on_unauthorized: Handler | None = None) -> Handler:
    """Wrap `handler` so it runs only for callers `access` admits; `on_unauthorized` may answer
    a refused token caller differently (the dashboard's sign-in page)."""
    if access in ("anyone", "member"):
        return handler

    async def guarded(request: web.Request) -> web.StreamResponse:
        if access == "loopback":
            if not is_local(request):
                return json_error(403, LOOPBACK_ONLY)
        elif not is_admin(request):
            return await on_unauthorized(request) if on_unauthorized else unauthorized()
        return await handler(request)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    guarded.__doc__ = handler.__doc__
    return guarded


def token_required(handler: Handler) -> Handler:
    """For routes other modules add (kept from the first admin server)."""
    return guard("token", handler)


def actor(request: web.Request) -> str:
    """Who did it, for the audit log: how the admin got in (never the token itself)."""
    if is_local(request):
        return "admin:local"
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"admin:token@{peer[0]}" if peer else "admin:token"
