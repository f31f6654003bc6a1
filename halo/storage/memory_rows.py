"""The markdown memory's rows: `memory_files`, one row a file, the store of record on PostgreSQL.

A row is a file of the markdown memory (memory.store says which): its path relative
to HALO_HOME (a scope's files under `memory/scopes/<scope hash>/`), its text and the text's
sha256. The process serving the family holds them in memory (halo/storage/memory_store.py).

`MemoryRows` is the whole SQL: what `RowMemory` and `halo storage migrate` use.
Every query is limited to the family of the `HaloDB` it goes through.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select

from halo.db_conn import Conn
from halo.storage.db import HaloDB
from halo.storage.family import FAMILY_COLUMN, FAMILY_ID_LENGTH
from halo.storage.job_rows import JobChanges
from halo.storage.job_rows import metadata as job_metadata
from memory.store import MemoryFile

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql.dml import Insert as PgInsert
    from sqlalchemy.dialects.sqlite.dml import Insert as SqliteInsert

PATH_LENGTH = 512

metadata = MetaData()
memory_files = Table(
    "memory_files",
    metadata,
    Column(FAMILY_COLUMN, String(FAMILY_ID_LENGTH), primary_key=True),  # in the key: one path per family
    Column("path", String(PATH_LENGTH), primary_key=True),
    Column("content", Text, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


class MemoryRows:
    """The family's `memory_files` rows through `db`."""

    def __init__(self, db: HaloDB) -> None:
        self.db = db

    async def all_files(self) -> list[MemoryFile]:
        """Every recorded file of the family, with its text, by path (a migration reads this)."""
        return await self.files_under("")

    async def files_under(self, prefix: str) -> list[MemoryFile]:
        """The files whose path starts with `prefix` ("memory/scopes/<hash>/"; "" for all)."""
        query = select(memory_files.c.path, memory_files.c.content, memory_files.c.sha256).where(
            memory_files.c.family_id == self.db.family_id
        )
        if prefix:
            query = query.where(memory_files.c.path.startswith(prefix, autoescape=True))
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(query.order_by(memory_files.c.path))).all()
        return [MemoryFile(row.path, row.content, row.sha256) for row in rows]

    async def hashes(self) -> dict[str, str]:
        """Every recorded path of the family and its text's sha256 (no texts)."""
        query = select(memory_files.c.path, memory_files.c.sha256).where(memory_files.c.family_id == self.db.family_id)
        async with self.db.read(metadata) as conn:
            return {row.path: row.sha256 for row in (await conn.execute(query)).all()}

    async def updated(self, paths: Iterable[str]) -> dict[str, datetime]:
        """When each of these paths' rows was last written (paths without a row left out)."""
        wanted = list(paths)
        if not wanted:
            return {}
        query = select(memory_files.c.path, memory_files.c.updated_at).where(
            memory_files.c.family_id == self.db.family_id, memory_files.c.path.in_(wanted)
        )
        async with self.db.read(metadata) as conn:
            return {row.path: row.updated_at for row in (await conn.execute(query)).all()}

    async def write_many(self, files: Iterable[MemoryFile]) -> int:
        """Insert or replace these files (one transaction; a migration writes with this)."""
        return await self.apply(files, removed=(), removed_prefixes=())

    async def apply(
        self,
        files: Iterable[MemoryFile],
        removed: Iterable[str],
        removed_prefixes: Iterable[str],
        *,
        jobs: JobChanges | None = None,
    ) -> int:
        """One transaction: rows under each of `removed_prefixes` and at each of `removed` paths
        deleted, then `files` upserted, then the memory jobs' `jobs` written (their progress goes
        with what it produced). Returns the number of files written."""
        now = datetime.now(UTC)
        values = [
            {
                "family_id": self.db.family_id,
                "path": f.path,
                "content": f.content,
                "sha256": f.sha256,
                "updated_at": now,
            }
            for f in files
        ]
        removed, removed_prefixes = list(removed), list(removed_prefixes)
        async with self.db.write(metadata, *([job_metadata] if jobs else [])) as conn:
            mine = memory_files.c.family_id == self.db.family_id
            for prefix in removed_prefixes:
                await conn.execute(
                    delete(memory_files).where(mine, memory_files.c.path.startswith(prefix, autoescape=True))
                )
            if removed:
                await conn.execute(delete(memory_files).where(mine, memory_files.c.path.in_(removed)))
            if values:
                await _upsert(conn, values)
            if jobs:
                await jobs.write(conn, self.db.family_id)
        return len(values)


async def _upsert(conn: Conn, values: list[dict[str, object]]) -> None:
    if conn.dialect.name == "postgresql":  # imported by the dialect in use: PostgreSQL's holds ~2.3 MiB
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement: PgInsert | SqliteInsert = pg_insert(memory_files)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        statement = sqlite_insert(memory_files)
    statement = statement.on_conflict_do_update(
        index_elements=[memory_files.c.family_id, memory_files.c.path],
        set_={
            "content": statement.excluded.content,
            "sha256": statement.excluded.sha256,
            "updated_at": statement.excluded.updated_at,
        },
        where=memory_files.c.sha256 != statement.excluded.sha256,
    )
    await conn.execute(statement, values)
