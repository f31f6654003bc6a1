"""Apply halo.yaml now (`halo reload`): the same reload the file watcher and SIGHUP do."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, household_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, reply
from admin_api.routes import Reply, Route


class Reloaded(ApiModel):
    applied: bool
    restartNeeded: list[str] = Field(description="keys changed that take effect only after a restart")


async def reload_config(request: web.Request) -> web.Response:
    """Read, validate and apply halo.yaml; an invalid file is refused and changes nothing."""
    halo = household_desk(request)
    applied = await halo.config.reload("api")
    halo.audit.write("config_reload", applied=applied, actor=actor(request))
    if not applied:
        raise ApiError(422, f"the running config is kept: {halo.config.error}")
    return reply(Reloaded(applied=True, restartNeeded=halo.config.restart_needed))


ROUTES = [
    Route(
        "POST",
        "/reload",
        reload_config,
        "token",
        summary="Apply halo.yaml now, as a save does within seconds",
        description="Members, the groups, work channels, safety settings and the `home:` section apply live; "
        "`restartNeeded` names changed keys that wait for a restart (llm, telegram, discord, mqtt, admin, "
        "memory, sessions, backups, tools, work.digest, an age profile's model).",
        responses={
            200: Reply("applied", Reloaded),
            422: "halo.yaml is invalid (the error names the key); the running config is kept",
        },
        tag="health",
    ),
]
