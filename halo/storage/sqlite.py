"""halo.db on SQLite through SQLAlchemy Core, without SQLAlchemy's asyncio extension.

The extension's package imports its ORM session on import (`sqlalchemy.ext.asyncio.session`
→ `sqlalchemy.orm`: ~6 MiB of a serving process), and halo uses Core only. What the extension
does for a Core connection is small: it runs the sync `Connection`'s calls in a greenlet
(`greenlet_spawn`), inside which the aiosqlite driver awaits its own thread. `SqliteEngine`
does that for the calls halo makes (a connection, a transaction, a statement, a function handed
the sync connection), so a statement costs what it did through `AsyncConnection`: one greenlet
and aiosqlite's hop to the connection's thread. PostgreSQL keeps the extension's `AsyncEngine`
(halo/storage/db.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

from sqlalchemy import Connection, CursorResult, Dialect, Engine, Executable, create_engine
from sqlalchemy.util import greenlet_spawn

from halo.db_conn import Parameters

Ts = TypeVarTuple("Ts")
T = TypeVar("T")


class SqliteConnection:
    """One pooled connection to the file (a `halo.db_conn.Conn`). aiosqlite's cursor reads a
    statement's rows whole before `execute` returns, as `AsyncConnection`'s results are."""

    __slots__ = ("sync",)

    def __init__(self, sync: Connection) -> None:
        self.sync = sync

    async def execute(self, statement: Executable, parameters: Parameters | None = None) -> CursorResult[Any]:
        return await greenlet_spawn(self.sync.execute, statement, parameters)

    @property
    def dialect(self) -> Dialect:
        return self.sync.dialect

    async def run_sync(self, fn: Callable[[Connection, *Ts], T], *args: *Ts) -> T:
        """`fn(sync connection, …)`: for what Core offers only in sync form (`create_all`, `inspect`)."""
        return await greenlet_spawn(fn, self.sync, *args)


class SqliteEngine:
    """Connections to one SQLite file: `sync` is SQLAlchemy's `Engine` over the aiosqlite driver
    (its pool, its events), driven only from inside `greenlet_spawn`."""

    def __init__(self, path: Path, **options: Any) -> None:
        self.sync: Engine = create_engine(f"sqlite+aiosqlite:///{path}", **options)
        # each statement its own transaction: no BEGIN and COMMIT around one INSERT
        self._autocommit = self.sync.execution_options(isolation_level="AUTOCOMMIT")

    @asynccontextmanager
    async def connect(self, *, autocommit: bool = False) -> AsyncIterator[SqliteConnection]:
        sync = await greenlet_spawn((self._autocommit if autocommit else self.sync).connect)
        try:
            yield SqliteConnection(sync)
        finally:
            # back to the pool (a transaction still open rolled back) even when the task is
            # cancelled meanwhile, as `AsyncConnection` does: never left half-closed
            await _to_completion(greenlet_spawn(sync.close))

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[SqliteConnection]:
        """One transaction, committed when the block ends, rolled back when it raises."""
        async with self.connect() as conn:
            transaction = await greenlet_spawn(conn.sync.begin)
            try:
                yield conn
            except BaseException:
                await _to_completion(greenlet_spawn(transaction.rollback))
                raise
            await greenlet_spawn(transaction.commit)

    async def dispose(self) -> None:
        await greenlet_spawn(self.sync.dispose)


async def _to_completion(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to its end even if this task is cancelled meanwhile; the cancellation is
    raised after it (cleanup that returns a connection to its pool must not stop halfway)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.cancelled():
                raise
            cancelled = exc
    task.result()
    if cancelled is not None:
        raise cancelled
