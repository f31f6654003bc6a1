"""What a move is made of: the two sides, and a `Part` — one kind of data — that can count,
read, write and checksum itself on either side. A new kind of data is one small class."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import AsyncConnection

BATCH = 1000  # records read and written together, and how often progress is told


class MoveError(RuntimeError):
    """Why a move cannot go on, said plainly; the target is left as it was."""


@dataclass(frozen=True, slots=True)
class Embedded:
    """A HALO_HOME's own files. `root` is the HALO_HOME read from, or the staging folder a move
    writes into (renamed into place only once everything checks out); `db` its halo.db, None
    when there is none yet."""

    root: Path
    db: AsyncConnection | None


@dataclass(frozen=True, slots=True)
class Postgres:
    """A PostgreSQL database at halo's newest schema, inside the one transaction the move runs in."""

    conn: AsyncConnection
    schema: MetaData  # its tables as reflected after the migration


Side = Embedded | Postgres


class Part(Protocol):
    """One kind of data (a halo.db table, the transcripts, the audit log, the memory files).

    `read` yields batches of records; `canonical` is a record's bytes for the checksum (equal
    on both sides for equal data); `ordered` says whether their order is part of the data."""

    name: str
    ordered: bool

    async def count(self, side: Side) -> int: ...

    def read(self, side: Side) -> AsyncIterator[Sequence[Any]]: ...

    def canonical(self, record: Any) -> bytes: ...

    async def prepare(self, side: Side) -> None:
        """Make this part's place on the target empty and ready (only an empty target, or `--force`)."""

    async def write(self, side: Side, records: Sequence[Any]) -> None: ...

    async def finish(self, side: Side) -> None:
        """After the last write: what the target needs to go on from here (a sequence's next value)."""

    def local_paths(self, home: Path) -> list[Path]:
        """The files this part keeps in a HALO_HOME: what `--force` moves aside before the copy
        takes their place (halo.db's tables: none, the staged halo.db replaces the file whole)."""
        ...
