"""One scope's transcript held in memory: its lines as bytes, each at the byte offset it would
have in the scope's JSONL file. On PostgreSQL these are the process's cache of the record, and
offsets stay the watermarks every reader resumes from: each process builds the same bytes from
the same rows, so an offset stored by one process means the same line to another.

Only ever appended to (a purge replaces the whole object), so a reader in a worker thread can
walk it while the event loop appends: list appends are atomic, and a line's bytes never change.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator


class HeldLines:
    __slots__ = ("offsets", "raws", "written_at")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.raws: list[bytes] = []  # each ends with its newline, as the file would hold it
        self.written_at = 0.0  # POSIX time of the newest line, as a file's mtime would say

    @property
    def end(self) -> int:
        """The byte just past the last line: the file's size, were there a file."""
        return self.offsets[-1] + len(self.raws[-1]) if self.raws else 0

    def __len__(self) -> int:
        return len(self.raws)

    def extend(self, encoded: list[bytes], written_at: float) -> int:
        """Append lines (each with its newline); the offset the first one starts at (the end before)."""
        start = at = self.end
        for raw in encoded:
            self.offsets.append(at)  # the offset first: a reader bounds itself by `raws`
            self.raws.append(raw)
            at += len(raw)
        self.written_at = max(self.written_at, written_at)
        return start

    def from_offset(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """`(offset, raw)` from the first line at or after `offset`, including lines appended meanwhile."""
        i = bisect_left(self.offsets, offset, 0, len(self.raws))
        while i < len(self.raws):
            yield self.offsets[i], self.raws[i]
            i += 1

    def reversed(self) -> Iterator[tuple[int, bytes]]:
        """`(offset, raw without its newline)`, the last line first."""
        for i in range(len(self.raws) - 1, -1, -1):
            yield self.offsets[i], self.raws[i][:-1]
