"""Scopes and their sessions: list, clear, distill now, purge (ARCHITECTURE §7)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from admin_api.base import ApiError, halo_of, path_scope
from admin_api.guards import actor
from admin_api.routes import Route
from memory.distill import DistillResult
from memory.service import DistillationDisabled


async def sessions(request: web.Request) -> web.Response:
    """Every scope with a stored session or a transcript, as scope id strings."""
    return web.json_response(await halo_of(request).scope_admin.active_scope_ids())


async def sessions_with_counts(request: web.Request) -> web.Response:
    services = halo_of(request).services
    counts = await services.sessions.item_counts()
    ids = await halo_of(request).scope_admin.active_scope_ids()
    return web.json_response([{"scopeId": scope_id, "itemCount": counts.get(scope_id, 0)} for scope_id in ids])


async def scopes(request: web.Request) -> web.Response:
    """Configured and active scopes with counts and last activity: the dashboard's list."""
    summaries = await halo_of(request).scope_admin.scope_summaries()
    return web.json_response(
        [
            {
                "scopeId": s.scope.id,
                "type": s.scope.type,
                "ownerId": s.scope.owner_id,
                "configured": s.configured,
                "itemCount": s.item_count,
                "transcriptLines": s.transcript_lines,
                "lastActivity": s.last_activity.isoformat() if s.last_activity else None,
                "hasMemory": s.has_memory,
            }
            for s in summaries
        ]
    )


async def clear(request: web.Request) -> web.Response:
    """Forget the derived session (what the model sees); the transcript stays."""
    scope = await path_scope(request)
    halo = halo_of(request)
    async with halo.gateway.scope_lock(scope.id):
        removed = await halo.scope_admin.clear_session(scope.id, actor=actor(request))
    return web.json_response({"scopeId": scope.id, "cleared": True, "itemsRemoved": removed})


def distill_json(result: DistillResult) -> dict[str, Any]:
    """What one run did: the transcript bytes it read and what it changed in memory."""
    return {
        "fromOffset": result.from_offset,
        "toOffset": result.to_offset,
        "items": result.items,
        "factsAdded": result.facts_added,
        "factsSuperseded": result.facts_superseded,
        "factsForgotten": result.facts_forgotten,
        "notesAdded": result.notes_added,
        "skipped": result.skipped,
    }


async def distill(request: web.Request) -> web.Response:
    """Distil the scope's new transcript into its memory now (waits for a run in progress)."""
    scope = await path_scope(request)
    services = halo_of(request).services
    try:
        result = await services.memory.distill(scope.id)
    except DistillationDisabled as exc:
        raise ApiError(409, str(exc)) from None
    services.audit.write("admin_distill", scope_id=scope.id, actor=actor(request), items=result.items)
    return web.json_response({"scopeId": scope.id, "distilled": True, "result": distill_json(result)})


async def purge(request: web.Request) -> web.Response:
    """Delete everything of one scope. Loopback only, and `confirm` must repeat the scope id."""
    raw_id = request.match_info["scopeId"]
    confirm = request.query.get("confirm")
    if confirm is None:
        raise ApiError(400, f"purge deletes the transcript for good: add ?confirm={raw_id} to confirm")
    if confirm != raw_id:
        raise ApiError(400, "confirm must equal the scope id exactly; nothing was deleted")
    scope = await path_scope(request)
    halo = halo_of(request)
    async with halo.gateway.scope_lock(scope.id):
        result = await halo.scope_admin.purge_scope(scope.id, actor=actor(request))
    return web.json_response(
        {
            "scopeId": scope.id,
            "purged": {"sessionItems": result.session_items, "transcript": result.transcript, "memory": result.memory},
        }
    )


ROUTES = [
    Route("GET", "/sessions", sessions, "token"),
    Route("GET", "/sessions-with-counts", sessions_with_counts, "token"),
    Route("GET", "/scopes", scopes, "token"),
    Route("POST", "/sessions/{scopeId}/clear", clear, "token"),
    Route("POST", "/sessions/{scopeId}/distill", distill, "token"),
    Route("POST", "/sessions/{scopeId}/purge", purge, "loopback"),
]
