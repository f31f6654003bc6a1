"""The dashboard's sign-in: a one-time login link (`halo serve` and `halo dashboard` print it)
is exchanged for a session cookie, HttpOnly and SameSite=Strict, then the browser goes to `/`.

The session is stored in halo.db (halo/web_auth.py): it outlives a restart, expires after
SESSION_SECONDS and ends when the browser signs out. A link that was used or has expired is
opened in a browser, so it gets a page that says what to do, not JSON.
"""

from __future__ import annotations

import html
from typing import Annotated

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, family_desk
from admin_api.models import ApiModel, reply
from admin_api.routes import Reply, Route, param
from halo.http_body import read_json
from halo.web_auth import SESSION_COOKIE, SESSION_SECONDS, WEB_AUTH

NEW_LINK = "uv run halo dashboard"
EXPIRED = f"this login link was used already or has expired: run `{NEW_LINK}` for a fresh one"
_EXPIRED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>halo · this link no longer works</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1f2328}}
code{{background:#f1f0ec;padding:.15rem .4rem;border-radius:6px}}h1{{font-size:1.3rem}}</style></head>
<body><h1>This login link no longer works</h1>
<p>A login link works once, for 15 minutes. This one was used already or has expired.</p>
<p>On the computer halo runs on, in halo's folder, run</p>
<p><code>{command}</code></p>
<p>and open the new link it prints. If you signed in with this link a moment ago,
<a href="/">the dashboard</a> is open to you already.</p>
</body></html>
"""
_PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


class SignedOut(ApiModel):
    signedOut: bool


class TokenSignIn(ApiModel):
    token: Annotated[str, Field(min_length=1, max_length=256, pattern=r"\S")]


class SignedIn(ApiModel):
    member: str
    name: str


def expired_page() -> web.Response:
    """What a browser shows for a used or expired link: what to do next, in words."""
    return web.Response(
        text=_EXPIRED_PAGE.format(command=html.escape(NEW_LINK)),
        status=401,
        content_type="text/html",
        headers={"Content-Security-Policy": _PAGE_CSP},
    )


async def login(request: web.Request) -> web.StreamResponse:
    """Redeem `?token=` once; the cookie it sets is the dashboard's credential."""
    session = await request.app[WEB_AUTH].redeem(request.query.get("token", ""))
    if session is None:
        return expired_page()
    signed_in = web.HTTPSeeOther("/")
    _with_cookie(signed_in, session)
    raise signed_in


def _with_cookie(response: web.StreamResponse, session: str) -> web.StreamResponse:
    response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="Strict")
    return response


async def sign_in_with_token(request: web.Request) -> web.Response:
    """The web chat's sign-in: a member's web_token, once, for a stored session cookie; the page
    then keeps no token (a script cannot read an HttpOnly cookie), and signing out ends it."""
    body = await read_json(request, '{"token": "your web_token"}')
    token = body.get("token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token.strip() or len(token) > 256:
        raise ApiError(400, 'the body is {"token": "your web_token"}')
    member = family_desk(request).family.by_web_token(token.strip())
    if member is None:
        raise ApiError(401, "that web token is not one halo knows")
    session = await request.app[WEB_AUTH].start_session(member.id)
    response = reply(SignedIn(member=member.id, name=member.name or member.id))
    _with_cookie(response, session)
    return response


async def logout(request: web.Request) -> web.Response:
    """End this browser's session (the family computer is shared): its row in halo.db goes."""
    await request.app[WEB_AUTH].end_session(request.cookies.get(SESSION_COOKIE))
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
        "works once, for 15 minutes; the cookie (HttpOnly, SameSite=Strict) lasts 14 days, across restarts, "
        "until the browser signs out.",
        responses={
            303: Reply("signed in: the session cookie is set and the browser goes to /"),
            401: Reply(
                "The link was used already, has expired, or was never made: a page that says to run "
                f"`{NEW_LINK}` for a fresh one",
                html=True,
            ),
        },
        parameters=[param("token", "query", {"type": "string"}, required=True)],
        tag="dashboard",
    ),
    Route(
        "POST",
        "/signin",
        sign_in_with_token,
        "anyone",
        summary="Sign a browser in with a member's web_token: a stored session cookie, as the login link's",
        description="The web chat's sign-in. The cookie (HttpOnly, SameSite=Strict) speaks for that member, "
        "lasts 14 days across restarts and ends when the browser signs out.",
        body=TokenSignIn,
        responses={
            200: Reply("signed in: the session cookie is set", SignedIn),
            400: "Not JSON, or no token",
            401: "The token is no member's web_token",
            413: "The body is too large",
            415: "The body is not declared application/json",
        },
        tag="web chat",
    ),
    Route(
        "POST",
        "/logout",
        logout,
        "anyone",
        summary="End this browser's session (dashboard and web chat), on every process",
        responses={200: Reply("signed out", SignedOut)},
        tag="dashboard",
    ),
]
