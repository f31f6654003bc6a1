"""The markdown memory as its store holds it (a file, or PostgreSQL's row): a scope's MEMORY.md,
a member's USER.md, SOUL.md. A parent reads and edits them here; on PostgreSQL, where no file is
kept, this is how a hand edit is made. Every read and edit is audited."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import ConfigDict, Field, ValidationError

from admin_api.base import ApiError, family_desk, path_scope, query_scope, scope_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import BAD_SCOPE, NO_SCOPE, SCOPE_PATH, SCOPE_QUERY, Reply, Route, param
from halo.http_body import read_json
from memory.service import MemoryService
from memory.store import SOUL, user_md

MAX_MEMORY_BYTES = 512 * 1024


class Memory(ApiModel):
    scopeId: str
    exists: bool
    text: str
    updatedAt: Timestamp | None
    truncated: bool = Field(description=f"the file is longer than the {MAX_MEMORY_BYTES} bytes sent")


class Edit(ApiModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description=f"the file's new text, whole (at most {MAX_MEMORY_BYTES} bytes)")


class MemoryFileText(ApiModel):
    path: str = Field(description="the file's path in HALO_HOME (on PostgreSQL, its row's)")
    exists: bool
    text: str


class GraphEntity(ApiModel):
    name: str
    summary: str


class GraphFact(ApiModel):
    fact: str
    source: str
    target: str
    validAt: str | None  # as the graph store has it (not always with a zone)
    invalidAt: str | None = Field(description="set: superseded")
    current: bool


class GraphMemory(ApiModel):
    scopeId: str
    enabled: bool
    reason: str | None = Field(description="why graph memory is off")
    entities: list[GraphEntity]
    facts: list[GraphFact] = Field(description="newest first")


def read_memory_file(memory: MemoryService, scope_id: str) -> dict[str, Any]:
    """MEMORY.md's text (at most MAX_MEMORY_BYTES of it) and when it last changed."""
    stamp = memory.memory_stamp(scope_id)
    text = memory.files.store.text(memory.files.memory_path(scope_id))
    if stamp is None or text is None:
        return {"exists": False, "text": "", "updatedAt": None, "truncated": False}
    data = text.encode("utf-8")
    truncated = len(data) > MAX_MEMORY_BYTES
    shown = data[:MAX_MEMORY_BYTES].decode("utf-8", "ignore")
    updated = datetime.fromtimestamp(stamp.mtime, UTC).isoformat()
    return {"exists": True, "text": shown, "updatedAt": updated, "truncated": truncated}


