"""Writing memory files that people also edit by hand.

Every rewrite is atomic: the new text goes to a temp file in the same folder, is fsync'd and
renamed over the old one, so a reader (or a crash) sees the old file or the new one, never
half of it. Every change is a function of the file as it is *now*: `update_text` reads the
file, applies the change, and before renaming checks that nobody (a parent in an editor)
changed the file meanwhile; if they did, it starts again from their version. A stale copy
never overwrites a hand edit. (The one exception to temp-and-rename is `append_line_block`,
for the per-turn daily log: it only ever adds lines at the end.)

Writers of one scope are serialised by `scope_lock` (a file lock, so `halo distill` in a
terminal and a running `halo serve` take turns).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from transcripts.store import fsync_dir
from transcripts.text import clean_text

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
MAX_ATTEMPTS = 5

Transform = Callable[[str], str]


class ConcurrentEditError(RuntimeError):
    """The file kept changing under us; nothing was written (a later run tries again)."""


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def atomic_write(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace `path` with `text` all at once (temp file, fsync, rename, fsync the folder).

    `durable=False` skips the fsyncs for files derived from the transcript (scope.json, a new
    day's log): still all-or-nothing for readers, and a power cut costs only what can be rebuilt.
    Every fsync also slows the transcript's own, so the per-turn path avoids them.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(clean_text(text).encode("utf-8"))
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def append_line_block(path: Path, text: str) -> int:
    """Add whole lines at the end in one O_APPEND write: nothing already there is rewritten, so a
    concurrent hand edit cannot be lost. No fsync: use it only for text derived from the
    fsync'd transcript (the daily log), where losing the last lines to a power cut is harmless.
    Returns the file's size after the write."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        view = memoryview(clean_text(text).encode("utf-8"))
        while view:
            view = view[os.write(fd, view) :]
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    return size


def update_text(path: Path, transform: Transform, *, durable: bool = True) -> tuple[str, str]:
    """Apply `transform` to the current text and write the result; returns (before, after).

    The file is read again just before the rename; if it changed since `transform` saw it,
    the change is redone on the fresh text. No write happens when nothing changed.
    """
    for _ in range(MAX_ATTEMPTS):
        before = read_text(path)
        after = transform(before)
        if after == before:
            return before, after
        if read_text(path) != before:  # edited meanwhile: redo the change on their version
            log.info("%s changed while we were updating it; applying the change again", path)
            continue
        atomic_write(path, after, durable=durable)
        return before, after
    raise ConcurrentEditError(f"{path} kept changing; will try again later")


def remove_stale_temps(folder: Path) -> int:
    """Temp files left by a crash mid-write (their target is intact); removed under the scope lock."""
    removed = 0
    if not folder.is_dir():
        return 0
    for tmp in (*folder.glob(f".*{TMP_SUFFIX}"), *folder.glob(f"*/.*{TMP_SUFFIX}")):
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed


class ScopeLock:
    """One writer per scope: a thread lock within this process (writes run in worker threads),
    and a file lock across processes (`halo distill` next to a running `halo serve`).
    Reentrant in the thread that holds it."""

    def __init__(self, scope_dir: Path) -> None:
        self.path = scope_dir / ".lock"
        self._thread = threading.RLock()
        self._file = FileLock(self.path, mode=0o600, thread_local=False, poll_interval=0.005)

    def __enter__(self) -> ScopeLock:
        self._thread.acquire()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file.acquire()
        except BaseException:
            self._thread.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._file.release()
        finally:
            self._thread.release()
