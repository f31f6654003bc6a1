"""Transcript lines in PostgreSQL, the store of record when `storage.url` is set.

One row a line: (family_id, scope_id, seq) with `seq` the line's 0-based number within its
scope, its time, and the line's JSON exactly as a JSONL file would hold it. The store
(transcripts/recorded.py) commits a turn's lines here, in one INSERT, and holds them in memory;
`RecordedTranscripts.take` reads what a process lacks.

For `halo storage migrate`: `TranscriptRows.read_from(scope_id)` gives a scope's lines in seq
order, `append(scope_id, lines)` inserts any number of them in one statement, `scope_ids()`
lists the scopes that have lines, `count()` the lines of the family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Column, DateTime, MetaData, String, Table, Text, delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import ColumnElement

from halo.storage.family import family_column
from transcripts.records import RecordedLine, SeqTaken

if TYPE_CHECKING:
    from halo.storage.db import HaloDB

UNIQUE_VIOLATION = "23505"  # PostgreSQL's SQLSTATE for a key that is there already
INSERT_CHUNK = 2000  # lines a statement: PostgreSQL takes at most 32767 parameters (4 a line)

metadata = MetaData()
transcript_lines = Table(
    "transcript_lines",
    metadata,
    family_column(primary_key=True),
    Column("scope_id", String(200), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("line", Text, nullable=False),
)

# A turn's lines, any number of them, in one statement that is prepared once per connection
# (asyncpg's statement cache): the columns as arrays. Sent through `HaloDB.send`, as it is.
APPEND = (
    "INSERT INTO transcript_lines (family_id, scope_id, seq, ts, line) "
    "SELECT $1::varchar, $2::varchar, seq, ts, line "
    "FROM unnest($3::bigint[], $4::timestamptz[], $5::text[]) AS given(seq, ts, line)"
)

# A scope's lines from a number on: every line of the family when a process takes it, so sent
# through `HaloDB.fetch`, asyncpg's rows without SQLAlchemy's around them
READ_FROM = (
    "SELECT seq, ts, line FROM transcript_lines WHERE family_id = $1 AND scope_id = $2 AND seq >= $3 ORDER BY seq"
)


class TranscriptRows:
    """`transcripts.records.LineRecord` on `HaloDB`'s PostgreSQL: the family's lines only."""

    def __init__(self, db: HaloDB) -> None:
        self.db = db

    async def append(self, scope_id: str, lines: Sequence[RecordedLine]) -> None:
        if not lines:
            return
        try:
            if len(lines) <= INSERT_CHUNK:  # a turn: one statement, its own transaction
                await self.db.send(
                    metadata,
                    APPEND,
                    self.db.family_id,
                    scope_id,
                    [line.seq for line in lines],
                    [line.ts for line in lines],
                    [line.json for line in lines],
                )
            else:  # a migration's bulk: all or nothing
                rows = [{"scope_id": scope_id, "seq": line.seq, "ts": line.ts, "line": line.json} for line in lines]
                async with self.db.write(metadata) as conn:
                    for start in range(0, len(rows), INSERT_CHUNK):
                        await conn.execute(insert(transcript_lines).values(rows[start : start + INSERT_CHUNK]))
        except IntegrityError as exc:
            if getattr(exc.orig, "sqlstate", None) != UNIQUE_VIOLATION:
                raise
            raise SeqTaken(f"{scope_id}: a line numbered {lines[0].seq}..{lines[-1].seq} is already recorded") from exc

    async def read_from(self, scope_id: str, seq: int = 0) -> list[RecordedLine]:
        rows = await self.db.fetch(metadata, READ_FROM, self.db.family_id, scope_id, seq)
        return [RecordedLine(*row) for row in rows]

    async def purge(self, scope_id: str) -> int:
        query = delete(transcript_lines).where(self._family, transcript_lines.c.scope_id == scope_id)
        async with self.db.autocommit(metadata) as conn:
            return (await conn.execute(query)).rowcount

    async def scope_ids(self) -> list[str]:
        query = select(transcript_lines.c.scope_id).where(self._family).distinct().order_by(transcript_lines.c.scope_id)
        async with self.db.read(metadata) as conn:
            return list((await conn.execute(query)).scalars())

    async def count(self, scope_id: str | None = None) -> int:
        query = select(func.count()).select_from(transcript_lines).where(self._family)
        if scope_id is not None:
            query = query.where(transcript_lines.c.scope_id == scope_id)
        async with self.db.read(metadata) as conn:
            return int((await conn.execute(query)).scalar_one())

    @property
    def _family(self) -> ColumnElement[bool]:
        return transcript_lines.c.family_id == self.db.family_id
