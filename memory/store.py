"""Where the markdown memory is kept: files in HALO_HOME (embedded), rows on PostgreSQL.

Every reader and writer of memory names a file by its path relative to HALO_HOME (posix:
`SOUL.md`, `members/<id>/USER.md`, `memory/scopes/<scope hash>/MEMORY.md`, its sidecar,
`daily/<day>.md` and `files/<name>.md`) and goes through a `MemoryStore`:

- `DiskMemory` (the embedded default): the files themselves, written atomically (memory.files)
  and edited by hand by a parent; a read costs a stat while a file is unchanged.
- on PostgreSQL, `halo.storage.memory_store.RowMemory`: the family's `memory_files` rows,
  held in memory by the process serving the family and written behind (no file).

`memory` sits below `halo`, so it names the rows' store only as this protocol. Which paths are
memory is decided here (`recorded`): scope.json (rewritten from the config), the semantic
index, locks and temp files are not.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Protocol

from config.paths import scope_hash
from memory.files import (
    ScopeLock,
    Transform,
    append_line_block,
    atomic_write,
    read_text,
    update_text,
)

SOUL = "SOUL.md"
SCOPES = "memory/scopes"
_RECORDED = re.compile(
    r"^(?:SOUL\.md"
    r"|members/[^/.][^/]*/USER\.md"
    r"|memory/scopes/[0-9a-f]{16}/(?:[^/.][^/]*\.md|MEMORY\.meta\.json|daily/[^/.][^/]*\.md|files/[^/.][^/]*\.md))$"
)


# --- the layout, relative to HALO_HOME (config.paths names the same files absolutely) ------


def user_md(member_id: str) -> str:
    return f"members/{member_id}/USER.md"


def scope_folder(scope_id: str) -> str:
    """The paths of one scope's files start with this."""
    return scope_prefix(scope_hash(scope_id))


def scope_prefix(hashed: str) -> str:
    return f"{SCOPES}/{hashed}/"


def memory_md(scope_id: str) -> str:
    return scope_folder(scope_id) + "MEMORY.md"


def memory_meta(scope_id: str) -> str:
    """The sidecar keeping what MEMORY.md's rendering leaves out (confidence, evidence, source)."""
    return scope_folder(scope_id) + "MEMORY.meta.json"


def daily_md(scope_id: str, day: date) -> str:
    return f"{scope_folder(scope_id)}daily/{day.isoformat()}.md"


def recorded(relative: str) -> bool:
    """Is this path (relative to HALO_HOME, posix) part of the markdown memory?"""
    return _RECORDED.match(relative) is not None


def family_wide(relative: str) -> bool:
    """SOUL.md and the members' USER.md: the family's, not one scope's."""
    return recorded(relative) and not relative.startswith(f"{SCOPES}/")


# --- files and their stamps ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """One memory file: its path relative to HALO_HOME (posix), its text and the text's sha256."""

    path: str
    content: str
    sha256: str

    @classmethod
    def of(cls, path: str, content: str) -> MemoryFile:
        text = storable(content)
        return cls(path, text, sha256_of(text))


def storable(content: str) -> str:
    """A NUL (a hand edit, a document's text) becomes U+FFFD: PostgreSQL's text cannot hold one,
    and one file must never stop every other from being stored."""
    return content.replace("\x00", "\ufffd")


