"""`RowMemory`, the markdown memory on PostgreSQL (#31): the family's `memory_files` rows held in
the serving process, changed at once, written behind. Against a real PostgreSQL database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path

import pytest

from config.paths import HaloPaths
from halo.storage import HaloDB
from halo.storage.memory_rows import MemoryRows
from halo.storage.memory_store import RowMemory
from memory.scope_files import ScopeFiles
from memory.store import SOUL, MemoryFile, daily_md, memory_md, scope_folder, user_md
from tests.storage_support import fresh_database

pytestmark = pytest.mark.postgres

DM = "web:mom"
DAY = date(2026, 11, 29)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[HaloDB]:
    async with fresh_database(migrated=True) as url:
        db = HaloDB(tmp_path / "halo.db", url)
        try:
            yield db
        finally:
            await db.close()


async def stored(db: HaloDB) -> dict[str, str]:
    return {f.path: f.content for f in await MemoryRows(db).all_files()}


async def test_changes_are_held_at_once_and_written_together(db: HaloDB, tmp_path: Path) -> None:
    memory = RowMemory(MemoryRows(db), tmp_path / "home", every=3600)
    await memory.ready(DM)
    where = memory_md(DM)
    await asyncio.to_thread(memory.write, where, "- one\n")
    await asyncio.to_thread(memory.update, where, lambda text: text + "- two\n")
    await asyncio.to_thread(memory.write, daily_md(DM, DAY), "# day\n")
    size = await asyncio.to_thread(memory.append, daily_md(DM, DAY), "- [09:00] hi\n")
    assert memory.text(where) == "- one\n- two\n" and size == len("# day\n- [09:00] hi\n")
    assert await stored(db) == {}, "nothing written before the flush"
    await memory.flush()
    assert (await stored(db))[where] == "- one\n- two\n"
    with pytest.raises(FileNotFoundError):
        await asyncio.to_thread(memory.append, scope_folder(DM) + "daily/2026-01-01.md", "- nothing to add to\n")
    with pytest.raises(ValueError):
        await asyncio.to_thread(memory.write, scope_folder(DM) + "scope.json", "{}")  # not memory
    await memory.close()


async def test_a_purge_is_not_undone_by_a_load_before_it_is_written(db: HaloDB, tmp_path: Path) -> None:
    await MemoryRows(db).write_many([MemoryFile.of(memory_md(DM), "- the locker code is 4721\n")])
    memory = RowMemory(MemoryRows(db), tmp_path / "home", every=3600)
    files = ScopeFiles(HaloPaths(tmp_path / "home"), store=memory)
    await memory.ready(None)
    assert await asyncio.to_thread(files.purge, DM) is False  # nothing of it held or on disk here …
    await memory.ready(DM)  # … and a load before the purge is written brings nothing back
    assert memory.text(memory_md(DM)) is None
    await memory.flush()
    assert await stored(db) == {}


async def test_a_scope_first_touched_from_a_worker_thread_is_loaded_then(db: HaloDB, tmp_path: Path) -> None:
    await MemoryRows(db).write_many([MemoryFile.of(memory_md(DM), "- from the rows\n"), MemoryFile.of(SOUL, "soul\n")])
    memory = RowMemory(MemoryRows(db), tmp_path / "home", every=3600)
    await memory.start()  # the loop it loads on
    assert await asyncio.to_thread(memory.text, memory_md(DM)) == "- from the rows\n"
    assert memory.holds(memory_md(DM)) and not memory.holds(SOUL)
    with pytest.raises(RuntimeError, match="not held"):  # on the loop a load would block it: refused, not guessed
        memory.write(user_md("mom"), "# Mom\n")
    await memory.close()
