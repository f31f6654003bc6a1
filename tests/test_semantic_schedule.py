"""When indexes are synced: closing halo lets a sync in progress finish its scope first."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import ScopeIndex, SemanticMemory
from tests.semantic_helpers import CountingEmbedder
from tests.waiting import eventually

SCOPE = "web:mom"


def home_with_a_fact(tmp_path: Path) -> HaloPaths:
    """A HALO_HOME whose scope has one fact in its MEMORY.md, to index."""
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    paths.memory_file(SCOPE).parent.mkdir(parents=True, exist_ok=True)
    paths.memory_file(SCOPE).write_text("# Facts\nThe van needs new tyres.\n")
    return paths


async def test_close_waits_for_a_sync_in_progress_then_syncs_nothing(tmp_path: Path) -> None:
    paths = home_with_a_fact(tmp_path)
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


async def test_closing_while_the_catch_up_sync_waits_on_the_embedder_is_a_normal_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`halo chat` at end of input closes halo at once, often while the first sync at start-up
    waits on the embedder (a hub download): that sync stops quietly; the next start does it."""
    paths = home_with_a_fact(tmp_path)
    loading = asyncio.Event()

    async def never_loads() -> CountingEmbedder:  # a download that is still going when input ends
        loading.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=never_loads)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO)
    await semantic.start([SCOPE])
    await eventually(lambda: semantic._schedule.health.runs == 1, what="the catch-up sync to start")
    await eventually(loading.is_set, what="the embedder to be loading")
    await semantic.close()
    await eventually(
        lambda: not any("run_coroutine_job" in repr(t.get_coro()) for t in asyncio.all_tasks()),
        what="the scheduler's cancelled job to end and report",
    )
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert semantic._schedule.health.failures == 0


async def test_the_catch_up_sync_runs_however_late_a_busy_machine_starts_it(tmp_path: Path) -> None:
    """The start-up sync was an APScheduler job with the default 1 s grace: on a loaded machine
    the loop came to it later than that and it was skipped for good ("was missed by 0:00:01.1"),
    so edits made while halo was down stayed out of the index. It runs late instead."""
    paths = home_with_a_fact(tmp_path)
    embedder = CountingEmbedder()

    async def load() -> CountingEmbedder:
        return embedder

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=load)  # type: ignore[arg-type]
    await semantic.start([SCOPE])
    busy_until = time.monotonic() + 1.5  # the loop held, as other work on a busy machine holds it
    while time.monotonic() < busy_until:
        pass
    await eventually(lambda: semantic._schedule.health.runs == 1, what="the catch-up sync, late")
    await eventually(lambda: SCOPE in semantic.sync_health.scopes, what="the scope synced")
    await semantic.close()