def sha256_of(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a file last changed and its size in bytes: what the semantic index compares."""

    mtime: float
    size: int


class MemoryStore(Protocol):
    """The markdown memory, by relative path. Synchronous and thread-safe: writers run in worker
    threads under the scope's `lock`."""

    def text(self, relative: str) -> str | None:
        """The file's text, None when there is none. While a file is unchanged the same str
        object comes back, so a reader can keep what it derived from it (`is` tells)."""

    def stamp(self, relative: str) -> Stamp | None:
        """When the file last changed and its size, None when there is none."""

    def names(self, prefix: str) -> list[str]:
        """The memory files whose path starts with `prefix`, sorted."""

    def holds(self, relative: str) -> bool:
        """Can this process read and write the path now (PostgreSQL: only what it holds)?"""

    def write(self, relative: str, text: str, *, durable: bool = True) -> None:
        """Replace the file's text all at once (`durable=False`: text derived from the transcript,
        which a power cut may cost)."""

    def append(self, relative: str, block: str) -> int:
        """Add whole lines at the end of an existing file; its size in bytes after."""

    def update(self, relative: str, transform: Transform, *, durable: bool = True) -> tuple[str, str]:
        """Apply `transform` to the current text ("" for none) and write the result, redone on a
        newer text if the file changed meanwhile; (before, after). Nothing is written when equal."""

    def delete(self, relative: str) -> None: ...

    def delete_under(self, prefix: str) -> int:
        """Every memory file under `prefix` (a scope purged); how many there were."""

    def lock(self, scope_id: str) -> AbstractContextManager[object]:
        """One writer per scope (reentrant in its thread)."""

    def where(self, relative: str) -> str:
        """Where a person finds the file (a path, or the table that holds it)."""

    async def ready(self, scope_id: str | None) -> None:
        """The scope's files (None: none) and the family's own can be read and written here now."""

    async def flush(self) -> None:
        """Every change so far is in the store of record when this returns (or it raises)."""


_written_here: ContextVar[set[str] | None] = ContextVar("memory_written_here", default=None)


@contextmanager
def noting_writes() -> Iterator[set[str]]:
    """The memory paths written inside this block, by it, the tasks it starts and the worker
    threads it hands work to (each copies the context). The gateway wraps a turn in it, so what
    the turn wrote can be in the store of record before the reply says it was done."""
    written: set[str] = set()
    token = _written_here.set(written)
    try:
        yield written
    finally:
        _written_here.reset(token)


def note_written(relative: str) -> None:
    """A store calls this for each memory path it writes or deletes."""
    if (written := _written_here.get()) is not None:
        written.add(relative)


# --- the embedded store: files ------------------------------------------------------------

MAX_CACHED = 4096


class DiskMemory:
    """The memory as files in HALO_HOME, which a parent may edit by hand: every change is made
    on the file as it is now (memory.files), and a read re-reads a file only when its mtime or
    size changed (nanosecond mtime and size together catch an edit within one timestamp tick)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._cache: dict[str, tuple[tuple[int, int], str]] = {}
        self._locks: dict[str, ScopeLock] = {}
        self._guard = threading.Lock()

    def text(self, relative: str) -> str | None:
        path = self.home / relative
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        seen = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(relative)
        if cached is not None and cached[0] == seen:
            return cached[1]
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return None
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[relative] = (seen, text)
        return text

    def stamp(self, relative: str) -> Stamp | None:
        try:
            stat = (self.home / relative).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Stamp(stat.st_mtime, stat.st_size)

    def names(self, prefix: str) -> list[str]:
        return list(local_paths(self.home, prefix))

    def holds(self, relative: str) -> bool:
        return True

    def write(self, relative: str, text: str, *, durable: bool = True) -> None:
        atomic_write(self.home / relative, text, durable=durable)
        note_written(relative)

    def append(self, relative: str, block: str) -> int:
        size = append_line_block(self.home / relative, block)
        note_written(relative)
        return size

    def update(self, relative: str, transform: Transform, *, durable: bool = True) -> tuple[str, str]:
        before, after = update_text(self.home / relative, transform, durable=durable)
        if after != before:
            note_written(relative)
        return before, after

    def delete(self, relative: str) -> None:
        (self.home / relative).unlink(missing_ok=True)
        note_written(relative)

    def delete_under(self, prefix: str) -> int:
        names = self.names(prefix)
        for relative in names:
            self.delete(relative)
        for folder in sorted({(self.home / n).parent for n in names}, reverse=True):
            if folder != self.home / prefix.rstrip("/") and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()  # an emptied daily/ or files/
        return len(names)

    def lock(self, scope_id: str) -> ScopeLock:
        """A thread lock and a file lock: `halo distill` in a terminal takes turns with `halo serve`."""
        with self._guard:
            if (lock := self._locks.get(scope_id)) is None:
                lock = self._locks[scope_id] = ScopeLock(self.home / scope_folder(scope_id))
        return lock

    def where(self, relative: str) -> str:
        return str(self.home / relative)

    async def ready(self, scope_id: str | None) -> None:
        return None  # files are always there to read

    async def flush(self) -> None:
        return None  # each write is on disk when it returns


def local_paths(home: Path, under: str = "") -> Iterator[str]:
    """The paths of the memory files in a HALO_HOME (all, or those starting with `under`), sorted."""
    top = home / under if under else home
    if not top.is_dir():
        return
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(home).as_posix()
        if relative.startswith(under) and recorded(relative) and path.is_file():
            yield relative


def local_files(home: Path, under: str = "") -> Iterator[MemoryFile]:
    """The memory files in a HALO_HOME, with their text."""
    for relative in local_paths(home, under):
        try:
            yield MemoryFile.of(relative, (home / relative).read_bytes().decode("utf-8", errors="replace"))
        except FileNotFoundError:
            continue


def read_local(home: Path, relative: str) -> str | None:
    """A file's text in HALO_HOME, None when it does not exist."""
    text = read_text(home / relative)
    return text if text or (home / relative).is_file() else None


def write_local(home: Path, file: MemoryFile) -> None:
    """Write a memory file into HALO_HOME (all at once, 0600, folders 0700): an export or a move
    to the embedded store, whose files are fsync'd together afterwards."""
    path = home / file.path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, file.content, durable=False)
