"""The markdown memory as a part of a move: the files `memory.store.recorded` names (SOUL.md,
USER.md, each scope's MEMORY.md, sidecar, daily notes and documents) in HALO_HOME,
`memory_files` on PostgreSQL (one row a file, by its path relative to HALO_HOME). A file is
its path and its text's sha256, computed on each side from the text itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from halo.storage.memory_rows import memory_files
from halo.storage.move.digest import canonical
from halo.storage.move.part import BATCH, Embedded, Postgres, Side
from memory.store import MemoryFile, local_files, local_paths, recorded, write_local


class MemoryPart:
    name = "memory files"
    ordered = False

    def __init__(self, family_id: str) -> None:
        self.family_id = family_id

    async def count(self, side: Side) -> int:
        if isinstance(side, Postgres):
            return int((await side.conn.execute(select(func.count()).select_from(memory_files))).scalar_one())
        return len(await asyncio.to_thread(lambda: list(local_paths(side.root))))

    async def read(self, side: Side) -> AsyncIterator[Sequence[MemoryFile]]:
        if isinstance(side, Embedded):
            files = await asyncio.to_thread(lambda: list(local_files(side.root)))
            for start in range(0, len(files), BATCH):
                yield files[start : start + BATCH]
            return
        m = memory_files.c
        result = await side.conn.stream(select(m.path, m.content).order_by(m.path))
        async for chunk in result.partitions(BATCH):
            yield [MemoryFile.of(row.path, row.content) for row in chunk]

    def canonical(self, record: MemoryFile) -> bytes:
        return canonical((record.path, record.sha256))

    async def prepare(self, side: Side) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(memory_files.delete())

    async def write(self, side: Side, records: Sequence[MemoryFile]) -> None:
        if isinstance(side, Postgres):
            now = datetime.now(UTC)
            rows = [
                {
                    "family_id": self.family_id,
                    "path": f.path,
                    "content": f.content,
                    "sha256": f.sha256,
                    "updated_at": now,
                }
                for f in records
            ]
            await side.conn.execute(memory_files.insert(), rows)
            return

        def write_all() -> None:
            for file in records:
                if recorded(file.path):  # a row never writes outside the memory (the check then says so)
                    write_local(side.root, file)

        await asyncio.to_thread(write_all)

    async def finish(self, side: Side) -> None:
        return None

    def local_paths(self, home: Path) -> list[Path]:
        return [home / relative for relative in local_paths(home)]
