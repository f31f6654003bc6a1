"""Scopes and their sessions: list, clear, distill now, purge (docs/ARCHITECTURE.md, "Admin API")."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, path_scope, scope_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Count, Timestamp, reply
from admin_api.routes import BAD_SCOPE, NO_SCOPE, SCOPE_PATH, Reply, Route, param
from halo.core.envelope import ScopeType
from memory.distill import DistillResult
from memory.service import DistillationDisabled


class SessionCount(ApiModel):
    scopeId: str
    itemCount: Count


class ScopeSummary(ApiModel):
    scopeId: str
    type: ScopeType
    ownerId: str | None
    configured: bool = Field(description="named by halo.yaml")
    itemCount: Count
    transcriptLines: Count
    lastActivity: Timestamp | None
    hasMemory: bool


class Cleared(ApiModel):
    scopeId: str
    cleared: bool
    itemsRemoved: Count


class DistillRun(ApiModel):
    """What one run read and what it changed in memory."""

    fromOffset: Count = Field(description="transcript byte offset")
    toOffset: Count = Field(description="the new watermark")
    items: Count = Field(description="transcript lines read")
    factsAdded: Count
    factsSuperseded: Count
    factsForgotten: Count
    notesAdded: Count
    skipped: Count = Field(description="lines the policy did not let into memory")

    @classmethod
    def of(cls, result: DistillResult) -> DistillRun:
        return cls(
            fromOffset=result.from_offset,
            toOffset=result.to_offset,
            items=result.items,
            factsAdded=result.facts_added,
            factsSuperseded=result.facts_superseded,
            factsForgotten=result.facts_forgotten,
            notesAdded=result.notes_added,
            skipped=result.skipped,
        )


class Distilled(ApiModel):
    scopeId: str
    distilled: bool
    result: DistillRun


class PurgedParts(ApiModel):
    sessionItems: Count
    transcript: bool = Field(description="a transcript existed and was deleted")
    memory: bool = Field(description="a memory folder (and index) existed and was deleted")


class Purged(ApiModel):
    scopeId: str
    purged: PurgedParts


async def sessions(request: web.Request) -> web.Response:
    """Every scope with a stored session or a transcript, as scope id strings."""
    return web.json_response(await scope_desk(request).scope_admin.active_scope_ids())


async def sessions_with_counts(request: web.Request) -> web.Response:
    services = scope_desk(request)
    counts = await services.sessions.item_counts()
    ids = await scope_desk(request).scope_admin.active_scope_ids()
    return reply([SessionCount(scopeId=scope_id, itemCount=counts.get(scope_id, 0)) for scope_id in ids])


async def scopes(request: web.Request) -> web.Response:
    """Configured and active scopes with counts and last activity: the dashboard's list."""
    summaries = await scope_desk(request).scope_admin.scope_summaries()
    return reply(
        [
            ScopeSummary(
                scopeId=s.scope.id,
                type=s.scope.type,
                ownerId=s.scope.owner_id,
                configured=s.configured,
                itemCount=s.item_count,
                transcriptLines=s.transcript_lines,
                lastActivity=s.last_activity.isoformat() if s.last_activity else None,
                hasMemory=s.has_memory,
            )
            for s in summaries
        ]
    )


async def clear(request: web.Request) -> web.Response:
    """Forget the derived session (what the model sees); the transcript stays."""
    scope = await path_scope(request)
    halo = scope_desk(request)
    async with halo.scope_locks.of(scope.id):
        removed = await halo.scope_admin.clear_session(scope.id, actor=actor(request))
    if removed is None:
        raise ApiError(404, f"no session for {scope.id!r}: nothing has been said there, so nothing to clear")
    return reply(Cleared(scopeId=scope.id, cleared=True, itemsRemoved=removed))


async def distill(request: web.Request) -> web.Response:
    """Distil the scope's new transcript into its memory now (waits for a run in progress)."""
    scope = await path_scope(request)
    services = scope_desk(request)
    await services.take_scope(scope.id)  # PostgreSQL: distil onto the scope's current memory
    try:
        result = await services.memory.distill(scope.id)
    except DistillationDisabled as exc:
        raise ApiError(409, str(exc)) from None
    await services.memory_durable()  # acknowledged only once the store of record has it
    services.audit.write("admin_distill", scope_id=scope.id, actor=actor(request), items=result.items)
    return reply(Distilled(scopeId=scope.id, distilled=True, result=DistillRun.of(result)))


async def purge(request: web.Request) -> web.Response:
    """Delete everything of one scope. Loopback only, and `confirm` must repeat the scope id."""
    raw_id = request.match_info["scopeId"]
    confirm = request.query.get("confirm")
    if confirm is None:
        raise ApiError(400, f"purge deletes the transcript for good: add ?confirm={raw_id} to confirm")
    if confirm != raw_id:
        raise ApiError(400, "confirm must equal the scope id exactly; nothing was deleted")
    scope = await path_scope(request)
    halo = scope_desk(request)
    async with halo.scope_locks.of(scope.id):
        result = await halo.scope_admin.purge_scope(scope.id, actor=actor(request))
        await halo.memory_durable()  # PostgreSQL: the scope's rows are gone before the answer
    parts = PurgedParts(sessionItems=result.session_items, transcript=result.transcript, memory=result.memory)
    return reply(Purged(scopeId=scope.id, purged=parts))


CONFIRM = param(
    "confirm", "query", {"type": "string"}, "the scope id again, to confirm", required=True, example="web:mom"
)

ROUTES = [
    Route(
        "GET",
        "/sessions",
        sessions,
        "token",
        summary="Scopes with a stored session or a transcript",
        responses={200: Reply("scope ids", list[str])},
        tag="scopes",
    ),
    Route(
        "GET",
        "/sessions-with-counts",
        sessions_with_counts,
        "token",
        summary="The same scopes with the number of items in each session",
        responses={200: Reply("scope ids and item counts", list[SessionCount])},
        tag="scopes",
    ),
    Route(
        "GET",
        "/scopes",
        scopes,
        "token",
        summary="Configured and active scopes with item counts, transcript size and last activity",
        responses={200: Reply("one entry a scope", list[ScopeSummary])},
        tag="scopes",
    ),
    Route(
        "POST",
        "/sessions/{scopeId}/clear",
        clear,
        "token",
        summary="Clear the derived session state; the transcript is kept",
        responses={200: Reply("cleared", Cleared), 400: BAD_SCOPE, 404: f"{NO_SCOPE}; or it has no transcript yet"},
        parameters=[SCOPE_PATH],
        tag="scopes",
    ),
    Route(
        "POST",
        "/sessions/{scopeId}/distill",
        distill,
        "token",
        summary="Run memory distillation for the scope now",
        description="Waits for a run in progress, then reads the transcript from the watermark on. Audited.",
        responses={
            200: Reply("distilled", Distilled),
            400: BAD_SCOPE,
            404: NO_SCOPE,
            409: "Distillation is disabled (memory.distillation_enabled: false)",
        },
        parameters=[SCOPE_PATH],
        tag="scopes",
    ),
    Route(
        "POST",
        "/sessions/{scopeId}/purge",
        purge,
        "loopback",
        summary="Delete the scope's session, transcript, memory folder and index, for good",
        description="Audited. `confirm` must repeat the scope id exactly.",
        responses={
            200: Reply("what was deleted", Purged),
            400: "confirm is missing or differs from the scope id, or the scope id is malformed",
            404: NO_SCOPE,
        },
        parameters=[SCOPE_PATH, CONFIRM],
        tag="scopes",
    ),
]
