"""The markdown memory's store of record, when it is not the local disk.

With `storage.url` set, PostgreSQL keeps the markdown memory (SOUL.md, USER.md, each scope's
MEMORY.md, its sidecar, daily notes and documents) and every process's HALO_HOME holds a
mirror of it: the readers here keep reading local files, and every writer tells a
`FileRecord` what it changed so the record catches up. `memory` sits below `halo`, so it
names the record only as this protocol; halo/storage implements it.

Which files are recorded is decided here, by path relative to HALO_HOME (`recorded`):
scope.json (rewritten from the config by every process), the semantic index, locks and
temp files are not.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SOUL = "SOUL.md"
SCOPES = "memory/scopes"
_RECORDED = re.compile(
    r"^(?:SOUL\.md"
    r"|members/[^/.][^/]*/USER\.md"
    r"|memory/scopes/[0-9a-f]{16}/(?:[^/.][^/]*\.md|MEMORY\.meta\.json|daily/[^/.][^/]*\.md|files/[^/.][^/]*\.md))$"
)


class FileRecord(Protocol):
    """Where memory files are kept besides the local disk. Writers call it synchronously, from
    any thread, after the file on disk changed; the record reads the file as it is when it
    catches up (at least once a second), so ten writes of one file cost one upload."""

    def changed(self, path: Path) -> None:
        """`path` was written or deleted (a path outside what is recorded is ignored)."""

    def removed_folder(self, folder: Path) -> None:
        """Everything under `folder` is gone (a scope purged), locally or not."""

    async def flush(self) -> None:
        """Every change announced so far is in the record when this returns (or it raises)."""


_written_here: ContextVar[set[str] | None] = ContextVar("memory_written_here", default=None)


@contextmanager
def noting_writes() -> Iterator[set[str]]:
    """The recorded paths written inside this block, by it, the tasks it starts and the worker
    threads it hands work to (each copies the context). The gateway wraps a turn in it, so what
    the turn wrote can be in the record before the reply says it was done."""
    written: set[str] = set()
    token = _written_here.set(written)
    try:
        yield written
    finally:
        _written_here.reset(token)


def note_written(relative: str) -> None:
    """A `FileRecord` calls this for each recorded path it is told of."""
    if (written := _written_here.get()) is not None:
        written.add(relative)


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """One recorded file: its path relative to HALO_HOME (posix), its text and the text's sha256."""

    path: str
    content: str
    sha256: str

    @classmethod
    def of(cls, path: str, content: str) -> MemoryFile:
        """A NUL (a hand edit, a document's text) becomes U+FFFD: PostgreSQL's text cannot hold
        one, and one file must never stop every other from being stored."""
        storable = content.replace("\x00", "\ufffd")
        return cls(path, storable, sha256_of(storable))


def sha256_of(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def recorded(relative: str) -> bool:
    """Is this path (relative to HALO_HOME, posix) part of the markdown memory?"""
    return _RECORDED.match(relative) is not None


def scope_prefix(scope_hash: str) -> str:
    """The paths of one scope's files start with this."""
    return f"{SCOPES}/{scope_hash}/"


def family_wide(relative: str) -> bool:
    """SOUL.md and the members' USER.md: the family's, not one scope's."""
    return recorded(relative) and not relative.startswith(f"{SCOPES}/")


def local_files(home: Path, under: str = "") -> Iterator[MemoryFile]:
    """The recorded files on this disk (all, or those whose path starts with `under`)."""
    top = home / under if under else home
    if not top.is_dir():
        return
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(home).as_posix()
        if relative.startswith(under) and recorded(relative) and path.is_file():
            try:
                yield MemoryFile.of(relative, path.read_bytes().decode("utf-8", errors="replace"))
            except FileNotFoundError:
                continue


def read_local(home: Path, relative: str) -> str | None:
    """A recorded file's text, None when it does not exist."""
    try:
        return (home / relative).read_bytes().decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


def write_local(home: Path, file: MemoryFile) -> None:
    """Write a file of the record into the mirror exactly (temp file and rename, 0600, folders 0700)."""
    path = home / file.path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(file.content.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refresh(home: Path, wanted: Iterable[MemoryFile], under: str, *, remove_others: bool = True) -> list[str]:
    """Make the mirror's files under `under` equal `wanted`: write those whose sha256 differs,
    and (`remove_others`) delete recorded files the record does not have. Returns the paths changed."""
    wanted_by_path = {file.path: file for file in wanted}
    changed: list[str] = []
    present = {file.path: file.sha256 for file in local_files(home, under)} if remove_others else {}
    for path, file in sorted(wanted_by_path.items()):
        if not recorded(path):
            continue  # never write outside the memory, whatever a row says
        if remove_others:
            mine = present.get(path)
        else:
            text = read_local(home, path)
            mine = None if text is None else sha256_of(text)
        if mine != file.sha256:
            write_local(home, file)
            changed.append(path)
    if remove_others:
        for path in sorted(present.keys() - wanted_by_path.keys()):
            (home / path).unlink(missing_ok=True)
            changed.append(path)
    return changed
