"""Per-scope append-only transcripts: the source of truth for every conversation.

One JSONL file per scope, `<root>/<scope_hash>.jsonl`, one JSON object a line. A file is
only ever appended to, never rewritten: sessions, memory and indexes are derived from it
and can be rebuilt from it.

Offsets are byte offsets into that file and are the watermark everything downstream
(indexing, distillation) resumes from. Only a newline makes a line whole: a reader never
yields, and never moves its watermark past, bytes that are not yet newline-terminated.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from config.paths import scope_hash
from transcripts._lines import complete_lines_reversed
from transcripts.appender import FileAppender
from transcripts.disk_pace import DiskPace
from transcripts.jsonl import fsync_dir
from transcripts.lines import TranscriptLine, parse_json
from transcripts.records import LineRecord, RecordedLine, SeqTaken

__all__ = ["TranscriptLine", "TranscriptReader", "TranscriptStore", "fsync_dir"]

logger = logging.getLogger(__name__)

# When the disk is slow (DiskPace), appends wait on it in threads of their own, so scopes fsync side by
# side (the filesystem journal commits concurrent fsyncs together: group commit) and never queue behind
# other to_thread work. Threads start only as appends need them; one pool for every store in the process.
_APPENDERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="transcript-append")


def _encode(line: TranscriptLine) -> bytes:
    return line.to_json().encode("utf-8") + b"\n"  # TranscriptLine repaired what UTF-8 cannot hold


def _parse(path: Path, raw: bytes, offset: int | None = None) -> TranscriptLine | None:
    """A whole line, or None (with a warning) when it is blank or corrupt: a reader never raises on data."""
    if not raw.strip():
        return None
    try:
        return parse_json(raw)
    except (ValueError, KeyError, TypeError) as exc:
        where = f" at offset {offset}" if offset is not None else ""
        logger.warning("%s: skipping corrupt line%s: %s", path, where, exc)
        return None


class TranscriptReader(Iterator[tuple[int, TranscriptLine]]):
    """Yields `(offset, line)` for each whole line from a start offset; `next_offset` is the watermark.

    `next_offset` is the byte just past the last newline-terminated line this reader has handed
    out or skipped as corrupt, so storing it and resuming from it later never skips a line and
    never repeats one. A torn or still-being-written last line (no newline yet) is not yielded
    and does not move the watermark: once an append repairs it with a newline, a later reader
    from the same watermark skips the corrupt remains and reads the line that followed.
    """

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.next_offset = offset
        self._lines = self._read()

    def __iter__(self) -> TranscriptReader:
        return self

    def __next__(self) -> tuple[int, TranscriptLine]:
        return next(self._lines)

    def close(self) -> None:
        """Release the file now rather than when the reader is garbage-collected."""
        self._lines.close()

    def _read(self) -> Generator[tuple[int, TranscriptLine]]:
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return
        with f:
            f.seek(self.next_offset)
            for raw in f:
                offset = self.next_offset
                if not raw.endswith(b"\n"):
                    logger.warning(
                        "%s: skipping torn line at offset %d (%d bytes, no newline)", self.path, offset, len(raw)
                    )
                    return
                self.next_offset = offset + len(raw)
                if (line := _parse(self.path, raw, offset)) is not None:
                    yield offset, line


class TranscriptObserver(Protocol):
    """Told of every append and purge, in file order, while the scope's lock is held: keep it quick."""

    def appended(self, scope_id: str, lines: list[tuple[int, TranscriptLine]], end_before: int, end: int) -> None: ...

    def purged(self, scope_id: str) -> None: ...


