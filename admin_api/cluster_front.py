"""Any process answers (several processes on PostgreSQL): a request that reaches a standby is
passed on to the active process, before routing or any credential check, which the active
one makes itself. The health routes and `/status` are answered by every process about itself."""

from __future__ import annotations

from aiohttp import web

from admin_api.base import front
from halo.cluster.forward import FORWARDED, unavailable
from halo.http_routes import Handler

ANSWERED_HERE = frozenset({"/livez", "/readyz", "/active", "/healthz", "/status", "/openapi.json"})
NO_ACTIVE = "no halo process serves this family right now (one takes over within seconds); try again"


@web.middleware
async def forward_to_active(request: web.Request, handler: Handler) -> web.StreamResponse:
    halo = front(request)
    cluster, forwarder = halo.cluster, halo.forwarder
    if cluster is None or not cluster.started or forwarder is None or cluster.active or request.path in ANSWERED_HERE:
        return await handler(request)
    if cluster.problem is not None:
        return unavailable(f"{cluster.problem}; your message was not saved")
    address = cluster.active_address()
    if address is None or FORWARDED in request.headers:  # never passed on twice
        return unavailable(NO_ACTIVE)
    return await forwarder.forward(request, address, lambda: cluster.active_address() == address)
