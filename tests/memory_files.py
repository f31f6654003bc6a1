"""The markdown memory as a halo keeps it, on either store: HALO_HOME's files when embedded, the
rows the serving process holds on PostgreSQL (no file there). Tests read and write it through
the halo's own store, naming a file by its path in HALO_HOME (`settings.paths`) or relative."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from config.loader import load_settings
from halo.runtime.app import halo_db
from halo.storage.memory_rows import MemoryRows
from halo.storage.memory_store import RowMemory, unit_of
from memory.store import DiskMemory, MemoryStore


def relative_of(halo: Any, path: Path | str) -> str:
    return path.relative_to(halo.settings.paths.home).as_posix() if isinstance(path, Path) else path


async def held(halo: Any, path: Path | str) -> tuple[MemoryStore, str]:
    """The halo's memory store, holding the file's scope (PostgreSQL), and the file's relative path."""
    store: MemoryStore = halo.memory.files.store
    relative = relative_of(halo, path)
    if isinstance(store, RowMemory) and not store.holds(relative):
        await store.load(unit_of(relative))
    return store, relative


async def read_memory(halo: Any, path: Path | str) -> str:
    """The file's text, "" when there is none."""
    store, relative = await held(halo, path)
    return await asyncio.to_thread(store.text, relative) or ""


async def write_memory(halo: Any, path: Path | str, text: str) -> None:
    """Replace the file's text as a parent's edit would, in the store of record when this returns."""
    store, relative = await held(halo, path)
    await asyncio.to_thread(store.write, relative, text)
    await store.flush()


async def memory_names(halo: Any, folder: Path | str) -> list[str]:
    """The memory files under a folder (its path in HALO_HOME, or relative), by name."""
    prefix = relative_of(halo, folder).rstrip("/") + "/"
    store, _ = await held(halo, prefix + "x.md")
    return [name.removeprefix(prefix) for name in await asyncio.to_thread(store.names, prefix)]


async def home_memory(home: Path, relative: str) -> str | None:
    """A memory file as `home`'s halo keeps it, read by a store of its own (a `halo` command or
    process has stopped): the file, or on PostgreSQL (`storage.url`) its row. None: there is none."""
    settings = load_settings(home)
    if settings.storage.url is None:
        return DiskMemory(home).text(relative)
    db = halo_db(settings)
    try:
        found = [f for f in await MemoryRows(db).files_under(relative) if f.path == relative]
    finally:
        await db.close()
    return found[0].content if found else None
