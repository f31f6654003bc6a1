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
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

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


SYNCED = ".synced.json"  # in a scope's folder, or in memory/ for the family's own files


def synced_manifest(relative: str) -> str:
    """Which manifest keeps a recorded file's synced hash: its scope folder's, or the family's."""
    if relative.startswith(f"{SCOPES}/"):
        return "/".join(relative.split("/")[:3]) + "/" + SYNCED
    return f"memory/{SYNCED}"


class SyncedHashes:
    """What each recorded file of this home was when it last matched the record (its sha256),
    kept next to the files (`.synced.json`, which is not recorded). A file that differs from
    that was changed here since, by hand: a refresh carries it to the record rather than
    writing over it. Thread-safe; read and written a manifest at a time."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._guard = threading.Lock()

    def read(self, relative: str) -> str | None:
        """The synced sha256 of one file, None when this home never synced it."""
        with self._guard:
            return self._load(synced_manifest(relative)).get(relative)

    def matched(self, hashes: Mapping[str, str | None]) -> None:
        """These files now match the record with these hashes (None: gone from both)."""
        by_manifest: dict[str, dict[str, str | None]] = {}
        for relative, sha in hashes.items():
            by_manifest.setdefault(synced_manifest(relative), {})[relative] = sha
        with self._guard:
            for manifest, changes in by_manifest.items():
                if not (self.home / manifest).parent.is_dir():
                    continue  # the scope's folder is gone (purged): nothing to keep
                known = self._load(manifest)
                before = dict(known)
                for relative, sha in changes.items():
                    if sha is None:
                        known.pop(relative, None)
                    else:
                        known[relative] = sha
                if known != before:
                    write_local(self.home, MemoryFile.of(manifest, json.dumps(known, sort_keys=True)))

    def _load(self, manifest: str) -> dict[str, str]:
        text = read_local(self.home, manifest)
        try:
            found = json.loads(text) if text else {}
        except ValueError:
            return {}  # a torn manifest: every file counts as never synced, and the record wins
        return found if isinstance(found, dict) else {}


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What a refresh did: local paths it changed, and hand edits the record should get."""

    changed: list[str]
    hand_edited: list[MemoryFile]


def refresh(
    home: Path,
    wanted: Iterable[MemoryFile],
    under: str,
    *,
    remove_others: bool = True,
    synced: SyncedHashes | None = None,
) -> Refreshed:
    """Make the copy's files under `under` equal `wanted`: write those whose sha256 differs,
    and (`remove_others`) delete recorded files the record does not have.

    With `synced`, a file edited here by hand since it last matched the record is not written
    over: if the record still holds what was synced, the edit is returned for the record
    (`hand_edited`); if the record changed too, the record wins and the edit is kept beside
    the file (`<name>.aside-<time>`), never deleted."""
    wanted_by_path = {file.path: file for file in wanted}
    changed: list[str] = []
    hand_edited: list[MemoryFile] = []
    matched: dict[str, str | None] = {}
    present = {file.path: file.sha256 for file in local_files(home, under)} if remove_others else {}
    for path, file in sorted(wanted_by_path.items()):
        if not recorded(path):
            continue  # never write outside the memory, whatever a row says
        if remove_others:
            mine = present.get(path)
        else:
            text = read_local(home, path)
            mine = None if text is None else sha256_of(text)
        if mine != file.sha256 and mine is not None and synced is not None:
            base = synced.read(path)
            if base == file.sha256:  # the record is as synced: the change is this home's, by hand
                text = read_local(home, path)
                if text is not None:
                    hand_edited.append(MemoryFile.of(path, text))
                continue
            if base is not None and base != mine:  # changed on both sides: the record wins
                _set_aside(home, path)
        if mine != file.sha256:
            write_local(home, file)
            changed.append(path)
        matched[path] = file.sha256
    if remove_others:
        for path in sorted(present.keys() - wanted_by_path.keys()):
            (home / path).unlink(missing_ok=True)
            changed.append(path)
            matched[path] = None
    if synced is not None and matched:
        synced.matched(matched)
    return Refreshed(changed, hand_edited)


def _set_aside(home: Path, relative: str) -> None:
    path = home / relative
    aside = path.with_name(f"{path.name}.aside-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}")
    try:
        os.link(path, aside)  # the same bytes under a second name, at once
    except FileNotFoundError:
        return
    except OSError:
        shutil.copy2(path, aside)  # a filesystem without hard links
    logger.warning("%s: edited here and in the record; the record's kept, this home's as %s", relative, aside.name)
