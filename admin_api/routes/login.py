"""The dashboard's sign-in: a one-time login link (`halo serve` and `halo dashboard` print it)
is exchanged for a session cookie, HttpOnly and SameSite=Strict, then the browser goes to `/`."""

from __future__ import annotations

from aiohttp import web

from admin_api.base import ApiError
from admin_api.models import ApiModel, reply
from admin_api.routes import Route
from halo.web_auth import SESSION_COOKIE, SESSION_SECONDS, WEB_AUTH

EXPIRED = "this login link was used already or has expired: run `halo dashboard` for a fresh one"


class SignedOut(ApiModel):
    signedOut: bool


async def login(request: web.Request) -> web.StreamResponse:
    """Redeem `?token=` once; the cookie it sets is the dashboard's credential."""
    session = request.app[WEB_AUTH].redeem(request.query.get("token", ""))
    if session is None:
        raise ApiError(401, EXPIRED)
    response = web.HTTPSeeOther("/")
    response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="Strict")
    raise response


async def logout(request: web.Request) -> web.Response:
    """End this browser's session (the family computer is shared)."""
    request.app[WEB_AUTH].end_session(request.cookies.get(SESSION_COOKIE))
    response = reply(SignedOut(signedOut=True))
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


ROUTES = [
    Route("GET", "/login", login, "anyone"),
    Route("POST", "/logout", logout, "anyone"),
]
