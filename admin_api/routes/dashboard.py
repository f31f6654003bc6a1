"""The dashboard page at `/` and the OpenAPI document it (and every client) can read.

The page is one static file with its script and style inline; a Content-Security-Policy
allows exactly those (by hash) and requests to this server only, so text from a
transcript or a memory file can never run as code in a parent's browser.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from importlib import resources
from typing import Any

from aiohttp import web

from admin_api.base import OPENAPI
from admin_api.guards import unauthorized
from admin_api.models import Error
from admin_api.routes import Reply, Route

_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)


@functools.cache
def page() -> tuple[str, str]:
    """The dashboard HTML and the CSP that admits exactly its inline script and style."""
    html = resources.files("admin_api").joinpath("dashboard.html").read_text(encoding="utf-8")
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for kind, body in _INLINE.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        hashes[kind].append(f"'sha256-{digest}'")
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(hashes['script'])}",
            f"style-src {' '.join(hashes['style'])}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return html, csp


def _page_response(status: int) -> web.Response:
    html, csp = page()
    return web.Response(text=html, status=status, content_type="text/html", headers={"Content-Security-Policy": csp})


async def dashboard(request: web.Request) -> web.Response:
    return _page_response(200)


async def sign_in(request: web.Request) -> web.StreamResponse:
    """A refused browser gets the page without data (it asks for the token); anything else JSON."""
    if "text/html" in request.headers.get("Accept", ""):
        response = _page_response(401)
        response.headers["WWW-Authenticate"] = 'Bearer realm="halo admin"'
        return response
    return unauthorized()


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI]())


ROUTES = [
    Route(
        "GET",
        "/",
        dashboard,
        "token",
        summary="The dashboard",
        responses={
            200: Reply("the dashboard page", html=True),
            401: Reply(
                "Not from this machine and no valid admin token: a browser (Accept: text/html) gets the sign-in "
                "page, which holds no data; anything else the JSON error",
                Error,
                html=True,
            ),
        },
        tag="dashboard",
        on_unauthorized=sign_in,
    ),
    Route(
        "GET",
        "/openapi.json",
        openapi,
        "anyone",
        summary="This document",
        responses={200: Reply("OpenAPI 3.1", dict[str, Any])},
        tag="dashboard",
    ),
]
