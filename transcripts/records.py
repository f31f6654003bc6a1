"""The store of record behind the transcripts, when it is not the files (PostgreSQL: halo/storage).

`RecordedTranscripts` (transcripts/recorded.py) commits each line here and holds it in memory;
there is no file. Each line has a `seq`, its 0-based line number within its scope, so a process
that holds some of a scope reads only the records from its own count on.

The protocol lives here, below halo, so the store needs nothing of halo's storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class SeqTaken(Exception):
    """A line with that seq is already recorded: another process wrote to the scope meanwhile."""


@dataclass(frozen=True, slots=True)
class RecordedLine:
    """One transcript line as the record keeps it: `json` is the file's line without its newline."""

    seq: int
    ts: datetime
    json: str


class LineRecord(Protocol):
    """Where transcript lines are committed before the local file has them."""

    async def append(self, scope_id: str, lines: Sequence[RecordedLine]) -> None:
        """Commit `lines` (consecutive seqs) in one statement and one transaction, or none of
        them. Raises `SeqTaken` when one of their seqs is taken; any other failure propagates."""
        ...

    async def read_from(self, scope_id: str, seq: int = 0) -> list[RecordedLine]:
        """The scope's lines with `seq` and above, in seq order."""
        ...

    async def count(self, scope_id: str) -> int:
        """How many lines the scope has."""
        ...

    async def purge(self, scope_id: str) -> int:
        """Delete every line of the scope; how many there were."""
        ...
