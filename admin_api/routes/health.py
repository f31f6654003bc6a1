"""Is halo up, and how is it: `/healthz` for anyone, `/status` for the admin.

Several processes on PostgreSQL (as HA setups ask: Kubernetes' probes, Patroni's `/primary`):
`/livez` says the process runs (restart it when this fails), `/readyz` that it is built and
reaches its database (send it traffic), `/active` that it is the family's active process (a
load balancer may prefer it; a standby forwards to it anyway). Each answers from memory but
`/readyz`, which asks the database."""

from __future__ import annotations

from typing import Literal

from aiohttp import web
from pydantic import Field

from admin_api.base import front, status_source
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
    return reply(Health(home=home_fingerprint(front(request).paths.home)))


class Probe(ApiModel):
    ok: bool
    role: Literal["active", "standby", "alone"] = Field(description="alone: the embedded store, one process")
    problem: str | None = Field(default=None, description="what keeps it from serving, said plainly")


def _role(request: web.Request) -> Literal["active", "standby", "alone"]:
    cluster = front(request).cluster
    return "alone" if cluster is None or not cluster.started else cluster.role


async def livez(request: web.Request) -> web.Response:
    cluster = front(request).cluster
    return reply(Probe(ok=True, role=_role(request), problem=None if cluster is None else cluster.problem))


async def readyz(request: web.Request) -> web.Response:
    halo = front(request)
    try:
        await halo.db.ping()
    except Exception as exc:
        problem = f"halo cannot reach its storage ({halo.db.backend}): {type(exc).__name__}"
        return reply(Probe(ok=False, role=_role(request), problem=problem), status=503)
    return reply(Probe(ok=True, role=_role(request)))


async def active(request: web.Request) -> web.Response:
    role = _role(request)
    if role == "standby":
        return reply(Probe(ok=False, role=role, problem="a standby: another process serves the family"), status=503)
    return reply(Probe(ok=True, role=role))


async def status(request: web.Request) -> web.Response:
    return reply(Status.model_validate(await status_snapshot(status_source(request))))


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
        "/livez",
        livez,
        "anyone",
        summary="Does the process run? (restart it when not)",
        responses={200: Reply("it runs; `problem` says what keeps it from serving", Probe)},
        tag="health",
    ),
    Route(
        "GET",
        "/readyz",
        readyz,
        "anyone",
        summary="Is it built and does it reach its database? (send it traffic when so)",
        responses={200: Reply("ready", Probe), 503: Reply("not ready, and why", Probe)},
        tag="health",
    ),
    Route(
        "GET",
        "/active",
        active,
        "anyone",
        summary="Is this the family's active process? (200 on it only; a standby forwards to it)",
        responses={200: Reply("the active process (or the only one)", Probe), 503: Reply("a standby", Probe)},
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
