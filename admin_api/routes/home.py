"""Home events for a parent: what the house last said (per entity and as a log), and each
home rule with when it last fired and why it did or did not."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import Field

from admin_api.base import household_desk, lines_param
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import BAD_LINES, LINES, Reply, Route


class EntityState(ApiModel):
    source: str
    entity: str
    topic: str
    state: Any = Field(description="what the house last said, as JSON when it was JSON")
    updatedAt: Timestamp


class HomeObservation(ApiModel):
    at: Timestamp
    source: str
    entity: str
    topic: str
    state: Any
    eventId: str | None
    retained: bool = Field(description="the broker's retained message, replayed on connecting")


class HomeObservations(ApiModel):
    states: list[EntityState]
    observations: list[HomeObservation] = Field(description="newest first")


class HomeRules(ApiModel):
    rules: list[dict[str, Any]] = Field(description="each rule as halo.yaml has it, with its last firing and outcome")
    queued: int = Field(description="messages waiting out quiet hours")


def _state(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


async def home_observations(request: web.Request) -> web.Response:
    home = household_desk(request).home
    if home is None:
        return reply(HomeObservations(states=[], observations=[]))
    recent = await home.store.recent(lines_param(request))
    states = await home.store.states()
    return reply(
        HomeObservations(
            states=[
                EntityState(
                    source=s["source"],
                    entity=s["entity"],
                    topic=s["topic"],
                    state=_state(s["state"]),
                    updatedAt=_when(s["updated_at"]),
                )
                for s in states
            ],
            observations=[
                HomeObservation(
                    at=_when(o["at"]),
                    source=o["source"],
                    entity=o["entity"],
                    topic=o["topic"],
                    state=_state(o["state"]),
                    eventId=o["event_id"],
                    retained=bool(o["retained"]),
                )
                for o in recent
            ],
        )
    )


async def home_rules(request: web.Request) -> web.Response:
    home = household_desk(request).home
    rules = home.rules_report() if home is not None else []
    pending = await home.store.pending() if home is not None else 0
    return reply(HomeRules(rules=rules, queued=pending))


ROUTES = [
    Route(
        "GET",
        "/home/observations",
        home_observations,
        "token",
        summary="What the house last reported: each entity's current state, and the newest observations",
        responses={200: Reply("states by entity; observations newest first", HomeObservations), 400: BAD_LINES},
        parameters=[LINES],
        tag="home",
    ),
    Route(
        "GET",
        "/home/rules",
        home_rules,
        "token",
        summary="The home rules, each with when it last fired and what became of its last event",
        responses={200: Reply("in halo.yaml order", HomeRules)},
        tag="home",
    ),
]
