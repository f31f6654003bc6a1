"""The dashboard's sign-in: a one-time login link (`halo serve` and `halo dashboard` print it)
is exchanged for a session cookie, HttpOnly and SameSite=Strict, then the browser goes to `/`."""

from __future__ import annotations

from aiohttp import web

from admin_api.base import ApiError
from admin_api.models import ApiModel, reply
from admin_api.routes import Reply, Route, param
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
    Route(
        "GET",
        "/login",
        login,
        "anyone",
        summary="Sign in to the dashboard with a one-time login link",
        description="`halo serve` prints the link at start and `halo dashboard` prints a fresh one. The token "
        "works once, for 15 minutes; the cookie (HttpOnly, SameSite=Strict) lasts 12 hours or until halo "
        "restarts.",
        responses={
            303: Reply("signed in: the session cookie is set and the browser goes to /"),
            401: "The link was used already, has expired, or was never made",
        },
        parameters=[param("token", "query", {"type": "string"}, required=True)],
        tag="dashboard",
    ),
    Route(
        "POST",
        "/logout",
        logout,
        "anyone",
        summary="End this browser's dashboard session",
        responses={200: Reply("signed out", SignedOut)},
        tag="dashboard",
    ),
]
