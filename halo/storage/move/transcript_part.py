"""The transcripts as a part of a move: each scope's JSONL file in HALO_HOME, `transcript_lines`
on PostgreSQL (one row a line, `seq` its number among the file's whole lines). Lines are
copied as the file holds them, byte for byte, so a round trip gives the same files back.
The order is the data: the checksum chains the lines, scope by scope (by scope id, in code
point order on both sides), each scope's in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select

from config.paths import scope_hash
from halo.storage.move.digest import canonical
from halo.storage.move.lines import append_lines, batches_of
from halo.storage.move.part import BATCH, Embedded, Postgres, Side
from halo.storage.transcript_rows import transcript_lines
from transcripts.store import recorded_lines

TRANSCRIPTS = "transcripts"


@dataclass(frozen=True, slots=True)
class Line:
    scope_id: str
    seq: int
    ts: datetime
    json: str  # the file's line, without its newline


def _lines_of(path: Path) -> Iterator[Line]:
    """A transcript file's whole, valid lines, numbered as the transcript store counts them."""
    scope_id: str | None = None
    for line, recorded in recorded_lines(path):
        scope_id = scope_id or line.scope_id
        yield Line(scope_id, recorded.seq, recorded.ts, recorded.json)


def _files_by_scope(root: Path) -> list[Path]:
    """The transcript files under `root`, in the order of their scopes' ids."""
    folder = root / TRANSCRIPTS
    found: list[tuple[str, Path]] = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        first = next(_lines_of(path), None)
        if first is not None:
            found.append((first.scope_id, path))
    return [path for _, path in sorted(found)]


def _all_lines(root: Path) -> Iterator[Line]:
    for path in _files_by_scope(root):
        yield from _lines_of(path)


class TranscriptPart:
    name = "transcripts"
    ordered = True

    def __init__(self, family_id: str) -> None:
        self.family_id = family_id

    async def count(self, side: Side) -> int:
        if isinstance(side, Postgres):
            return int((await side.conn.execute(select(func.count()).select_from(transcript_lines))).scalar_one())
        return await asyncio.to_thread(lambda: sum(1 for _ in _all_lines(side.root)))

    async def read(self, side: Side) -> AsyncIterator[Sequence[Line]]:
        if isinstance(side, Embedded):
            async for batch in batches_of(lambda: _all_lines(side.root)):
                yield batch
            return
        t = transcript_lines.c
        query = select(t.scope_id, t.seq, t.ts, t.line).order_by(t.scope_id.collate("C"), t.seq)
        result = await side.conn.stream(query)
        async for chunk in result.partitions(BATCH):
            yield [Line(row.scope_id, row.seq, row.ts, row.line) for row in chunk]

    def canonical(self, record: Line) -> bytes:
        return canonical((record.scope_id, record.seq, record.json))

    async def prepare(self, side: Side) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(transcript_lines.delete())

    async def write(self, side: Side, records: Sequence[Line]) -> None:
        if isinstance(side, Postgres):
            rows = [
                {"family_id": self.family_id, "scope_id": r.scope_id, "seq": r.seq, "ts": r.ts, "line": r.json}
                for r in records
            ]
            await side.conn.execute(transcript_lines.insert(), rows)
            return
        by_file: dict[Path, list[str]] = {}
        for record in records:
            by_file.setdefault(side.root / TRANSCRIPTS / f"{scope_hash(record.scope_id)}.jsonl", []).append(record.json)

        def append_all() -> None:
            for path, lines in by_file.items():
                append_lines(path, lines)

        await asyncio.to_thread(append_all)

    async def finish(self, side: Side) -> None:
        return None

    def local_paths(self, home: Path) -> list[Path]:
        return sorted((home / TRANSCRIPTS).glob("*.jsonl"))
