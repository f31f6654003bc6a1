"""halo.db: the small durable state of the core and the adapters (pairing requests, group
state, Telegram's outbox), through SQLAlchemy so it moves to PostgreSQL with the rest.

Each store declares its own `MetaData`; its tables are created on first use. Writes take
turns in-process because SQLite has one writer at a time, and are fully synchronous: an
outgoing message or a processed-update mark must survive a power cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from transcripts.sqlite import durable_sqlite_connection, use_wal


def _sqlite_durable_pragmas(dbapi_connection: Any, _: Any) -> None:
    durable_sqlite_connection(dbapi_connection, busy_ms=5000, synchronous="FULL")


class HaloDB:
    def __init__(self, path: Path, url: str | None = None) -> None:
        if url is None:
            use_wal(path)
            url = f"sqlite+aiosqlite:///{path}"
        self.engine: AsyncEngine = create_async_engine(url)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine.sync_engine, "connect", _sqlite_durable_pragmas)
        self._created: set[int] = set()
        self._schema_lock = asyncio.Lock()
        self._write_turns = asyncio.Lock()

    async def _ensure(self, metadata: MetaData) -> None:
        if id(metadata) in self._created:
            return
        async with self._schema_lock:
            if id(metadata) not in self._created:
                async with self.engine.begin() as conn:
                    await conn.run_sync(metadata.create_all)
                self._created.add(id(metadata))

    @asynccontextmanager
    async def write(self, metadata: MetaData, *more: MetaData) -> AsyncIterator[AsyncConnection]:
        """One transaction, committed on exit (rolled back on an exception). `more`: other
        stores' tables the same transaction writes (a reminder's fired mark and its outbox row)."""
        for tables in (metadata, *more):
            await self._ensure(tables)
        async with self._write_turns, self.engine.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self, metadata: MetaData) -> AsyncIterator[AsyncConnection]:
        await self._ensure(metadata)
        async with self.engine.connect() as conn:
            yield conn

    async def close(self) -> None:
        await self.engine.dispose()
