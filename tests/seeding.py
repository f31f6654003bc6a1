"""A test's history written where the halo it builds will read it: the transcript lines and the
memory files through the stores `build_halo` makes from the same settings, so PostgreSQL's rows
on `storage.url` (`HALO_TEST_STORAGE=postgres`), and HALO_HOME's files on the embedded store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from config.settings import Settings
from halo.runtime.app import Stores, build_stores
from halo.storage.memory_store import unit_of
from transcripts.lines import TranscriptLine


@asynccontextmanager
async def halo_stores(settings: Settings) -> AsyncIterator[Stores]:
    """The stores a halo built from `settings` writes through; halo.db closed afterwards."""
    stores = build_stores(settings)
    try:
        yield stores
    finally:
        await stores.db.close()


async def seed_lines(settings: Settings, *lines: TranscriptLine) -> None:
    """Append `lines` to their scopes' transcripts, as the halo built from `settings` keeps them."""
    async with halo_stores(settings) as stores:
        for line in lines:
            await stores.transcripts.append(line)
        stores.transcripts.close()


async def seed_memory_file(settings: Settings, path: Path, text: str) -> None:
    """Write a memory file (MEMORY.md, a daily note; `path` as HALO_HOME would hold it) where the
    halo built from `settings` keeps it: the file, or on PostgreSQL its row."""
    relative = path.relative_to(settings.paths.home).as_posix()
    async with halo_stores(settings) as stores:
        if (rows := stores.memory_rows) is not None:
            await rows.load(unit_of(relative))
            rows.write(relative, text)
            await rows.flush()
        else:
            await asyncio.to_thread(stores.memory.write, relative, text)