class TranscriptStore:
    """Appends are fsync'd and serialised per scope; a torn last line is skipped on read.

    Serialised twice over: an asyncio.Lock per scope orders this process's tasks, and a `flock`
    on the transcript itself keeps a second process (a CLI import, a restarted gateway
    overlapping the old one) from writing between our reading the size and our write. Each
    scope's file stays open between appends (at most `max_open_files`): `close()` on shutdown.

    With `records` (transcripts/records.py) the lines are committed there first, and the files
    are this process's copy of them: see `take` and `_not_the_records`.
    """

    def __init__(
        self,
        root: Path,
        *,
        max_open_files: int = 128,
        records: LineRecord | None = None,
        from_record_only: bool = False,
    ) -> None:
        self.root = root
        self.records = records
        # with records: every line of these files came from the record (this home has served
        # this database before), so a file that is not its copy was purged through another process
        self.from_record_only = from_record_only
        self._next_seq: dict[str, int] = {}  # with records: each taken scope's next line number
        self._taken: set[str] = set()  # with records: scopes whose file this process made the record's
        self._locks: dict[str, asyncio.Lock] = {}
        self._files = FileAppender(max_open_files)
        self.pace = DiskPace()  # whether appends wait for the disk on the loop or in a thread
        self._counts: dict[str, tuple[int, int]] = {}  # scope_id -> (valid lines, offset counted up to)
        self.observers: list[TranscriptObserver] = []  # derived views kept current on append (the session)

    def path(self, scope_id: str) -> Path:
        return self.root / f"{scope_hash(scope_id)}.jsonl"

    def _old_lock_path(self, scope_id: str) -> Path:
        """Where a halo from before the flock on the transcript kept its lock file: purge removes it."""
        return self.root / f"{scope_hash(scope_id)}.jsonl.lock"

    def _lock(self, scope_id: str) -> asyncio.Lock:
        if (lock := self._locks.get(scope_id)) is None:
            lock = self._locks[scope_id] = asyncio.Lock()
        return lock

    def close(self) -> None:
        """Close the transcripts kept open. An append after this opens its file again."""
        self._files.close()

    async def append(self, line: TranscriptLine) -> int:
        """Append one line and return the byte offset where it starts.

        Returns only once the bytes are fsync'd: the message counts as accepted from then on.
        """
        return (await self.append_many([line]))[0]

    async def append_many(self, lines: list[TranscriptLine]) -> list[int]:
        """Append lines of one scope with one write and one fsync; their offsets, in order.

        With `records`, they are committed there first, in one statement: a failure there raises
        and the file does not get them. Observers hear of the lines under the scope's lock, so
        they see appends in file order.
        """
        if not lines:
            return []
        scope_id = lines[0].scope_id
        if any(line.scope_id != scope_id for line in lines):
            raise ValueError("append_many takes the lines of one scope")
        if self.records is not None:
            return await self._append_recorded(scope_id, lines)
        encoded = [_encode(line) for line in lines]
        async with self._lock(scope_id):
            return await self._write(scope_id, lines, encoded)

    async def _write(self, scope_id: str, lines: list[TranscriptLine], encoded: list[bytes]) -> list[int]:
        """Append to the scope's file and tell the observers; the scope's lock is held."""
        data, path = b"".join(encoded), self.path(scope_id)
        written = self._append_now(path, data) if self.pace.quick() else None
        if written is None:  # a slow disk lately, or another append of this file under way
            written = await asyncio.get_running_loop().run_in_executor(_APPENDERS, self._files.append, path, data)
        assert written is not None  # one that waits always writes
        end_before, first = written
        offsets, at = [], first
        for record in encoded:
            offsets.append(at)
            at += len(record)
        counted = self._counts.get(scope_id)
        if counted is not None and counted[1] == end_before:  # nothing unseen in between: keep it cheap
            self._counts[scope_id] = (counted[0] + len(lines), at)
        for observer in self.observers:
            observer.appended(scope_id, list(zip(offsets, lines, strict=True)), end_before, at)
        return offsets

    async def _append_recorded(self, scope_id: str, lines: list[TranscriptLine]) -> list[int]:
        assert self.records is not None
        texts = [line.to_json() for line in lines]
        async with self._lock(scope_id):
            for attempt in range(2):
                if scope_id not in self._next_seq:
                    await self._take(scope_id)
                first = self._next_seq[scope_id]
                recorded = [
                    RecordedLine(first + i, line.ts, text)
                    for i, (line, text) in enumerate(zip(lines, texts, strict=True))
                ]
                try:
                    await self.records.append(scope_id, recorded)
                    break
                except SeqTaken:  # another process wrote to the scope: catch up, and go after its lines
                    del self._next_seq[scope_id]
                    if attempt:
                        raise
                except BaseException:  # committed or not is unknown (a dropped connection, a cancel):
                    self._next_seq.pop(scope_id, None)  # the next use asks the record
                    raise
            self._next_seq[scope_id] = first + len(lines)
            try:
                return await self._write(scope_id, lines, [(text + "\n").encode("utf-8") for text in texts])
            except BaseException:
                self._next_seq.pop(scope_id, None)  # recorded, not mirrored: the next use takes the scope again
                raise

    async def ready(self, scope_id: str) -> None:
        """With `records`: take the scope once in this process, before its first use here (a home that
        is new or was away gets the scope's history). Without: nothing."""
        if self.records is None or scope_id in self._next_seq:
            return
        async with self._lock(scope_id):
            if scope_id not in self._next_seq:
                await self._take(scope_id)

    async def take(self, scope_id: str) -> None:
        """Bring the scope's file up to date from `records`: the lines from its line count on are
        appended (fsync'd) and the observers told, as an append would, once its last line is
        found to be the record's line of that number (else `_not_the_records`). For a process
        that takes the scope over; `ready` does it once per process on its own."""
        if self.records is None:
            return
        async with self._lock(scope_id):
            await self._take(scope_id)

    async def _take(self, scope_id: str) -> None:
        """Make the scope's file the record's: append what it lacks. A file that is not a copy of
        the record's first lines is dealt with first (`_not_the_records`)."""
        assert self.records is not None
        self._next_seq.pop(scope_id, None)
        have = await asyncio.to_thread(self.count, scope_id)
        # the record from the file's last line on: that line must be the record's, or the file is not its copy
        missing = await self.records.read_from(scope_id, have - 1) if have else await self.records.read_from(scope_id)
        if have:
            last = await asyncio.to_thread(self._last_line_blocking, scope_id)
            if missing and missing[0].seq == have - 1 and missing[0].json == last:
                missing = missing[1:]
            else:
                if await self._not_the_records(scope_id, have):
                    self._next_seq[scope_id] = have  # this home's own lines, now recorded as they are
                    self._taken.add(scope_id)
                    return
                have = 0
                missing = await self.records.read_from(scope_id)
        lines: list[TranscriptLine] = []
        encoded: list[bytes] = []
        for record in missing:
            if (line := _parse(self.path(scope_id), record.json.encode("utf-8"))) is not None:
                lines.append(line)
                encoded.append(record.json.encode("utf-8") + b"\n")
        if missing and missing[0].seq != have:
            logger.warning(
                "transcript of %s: the file has %d lines, the record resumes at %d", scope_id, have, missing[0].seq
            )
        if lines:
            await self._write(scope_id, lines, encoded)
        self._next_seq[scope_id] = max(have, missing[-1].seq + 1) if missing else have
        self._taken.add(scope_id)

    async def _not_the_records(self, scope_id: str, have: int) -> bool:
        """The scope's file is not a copy of the record's first lines. The record wins; what becomes
        of the file depends on where it came from:

        - from the record (this home has served this database before, or this process took the
          scope already): the scope was purged, or purged and written again, through another
          process. The file goes: no copy of a purged chat stays.
        - this home's own, from before `storage.url`, and the record has none of the scope: its
          lines are recorded as they are (as `halo storage migrate` would) and the file stays.
          Returns True then: nothing more to take.
        - this home's own, and the record holds another history of the scope: two homes kept one
          chat apart. The file is set aside (`<hash>.jsonl.aside-<time>`), never deleted.
        """
        assert self.records is not None
        if self.from_record_only or scope_id in self._taken:
            await asyncio.to_thread(self._purge_blocking, scope_id)
            logger.info("transcript of %s: purged through another process; this home's copy removed", scope_id)
        else:
            if await self.records.count(scope_id) == 0:
                own = await asyncio.to_thread(self._own_lines_blocking, scope_id)
                try:
                    await self.records.append(scope_id, own)
                except SeqTaken:  # another process began the scope meanwhile: two histories after all
                    pass
                else:
                    logger.info("transcript of %s: this home's %d lines recorded", scope_id, len(own))
                    return True
            aside = await asyncio.to_thread(self._set_aside_blocking, scope_id)
            logger.warning("transcript of %s: another history than the record's; set aside as %s", scope_id, aside)
        self._counts.pop(scope_id, None)
        for observer in self.observers:
            observer.purged(scope_id)
        return False

    def _last_line_blocking(self, scope_id: str) -> str | None:
        """The file's last valid line as the record keeps it (no newline), or None."""
        path = self.path(scope_id)
        for raw in complete_lines_reversed(path):
            if _parse(path, raw) is not None:
                return raw.decode("utf-8", errors="replace")
        return None

    def _own_lines_blocking(self, scope_id: str) -> list[RecordedLine]:
        """The file's valid lines, numbered as `count` counts them, as the record keeps them."""
        path, own = self.path(scope_id), list[RecordedLine]()
        with path.open("rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # a torn last line: not a line yet
                if (line := _parse(path, raw)) is not None:
                    own.append(RecordedLine(len(own), line.ts, raw[:-1].decode("utf-8", errors="replace")))
        return own

    def _append_now(self, path: Path, data: bytes) -> tuple[int, int] | None:
        """The append on the event loop (see DiskPace), or None if it would have to wait for another."""
        started = time.perf_counter()
        written = self._files.append(path, data, wait=False)
        self.pace.took(time.perf_counter() - started)  # a slow file creation counts: it held the loop too
        return written

    def read_from(self, scope_id: str, offset: int = 0) -> TranscriptReader:
        """Iterate `(offset, line)` from `offset` (0, or an offset this store handed out).

        Resume from `reader.next_offset`, not from the last yielded offset: see TranscriptReader.
        """
        return TranscriptReader(self.path(scope_id), offset)

    def tail(self, scope_id: str, n: int) -> list[TranscriptLine]:
        """The last `n` valid lines, oldest first; reads the file backwards, so big files cost the same."""
        path = self.path(scope_id)
        if n <= 0 or not path.exists():
            return []
        lines: list[TranscriptLine] = []
        for raw in complete_lines_reversed(path):
            if (line := _parse(path, raw)) is not None:
                lines.append(line)
                if len(lines) == n:
                    break
        lines.reverse()
        return lines

    def local_scope_ids(self) -> list[str]:
        """The scopes this home has a transcript file of (each file's first whole line names its
        scope): on PostgreSQL a process takes these with the record's, so a scope purged
        through another process leaves no copy here."""
        found: set[str] = set()
        for path in self.root.glob("*.jsonl"):
            reader = TranscriptReader(path)
            try:
                first = next(reader, None)
            finally:
                reader.close()
            if first is not None and path == self.path(first[1].scope_id):
                found.add(first[1].scope_id)
        return sorted(found)

    def count(self, scope_id: str) -> int:
        """Number of valid lines. Counted once, then only what was appended since (by anyone)."""
        path = self.path(scope_id)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            self._counts.pop(scope_id, None)
            return 0
        count, upto = self._counts.get(scope_id, (0, 0))
        if upto > size:  # the file was purged and written again
            count, upto = 0, 0
        if upto < size:
            reader = TranscriptReader(path, upto)
            count += sum(1 for _ in reader)
            upto = reader.next_offset
            self._counts[scope_id] = (count, upto)
        return count

    def exists(self, scope_id: str) -> bool:
        return self.path(scope_id).exists()

    def scope_ids(self) -> list[str]:
        """Every scope with a transcript, read from the first valid line (file names are hashes)."""
        if not self.root.is_dir():
            return []
        found: list[str] = []
        for path in sorted(self.root.glob("*.jsonl")):
            reader = TranscriptReader(path)
            first = next(reader, None)
            reader.close()
            if first is not None:
                found.append(first[1].scope_id)
        return sorted(found)

    async def purge(self, scope_id: str) -> bool:
        """Delete the scope's transcript (and an old lock file), in `records` first; True if a
        transcript existed.

        Destructive and final: callers must have asked for explicit confirmation. Taken under the
        scope's lock and the file's flock, so no append of ours or another process is half done in
        the file being deleted; another process's next append notices and starts a new file.
        """
        async with self._lock(scope_id):
            recorded = await self.records.purge(scope_id) if self.records is not None else 0
            existed = await asyncio.to_thread(self._purge_blocking, scope_id) or recorded > 0
            self._counts.pop(scope_id, None)
            if self.records is not None:
                self._next_seq[scope_id] = 0
                self._taken.add(scope_id)  # what the file holds from now on comes from the record
            for observer in self.observers:
                observer.purged(scope_id)
        return existed

    def _set_aside_blocking(self, scope_id: str) -> Path:
        """Keep the scope's file under another name (`<hash>.jsonl.aside-<time>`, which no reader
        takes for a transcript) and remove it from its place under its flock."""
        path = self.path(scope_id)
        aside = path.with_name(f"{path.name}.aside-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}")
        try:
            os.link(path, aside)  # the same bytes under a second name, at once
        except OSError:
            shutil.copy2(path, aside)  # a filesystem without hard links
        self._files.remove(path)
        return aside

    def _purge_blocking(self, scope_id: str) -> bool:
        existed = self._files.remove(self.path(scope_id))
        self._old_lock_path(scope_id).unlink(missing_ok=True)
        return existed
