"""Is halo up, and how is it: `/healthz` for anyone, `/status` for the admin."""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from admin_api.base import halo_of
from admin_api.models import ApiModel, reply
from admin_api.routes import Reply, Route
from admin_api.status import Status, status_snapshot


class Health(ApiModel):
    ok: Literal[True] = True


async def healthz(request: web.Request) -> web.Response:
    return reply(Health())


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
