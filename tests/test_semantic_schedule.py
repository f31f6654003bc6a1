"""When indexes are synced: closing halo lets a sync in progress finish its scope first."""

from __future__ import annotations

import asyncio
from pathlib import Path

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import ScopeIndex, SemanticMemory
from tests.semantic_helpers import CountingEmbedder
from tests.waiting import eventually

SCOPE = "web:mom"


async def test_close_waits_for_a_sync_in_progress_then_syncs_nothing(tmp_path: Path) -> None:
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    memory_md = paths.scope_dir(SCOPE) / "MEMORY.md"
    memory_md.parent.mkdir(parents=True, exist_ok=True)
    memory_md.write_text("# Facts\nThe van needs new tyres.\n")
    embedder = CountingEmbedder()
    loading, release = asyncio.Event(), asyncio.Event()

    async def slow_load() -> CountingEmbedder:  # the sync is mid-way while the model loads
        loading.set()
        await release.wait()
        return embedder

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=slow_load)  # type: ignore[arg-type]
    syncing = asyncio.create_task(semantic.sync_scope(SCOPE))
    await eventually(loading.is_set, what="the sync to reach the embedder")
    semantic.request_sync(SCOPE)  # queued behind it: close drops it
    closing = asyncio.create_task(semantic.close())
    release.set()
    await closing

    report = await syncing
    assert report is not None and report.files_changed == ["MEMORY.md"] and report.embedded == 1
    assert await semantic.sync_scope(SCOPE) is None, "nothing syncs after close"
    index = ScopeIndex(semantic.index_path(SCOPE), SCOPE)
    assert index.stats()["chunks"] == 1, "what the sync wrote is on disk"
    index.close()
