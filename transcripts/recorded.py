"""The transcripts on PostgreSQL: every line committed to the record (`LineRecord`, halo/storage)
and held in memory by the process that serves the family. No file is written: the record is
the only store, and what this process holds is its cache, filled when it takes a scope.

A process takes a scope before its first use (`ready`), and again when it takes the family over
(`take`): it reads the lines the record has past what it holds, once it has checked that its
last held line is still the record's (a purge through another process starts the scope again).

Offsets are the byte offsets the lines would have in a JSONL file, as the embedded store's, so
every watermark (distillation, the indexes, the web chat's cursor) means the same line to every
process of the family.

A home's transcript file (from before `storage.url`, or a copy an older halo kept) is dealt
with at the scope's first take here: see `_home_file`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from transcripts._held_lines import HeldLines
from transcripts.lines import TranscriptLine
from transcripts.records import LineRecord, RecordedLine, SeqTaken
from transcripts.store import TranscriptReader, TranscriptStore, _parse, one_scope, recorded_lines

logger = logging.getLogger(__name__)


class RecordedTranscripts(TranscriptStore):
    """`TranscriptStore` with the lines in `records` and in memory.

    `home` is where this home kept its transcripts without PostgreSQL; `from_record_only` says
    every file there came from this record (the home has served this database before).
    """

    def __init__(self, records: LineRecord, home: Path, *, from_record_only: bool = False) -> None:
        super().__init__(home)
        self.records = records
        self.from_record_only = from_record_only
        self._held: dict[str, HeldLines] = {}
        self._current: set[str] = set()  # held scopes known to be the record's up to their last line

    async def append_many(self, lines: list[TranscriptLine]) -> list[int]:
        """Commit the lines to the record in one statement, then hold them. A failure there raises
        and nothing is held; `SeqTaken` (another process wrote meanwhile) catches up and tries once more."""
        if not lines:
            return []
        scope_id = one_scope(lines)
        texts = [line.to_json() for line in lines]
        async with self._lock(scope_id):
            for attempt in range(2):
                held = await self._take(scope_id) if scope_id not in self._current else self._held[scope_id]
                first = len(held)
                recorded = [
                    RecordedLine(first + i, line.ts, text)
                    for i, (line, text) in enumerate(zip(lines, texts, strict=True))
                ]
                try:
                    await self.records.append(scope_id, recorded)
                    break
                except SeqTaken:  # another process wrote to the scope: catch up, and go after its lines
                    self._current.discard(scope_id)
                    if attempt:
                        raise
                except BaseException:  # committed or not is unknown (a dropped connection, a cancel):
                    self._current.discard(scope_id)  # the next use asks the record
                    raise
            return self._hold(scope_id, held, lines, [(text + "\n").encode("utf-8") for text in texts])

    def _hold(self, scope_id: str, held: HeldLines, lines: list[TranscriptLine], encoded: list[bytes]) -> list[int]:
        start = held.extend(encoded, time.time())
        return self._appended(scope_id, lines, encoded, start, start)

    async def ready(self, scope_id: str) -> None:
        """Take the scope once in this process, before its first use here."""
        if scope_id in self._current:
            return
        async with self._lock(scope_id):
            if scope_id not in self._current:
                await self._take(scope_id)

    async def take(self, scope_id: str) -> None:
        """Catch up with the record: for a process taking the family over."""
        async with self._lock(scope_id):
            await self._take(scope_id)

    async def _take(self, scope_id: str) -> HeldLines:
        """Hold what the record has past what is held. The record from the last held line on is
        read in one query; that line must be the record's, or the scope was purged (and maybe
        written again) through another process, and it is read again from its start."""
        self._current.discard(scope_id)
        held = self._held.get(scope_id)
        if held is None:
            await self._home_file(scope_id)
            held = self._held[scope_id] = HeldLines()
        have = len(held)
        missing = await self.records.read_from(scope_id, have - 1 if have else 0)
        if have:
            if missing and missing[0].seq == have - 1 and missing[0].json.encode("utf-8") + b"\n" == held.raws[-1]:
                missing = missing[1:]
            else:
                logger.info("transcript of %s: purged through another process; read again", scope_id)
                held = self._held[scope_id] = HeldLines()
                self._purged(scope_id)
                missing = await self.records.read_from(scope_id)
        if missing:
            if missing[0].seq != len(held):
                logger.warning(
                    "transcript of %s: %d lines held, the record resumes at %d", scope_id, len(held), missing[0].seq
                )
            encoded = [record.json.encode("utf-8") + b"\n" for record in missing]
            end_before = at = held.extend(encoded, missing[-1].ts.timestamp())
            if not end_before:  # a whole transcript: what the observers derive, they read when next asked
                self._purged(scope_id)
            else:  # the lines another process added: the observers hear of them as of an append
                told: list[tuple[int, TranscriptLine]] = []
                for raw in encoded:
                    if (line := _parse(self.path(scope_id), raw, at)) is not None:
                        told.append((at, line))
                    at += len(raw)
                for observer in self.observers:
                    observer.appended(scope_id, told, end_before, held.end)
        self._current.add(scope_id)
        return held

    async def _home_file(self, scope_id: str) -> None:
        """This home's transcript file of the scope, if it has one, at the scope's first take here.

        - PostgreSQL has none of the scope: the file's lines are recorded as they are (as
          `halo storage migrate` would), and the file goes.
        - It is a copy of the record's first lines (an older halo kept one), or every file here
          came from this record (`from_record_only`: then a file that is not a copy was purged
          through another process): the file goes.
        - Otherwise it is another history of the chat (two homes kept it apart): it stays where it
          is, unread, and the log says so.
        """
        path = self.path(scope_id)
        if not await asyncio.to_thread(path.exists):
            return
        own = await asyncio.to_thread(lambda: [recorded for _, recorded in recorded_lines(path)])
        if own and await self.records.count(scope_id) == 0:
            try:
                await self.records.append(scope_id, own)
            except SeqTaken:  # another process began the scope meanwhile: compare with its lines
                pass
            else:
                logger.info("transcript of %s: this home's %d lines recorded", scope_id, len(own))
                await asyncio.to_thread(self._purge_blocking, scope_id)
                return
        if self.from_record_only or not own or await self._is_copy(scope_id, own):
            await asyncio.to_thread(self._purge_blocking, scope_id)
            logger.info("transcript of %s: this home's copy removed; the record is read instead", scope_id)
        else:
            logger.warning(
                "transcript of %s: %s holds another history than PostgreSQL's; it is left as it is and not read",
                scope_id,
                path,
            )

    async def _is_copy(self, scope_id: str, own: list[RecordedLine]) -> bool:
        last = own[-1]
        found = await self.records.read_from(scope_id, last.seq)
        return bool(found) and found[0].seq == last.seq and found[0].json == last.json

    # -- reading what is held ------------------------------------------------------------

    def _lines(self, scope_id: str) -> HeldLines:
        return self._held.get(scope_id) or HeldLines()

    def read_from(self, scope_id: str, offset: int = 0) -> TranscriptReader:
        return TranscriptReader(self.path(scope_id), offset, held=self._lines(scope_id))

    def raw_reversed(self, scope_id: str) -> Iterator[tuple[int, bytes]]:
        return self._lines(scope_id).reversed()

    def size(self, scope_id: str) -> int:
        return self._lines(scope_id).end

    def count(self, scope_id: str) -> int:
        return len(self._lines(scope_id))

    def exists(self, scope_id: str) -> bool:
        return len(self._lines(scope_id)) > 0

    def scope_ids(self, written_since: float | None = None) -> list[str]:
        """The scopes held here with lines (on the family's active process, all of the family's)."""
        return sorted(
            scope_id
            for scope_id, held in list(self._held.items())
            if len(held) and (written_since is None or held.written_at >= written_since)
        )

    async def purge(self, scope_id: str) -> bool:
        """Delete the scope's lines from the record (and any file of it here); True if there were any."""
        async with self._lock(scope_id):
            recorded = await self.records.purge(scope_id)
            on_disk = await asyncio.to_thread(self._purge_blocking, scope_id)
            self._held[scope_id] = HeldLines()
            self._current.add(scope_id)
            self._purged(scope_id)
        return recorded > 0 or on_disk
