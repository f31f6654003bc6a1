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
import time
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from config.paths import scope_hash
from transcripts._held_lines import HeldLines
from transcripts._lines import complete_lines_reversed_at
from transcripts.appender import FileAppender
from transcripts.disk_pace import DiskPace
from transcripts.jsonl import fsync_dir
from transcripts.lines import TranscriptLine, parse_json
from transcripts.records import RecordedLine

__all__ = ["TranscriptLine", "TranscriptReader", "TranscriptStore", "fsync_dir"]

logger = logging.getLogger(__name__)

# When the disk is slow (DiskPace), appends wait on it in threads of their own, so scopes fsync side by
# side (the filesystem journal commits concurrent fsyncs together: group commit) and never queue behind
# other to_thread work. Threads start only as appends need them; one pool for every store in the process.
_APPENDERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="transcript-append")


def _encode(line: TranscriptLine) -> bytes:
    return line.to_json().encode("utf-8") + b"\n"  # TranscriptLine repaired what UTF-8 cannot hold


def one_scope(lines: list[TranscriptLine]) -> str:
    """The scope every one of `lines` belongs to: an append is of one scope's lines."""
    scope_id = lines[0].scope_id
    if any(line.scope_id != scope_id for line in lines):
        raise ValueError("append_many takes the lines of one scope")
    return scope_id


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

    def __init__(self, path: Path, offset: int = 0, *, held: HeldLines | None = None) -> None:
        self.path = path  # with `held`, only named in warnings
        self.next_offset = offset
        self.lines_passed = 0  # newline-terminated lines read so far, blank and corrupt ones included
        self._lines = self._read() if held is None else self._read_held(held)

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
                self.lines_passed += 1
                if (line := _parse(self.path, raw, offset)) is not None:
                    yield offset, line

    def _read_held(self, held: HeldLines) -> Generator[tuple[int, TranscriptLine]]:
        for offset, raw in held.from_offset(self.next_offset):
            self.next_offset = offset + len(raw)
            self.lines_passed += 1
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

    This is the embedded store: the files are the record. On PostgreSQL, `RecordedTranscripts`
    (transcripts/recorded.py) keeps the same interface with the lines in the database and in
    memory, and no file.
    """

    def __init__(self, root: Path, *, max_open_files: int = 128) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}
        self._files = FileAppender(max_open_files)
        self.pace = DiskPace()  # whether appends wait for the disk on the loop or in a thread
        self._counts: dict[str, tuple[int, int]] = {}  # scope_id -> (valid lines, offset counted up to)
        self._named: dict[str, str] = {}  # file name -> the scope its first line names (read once)
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

        Observers hear of the lines under the scope's lock, so they see appends in file order.
        """
        if not lines:
            return []
        scope_id = one_scope(lines)
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
        return self._appended(scope_id, lines, encoded, *written)

    def _appended(
        self, scope_id: str, lines: list[TranscriptLine], encoded: list[bytes], end_before: int, first: int
    ) -> list[int]:
        """The lines' offsets, once written at `first`; the count kept and the observers told."""
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

    async def ready(self, scope_id: str) -> None:
        """Make the scope readable here before its first use. The files are the record: nothing to do."""

    async def take(self, scope_id: str) -> None:
        """Bring the scope up to date with the record, for a process taking it over. Files: nothing to do."""

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

    def raw_reversed(self, scope_id: str) -> Iterator[tuple[int, bytes]]:
        """`(offset, raw line without its newline)` of each whole line, the last first; a tail
        costs the tail, not the transcript."""
        path = self.path(scope_id)
        try:
            yield from complete_lines_reversed_at(path)
        except FileNotFoundError:
            return

    def tail(self, scope_id: str, n: int) -> list[TranscriptLine]:
        """The last `n` valid lines, oldest first; read backwards, so big transcripts cost the same."""
        if n <= 0:
            return []
        path, lines = self.path(scope_id), list[TranscriptLine]()
        for offset, raw in self.raw_reversed(scope_id):
            if (line := _parse(path, raw, offset)) is not None:
                lines.append(line)
                if len(lines) == n:
                    break
        lines.reverse()
        return lines

    def size(self, scope_id: str) -> int:
        """The offset just past the transcript's last byte (0 without one): where the next line goes."""
        try:
            return self.path(scope_id).stat().st_size
        except FileNotFoundError:
            return 0

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

    def scope_ids(self, written_since: float | None = None) -> list[str]:
        """Every scope with a transcript, read from the first valid line (file names are hashes);
        with `written_since` (a POSIX time), only those written to since then."""
        return sorted(scope_ids_in(self.root, written_since, self._named))

    async def purge(self, scope_id: str) -> bool:
        """Delete the scope's transcript (and an old lock file); True if a transcript existed.

        Destructive and final: callers must have asked for explicit confirmation. Taken under the
        scope's lock and the file's flock, so no append of ours or another process is half done in
        the file being deleted; another process's next append notices and starts a new file.
        """
        async with self._lock(scope_id):
            existed = await asyncio.to_thread(self._purge_blocking, scope_id)
            self._purged(scope_id)
        return existed

    def _purged(self, scope_id: str) -> None:
        self._counts.pop(scope_id, None)
        for observer in self.observers:
            observer.purged(scope_id)

    def _purge_blocking(self, scope_id: str) -> bool:
        existed = self._files.remove(self.path(scope_id))
        self._old_lock_path(scope_id).unlink(missing_ok=True)
        return existed


def scope_ids_in(
    root: Path, written_since: float | None = None, named: dict[str, str] | None = None
) -> dict[str, Path]:
    """The transcript files under `root` by the scope each one's first valid line names (file
    names are hashes), skipping one not written since `written_since` when given. `named`
    remembers each file's scope between calls."""
    found: dict[str, Path] = {}
    named = {} if named is None else named
    for path in sorted(root.glob("*.jsonl")) if root.is_dir() else []:
        if written_since is not None:
            try:
                if path.stat().st_mtime < written_since:
                    continue
            except FileNotFoundError:
                continue
        if (scope_id := named.get(path.name)) is None:
            reader = TranscriptReader(path)
            try:
                first = next(reader, None)
            finally:
                reader.close()
            if first is None or path.name != f"{scope_hash(first[1].scope_id)}.jsonl":
                continue
            scope_id = named[path.name] = first[1].scope_id
        found[scope_id] = path
    return found


def recorded_lines(path: Path) -> Iterator[tuple[TranscriptLine, RecordedLine]]:
    """A transcript file's valid lines, numbered as `TranscriptStore.count` counts them, each as
    the record keeps it (its bytes, without the newline): how a file becomes rows, for
    `halo storage migrate` and for a home's first take on PostgreSQL. A torn last line is not one."""
    seq = 0
    with path.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            if (line := _parse(path, raw)) is not None:
                yield line, RecordedLine(seq, line.ts, raw[:-1].decode("utf-8", errors="replace"))
                seq += 1
