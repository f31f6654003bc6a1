"""halo.db on SQLite runs Core in greenlets without SQLAlchemy's asyncio extension
(halo/storage/sqlite.py): a write that fails or is cancelled keeps nothing, and its connection
goes back to the pool either way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, insert, select

from halo.storage import HaloDB

NOTES = MetaData()
notes = Table("notes", NOTES, Column("n", Integer))


async def _numbers(db: HaloDB) -> list[int]:
    async with db.read(NOTES) as conn:
        return list((await conn.execute(select(notes.c.n).order_by(notes.c.n))).scalars())


async def test_a_write_that_raises_or_is_cancelled_keeps_nothing_and_gives_its_connection_back(tmp_path: Path) -> None:
    db = HaloDB(tmp_path / "halo.db")
    with pytest.raises(RuntimeError):
        async with db.write(NOTES) as conn:
            await conn.execute(insert(notes).values(n=1))
            raise RuntimeError("a store's step failed")

    inserted, never = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        async with db.write(NOTES) as conn:
            await conn.execute(insert(notes).values(n=2))
            inserted.set()
            await never.wait()  # a turn cancelled (a stop, a deadline) mid-transaction

    task = asyncio.create_task(held())
    await inserted.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async with db.write(NOTES) as conn:
        await conn.execute(insert(notes).values(n=3))
    assert await _numbers(db) == [3]
    assert db.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    await db.close()


async def test_autocommit_statements_each_commit_and_rows_are_read_before_execute_returns(tmp_path: Path) -> None:
    db = HaloDB(tmp_path / "halo.db")
    async with db.autocommit(NOTES) as conn:
        await conn.execute(insert(notes), [{"n": 1}, {"n": 2}])
        result = await conn.execute(select(notes.c.n).order_by(notes.c.n))
    assert result.scalars().all() == [1, 2]  # read after the connection went back: the rows came whole
    assert await _numbers(db) == [1, 2]
    assert db.backend == "sqlite"
    await db.ping()
    await db.close()
