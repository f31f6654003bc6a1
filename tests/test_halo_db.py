"""halo.db is shared by several engines (the core's stores, distillation state): one writing
must never make another fail to open the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, Table, insert, select

from halo.storage import HaloDB
from memory.state import JobStateStore

NOTES = MetaData()
notes = Table("notes", NOTES, Column("n", Integer))


def _writer_holding(path: Path) -> sqlite3.Connection:
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("create table if not exists other (x)")
    writer.execute("begin immediate")
    writer.execute("insert into other values (1)")
    return writer


async def test_the_file_is_wal_from_the_start_and_a_busy_writer_does_not_block_a_new_reader(tmp_path: Path):
    path = tmp_path / "halo.db"
    first = HaloDB(path)
    assert sqlite3.connect(path).execute("pragma journal_mode").fetchone() == ("wal",)
    async with first.write(NOTES) as conn:
        await conn.execute(insert(notes).values(n=1))
    await first.close()

    writer = _writer_holding(path)  # another engine mid-transaction while a new one opens the file
    try:
        again = HaloDB(path)
        async with again.read(NOTES) as conn:
            assert (await conn.execute(select(notes.c.n))).scalars().all() == [1]
    finally:
        writer.execute("commit")
        writer.close()
    await again.close()


async def test_an_old_rollback_mode_file_opens_while_another_connection_writes_and_becomes_wal(tmp_path: Path):
    path = tmp_path / "halo.db"
    sqlite3.connect(path).execute("create table seed (x)")  # an old install's file: not WAL yet
    writer = _writer_holding(path)
    try:  # switching to WAL needs the lock the writer holds, and SQLite will not wait for it
        db = HaloDB(path)
        state = JobStateStore(path)
    finally:
        writer.execute("commit")
        writer.close()
    async with db.write(NOTES) as conn:
        await conn.execute(insert(notes).values(n=7))
    assert state.get("telegram:1", "distill").scope_id == "telegram:1"
    assert sqlite3.connect(path).execute("pragma journal_mode").fetchone() == ("wal",)
    async with db.read(NOTES) as conn:
        assert (await conn.execute(select(notes.c.n))).scalars().all() == [7]
    await db.close()
    state.close()