async def scope_memory(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    services = scope_desk(request)
    await services.take_scope(scope.id)  # PostgreSQL: this process's copy is current
    found = await asyncio.to_thread(read_memory_file, services.memory, scope.id)
    services.audit.write("admin_read_memory", scope_id=scope.id, actor=actor(request), exists=found["exists"])
    return reply(Memory(scopeId=scope.id, **found))


async def _new_text(request: web.Request) -> str:
    body = await read_json(request, '{"text": "# Memory\\n..."}')
    try:
        text = Edit.model_validate(body).text
    except ValidationError:
        raise ApiError(400, 'the body must be a JSON object like {"text": "the whole new text"}') from None
    if len(text.encode("utf-8")) > MAX_MEMORY_BYTES:
        raise ApiError(400, f"the text is longer than {MAX_MEMORY_BYTES} bytes; nothing was changed")
    return text


async def edit_scope_memory(request: web.Request) -> web.Response:
    """`PUT /scopes/{scopeId}/memory`: MEMORY.md replaced, as a parent's hand edit would."""
    scope = await path_scope(request)
    text = await _new_text(request)
    services = scope_desk(request)
    await services.take_scope(scope.id)
    await services.memory.replace_file(services.memory.files.memory_path(scope.id), text, scope_id=scope.id)
    await services.memory_durable()  # acknowledged only once the store of record has it
    services.audit.write("admin_edit_memory", scope_id=scope.id, actor=actor(request), chars=len(text))
    found = await asyncio.to_thread(read_memory_file, services.memory, scope.id)
    return reply(Memory(scopeId=scope.id, **found))


def _family_file(request: web.Request) -> str:
    """SOUL.md, or the USER.md of the member the path names (404 for anyone else)."""
    member_id = request.match_info.get("memberId")
    if member_id is None:
        return SOUL
    if family_desk(request).policy.family.member(member_id) is None:
        raise ApiError(404, f"no member {member_id!r} in halo.yaml")
    return user_md(member_id)


async def family_file(request: web.Request) -> web.Response:
    """`GET /soul`, `GET /members/{memberId}/profile`: the file as halo reads it into its context."""
    relative = _family_file(request)
    services = scope_desk(request)
    text = await services.memory.file_text(relative)
    services.audit.write("admin_read_memory", file=relative, actor=actor(request), exists=text is not None)
    return reply(MemoryFileText(path=relative, exists=text is not None, text=text or ""))


async def edit_family_file(request: web.Request) -> web.Response:
    """`PUT /soul`, `PUT /members/{memberId}/profile`: the file replaced whole."""
    relative = _family_file(request)
    text = await _new_text(request)
    services = scope_desk(request)
    await services.memory.replace_file(relative, text)
    await services.memory_durable()
    services.audit.write("admin_edit_memory", file=relative, actor=actor(request), chars=len(text))
    return reply(MemoryFileText(path=relative, exists=True, text=text))


async def scope_graph(request: web.Request) -> web.Response:
    """`GET /memory/graph?scopeId=…`: the scope's graph memory, entities and facts with when
    each held (`invalidAt` set: superseded). While graph memory is off: empty, with the reason."""
    scope = await query_scope(request)
    services = scope_desk(request)
    graph = services.graph
    if graph is None or not graph.enabled:
        reason = graph.reason if graph is not None else "not configured"
        return reply(GraphMemory(scopeId=scope.id, enabled=False, reason=reason, entities=[], facts=[]))
    entities, facts = await graph.contents(scope.id)
    services.audit.write("admin_read_graph", scope_id=scope.id, actor=actor(request), facts=len(facts))
    return reply(
        GraphMemory(
            scopeId=scope.id,
            enabled=True,
            reason=None,
            entities=[GraphEntity(name=e.name, summary=e.summary) for e in entities],
            facts=[GraphFact.model_validate(f.as_json()) for f in facts],
        )
    )


BAD_EDIT = f'The body is not {{"text": …}}, or the text is longer than {MAX_MEMORY_BYTES} bytes; nothing changed'
NOT_JSON = "The body is not declared application/json"
NO_MEMBER = "halo.yaml has no such member"
MEMBER_PATH = param("memberId", "path", {"type": "string"}, "a member id from halo.yaml", example="mom")

ROUTES = [
    Route(
        "GET",
        "/scopes/{scopeId}/memory",
        scope_memory,
        "token",
        summary="The scope's MEMORY.md as halo keeps it (audited)",
        responses={200: Reply("the file, or exists: false", Memory), 400: BAD_SCOPE, 404: NO_SCOPE},
        parameters=[SCOPE_PATH],
        tag="memory",
    ),
    Route(
        "PUT",
        "/scopes/{scopeId}/memory",
        edit_scope_memory,
        "token",
        summary="Replace the scope's MEMORY.md (a parent's edit; audited)",
        description="In the store of record when it answers; the scope's index is synced after.",
        responses={200: Reply("the file as it is now", Memory), 400: BAD_EDIT, 404: NO_SCOPE, 415: NOT_JSON},
        parameters=[SCOPE_PATH],
        body=Edit,
        tag="memory",
    ),
    Route(
        "GET",
        "/members/{memberId}/profile",
        family_file,
        "token",
        summary="The member's USER.md, what halo knows about them (audited)",
        responses={200: Reply("the file, or exists: false", MemoryFileText), 404: NO_MEMBER},
        parameters=[MEMBER_PATH],
        tag="memory",
    ),
    Route(
        "PUT",
        "/members/{memberId}/profile",
        edit_family_file,
        "token",
        summary="Replace the member's USER.md (audited)",
        responses={200: Reply("the file as it is now", MemoryFileText), 400: BAD_EDIT, 404: NO_MEMBER, 415: NOT_JSON},
        parameters=[MEMBER_PATH],
        body=Edit,
        tag="memory",
    ),
    Route(
        "GET",
        "/soul",
        family_file,
        "token",
        summary="SOUL.md, the assistant's persona (audited)",
        responses={200: Reply("the file, or exists: false", MemoryFileText)},
        tag="memory",
    ),
    Route(
        "PUT",
        "/soul",
        edit_family_file,
        "token",
        summary="Replace SOUL.md (audited)",
        responses={200: Reply("the file as it is now", MemoryFileText), 400: BAD_EDIT, 415: NOT_JSON},
        body=Edit,
        tag="memory",
    ),
    Route(
        "GET",
        "/memory/graph",
        scope_graph,
        "token",
        summary="The scope's graph memory: entities, and facts with when each held (audited)",
        responses={
            200: Reply("newest facts first; invalidAt set: superseded", GraphMemory),
            400: BAD_SCOPE,
            404: NO_SCOPE,
        },
        parameters=[SCOPE_QUERY],
        tag="memory",
    ),
]
