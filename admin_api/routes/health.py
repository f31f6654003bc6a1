"""Is halo up, and how is it: `/healthz` for anyone, `/status` for the admin."""

from __future__ import annotations

from typing import Literal

from aiohttp import web
from pydantic import Field

from admin_api.base import halo_of
from admin_api.models import ApiModel, reply
from admin_api.routes import Reply, Route
from admin_api.starting import home_fingerprint
from admin_api.status import Status, status_snapshot


class Health(ApiModel):
    ok: Literal[True] = True
    home: str = Field(description="a hash of the HALO_HOME served (not its path): `halo doctor` compares it")
    starting: bool = Field(
        default=False, description="true while halo is still loading; messages wait, then are answered"
    )


async def healthz(request: web.Request) -> web.Response:
    return reply(Health(home=home_fingerprint(halo_of(request).paths.home)))


async def status(request: web.Request) -> web.Response:
    return reply(Status.model_validate(await status_snapshot(halo_of(request))))


ROUTES = [
    Route(
        "GET",
        "/healthz",
        healthz,
        "anyone",
        summary="Is halo up?",
        responses={200: Reply("halo is up", Health)},
        tag="health",
    ),
    Route(
        "GET",
        "/status",
        status,
        "token",
        summary="Uptime, version, paths, config (secrets masked), adapters, provider, sync and queues",
        responses={200: Reply("the snapshot", Status)},
        tag="health",
    ),
]
