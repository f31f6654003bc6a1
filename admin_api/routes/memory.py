"""A scope's MEMORY.md, read as it is on disk: what halo remembers there. Every read is audited."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import Field

from admin_api.base import path_scope, query_scope, scope_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Timestamp, reply
from admin_api.routes import BAD_SCOPE, NO_SCOPE, SCOPE_PATH, SCOPE_QUERY, Reply, Route

MAX_MEMORY_BYTES = 512 * 1024


class Memory(ApiModel):
    scopeId: str
    exists: bool
    text: str
    updatedAt: Timestamp | None
    truncated: bool = Field(description=f"the file is longer than the {MAX_MEMORY_BYTES} bytes sent")


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


def read_memory_file(path: Path) -> dict[str, Any]:
    """The file's text (at most MAX_MEMORY_BYTES of it) and when it last changed."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_MEMORY_BYTES + 1)
            mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()
    except FileNotFoundError:
        return {"exists": False, "text": "", "updatedAt": None, "truncated": False}
    truncated = len(data) > MAX_MEMORY_BYTES
    text = data[:MAX_MEMORY_BYTES].decode("utf-8", "replace")
    return {"exists": True, "text": text, "updatedAt": mtime, "truncated": truncated}


async def scope_memory(request: web.Request) -> web.Response:
    scope = await path_scope(request)
    services = scope_desk(request)
    await services.take_scope(scope.id)  # PostgreSQL: this process's copy is current
    found = await asyncio.to_thread(read_memory_file, services.memory.memory_path(scope.id))
    services.audit.write("admin_read_memory", scope_id=scope.id, actor=actor(request), exists=found["exists"])
    return reply(Memory(scopeId=scope.id, **found))


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


ROUTES = [
    Route(
        "GET",
        "/scopes/{scopeId}/memory",
        scope_memory,
        "token",
        summary="The scope's MEMORY.md as it is on disk (audited)",
        responses={200: Reply("the file, or exists: false", Memory), 400: BAD_SCOPE, 404: NO_SCOPE},
        parameters=[SCOPE_PATH],
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
