"""Graph memory, wired to halo: built from settings and the memory service, fed by quiet scopes.

The composition root calls `build_graph` once and `wire_graph` to connect its triggers; the
turn-side parts (context source, tool, command) live in halo/context/graph.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from config.settings import Settings
from memory.graph.service import GraphMemory
from memory.semantic import SemanticMemory
from memory.service import MemoryService


def build_graph(
    settings: Settings,
    memory: MemoryService,
    semantic: SemanticMemory,
    on_usage: Callable[[str, int, int, int], Awaitable[None]],
) -> GraphMemory:
    """GraphMemory over this HALO_HOME, built even when off so /status can say why. Its
    embedder is the semantic index's (one model, loaded once); ingestion uses the same
    speaker names and write permission as distillation, and each of its model calls is
    handed to `on_usage` (halo's usage table, purpose "graph")."""
    graph = GraphMemory(
        settings.memory.graph,
        settings.llm,
        settings.paths,
        memory.files,
        memory.transcripts,
        memory.state,
        semantic.embedder,
        names=memory.names,
        may_write=memory.distiller.may_write,
        scope_label=lambda scope_id: memory.files.describe(scope_id).description,
        on_usage=on_usage,
    )
    if settings.memory.graph.enabled:  # quiet timers run only for someone who listens
        memory.on_quiet.append(graph.scope_quiet)  # the same trigger as model extraction
    return graph
