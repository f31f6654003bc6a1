"""What happened: the audit log (whole tail from this machine, per scope with the token) and
a scope's transcript tail (this machine only)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from admin_api.base import lines_param, query_scope, scope_desk
from admin_api.guards import actor
from admin_api.models import OpenModel, TranscriptLine, reply
from admin_api.routes import BAD_LINES, LINES, NO_SCOPE, SCOPE_QUERY, Reply, Route

_SCOPE_KEYS = ("scope_id", "resource", "from_scope")


class Event(OpenModel):
    """One audit log line; further keys depend on the kind."""

    ts: str
    kind: str


def _events(lines: list[dict[str, Any]]) -> list[Event]:
    """The log's lines as events; one without a time or a kind was not written by halo's audit."""
    events = []
    for line in lines:
        try:
            events.append(Event.model_validate(line))
        except ValidationError:
            continue
    return events


async def events_tail(request: web.Request) -> web.Response:
    lines = lines_param(request)
    audit = scope_desk(request).audit
    return reply(_events(await audit.tail(lines)))  # every process's, on PostgreSQL


async def scope_events(request: web.Request) -> web.Response:
    """Audit events about one scope: where it happened, or what a decision was about."""
    lines = lines_param(request)
    scope = await query_scope(request)
    audit = scope_desk(request).audit

    def about(event: dict[str, Any]) -> bool:
        return any(event.get(key) == scope.id for key in _SCOPE_KEYS)

    return reply(_events(await audit.tail(lines, match=about)))


async def transcripts_tail(request: web.Request) -> web.Response:
    lines = lines_param(request)
    scope = await query_scope(request)
    store = scope_desk(request).transcripts
    await store.ready(scope.id)  # PostgreSQL: the scope's lines held here, not an empty page
    tail = await asyncio.to_thread(store.tail, scope.id, lines)
    scope_desk(request).audit.write("admin_read_transcript", scope_id=scope.id, actor=actor(request), lines=len(tail))
    return reply([TranscriptLine.model_validate(line.to_dict()) for line in tail])


ROUTES = [
    Route(
        "GET",
        "/events",
        scope_events,
        "token",
        summary="Audit events about one scope (where it happened, or what a decision was about)",
        responses={200: Reply("oldest first", list[Event]), 400: BAD_LINES, 404: NO_SCOPE},
        parameters=[SCOPE_QUERY, LINES],
        tag="events",
    ),
    Route(
        "GET",
        "/events/tail",
        events_tail,
        "loopback",
        summary="The newest audit events",
        responses={200: Reply("oldest first", list[Event]), 400: BAD_LINES},
        parameters=[LINES],
        tag="events",
    ),
    Route(
        "GET",
        "/transcripts/tail",
        transcripts_tail,
        "loopback",
        summary="The newest lines of one scope's transcript (audited)",
        responses={200: Reply("oldest first", list[TranscriptLine]), 400: BAD_LINES, 404: NO_SCOPE},
        parameters=[SCOPE_QUERY, LINES],
        tag="events",
    ),
]
