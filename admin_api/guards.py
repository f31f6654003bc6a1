"""Who may call what (docs/ARCHITECTURE.md, "Admin API"), decided here and nowhere else.

- "anyone": no credential (`/healthz`, `/openapi.json`, and `/login`, whose one-time token is
  its own credential);
- "token": a parent's credential from anywhere, loopback included — the admin token, a
  parent's own web_token, or the dashboard's session cookie (halo.web_auth);
- "loopback": the socket's peer is this machine *and* a parent's credential;
- "member": a member's own web_token, any role; the handler asks the policy what they see.

No credential is 401; a child's or colleague's token on an admin route is 403. "This
machine" is the socket's peer address (halo.access), never a forwarded-for header.
"""

from __future__ import annotations

from aiohttp import web

from admin_api.base import HALO, Handler, json_error
from halo.access import is_local_request
from halo.http_body import takes_body, wants_body
from halo.http_routes import Access
from halo.web_auth import Caller, caller_of

TOKEN_REQUIRED = (
    "a parent's credential is required: Authorization: Bearer <admin.token or your web_token>, "
    "or sign in with the link `halo dashboard` prints"
)
NOT_A_PARENT = "this is for parents: a child's or colleague's token never opens an admin route"
LOOPBACK_ONLY = "only from the machine halo runs on (loopback), with a parent's credential"
CALLER = web.RequestKey("caller", Caller)


def is_local(request: web.Request) -> bool:
    return is_local_request(request)


def caller(request: web.Request) -> Caller | None:
    """The request's checked credential (cached on the request)."""
    if CALLER in request:
        return request[CALLER]
    settings = request.app[HALO].settings
    token = settings.admin.token.get_secret_value() if settings.admin.token else None
    found = caller_of(request, request.app[HALO].family, token)
    if found is not None:
        request[CALLER] = found
    return found


def is_admin(request: web.Request) -> bool:
    """A parent's credential: the admin token, the dashboard cookie or a parent's web_token."""
    found = caller(request)
    return found is not None and found.is_parent_credential


def unauthorized() -> web.Response:
    response = json_error(401, TOKEN_REQUIRED)
    response.headers["WWW-Authenticate"] = 'Bearer realm="halo admin"'
    return response


def guard(access: Access, handler: Handler, on_unauthorized: Handler | None = None) -> Handler:
    """Wrap `handler` so it runs only for callers `access` admits; `on_unauthorized` may answer
    a caller with no credential differently (the dashboard's sign-in page)."""
    if access in ("anyone", "member"):
        return handler

    async def guarded(request: web.Request) -> web.StreamResponse:
        if access == "loopback" and not is_local(request):
            return json_error(403, LOOPBACK_ONLY)
        found = caller(request)
        if found is None:
            return await on_unauthorized(request) if on_unauthorized else unauthorized()
        if not found.is_parent_credential:
            return json_error(403, NOT_A_PARENT)
        return await handler(request)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    guarded.__doc__ = handler.__doc__
    return takes_body(guarded) if wants_body(handler) else guarded


def token_required(handler: Handler) -> Handler:
    """For routes other modules add (kept from the first admin server)."""
    return guard("token", handler)


def actor(request: web.Request) -> str:
    """Who did it, for the audit log: which credential, and from where when not this machine."""
    found = caller(request)
    who = found.name if found is not None else "anonymous"
    if is_local(request):
        return who
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"{who}@{peer[0]}" if peer else who
