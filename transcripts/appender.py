"""Appends to many files through descriptors kept open between appends.

Opening, locking and closing a file (and a lock file beside it) cost more than the write and
fdatasync of a transcript append. Here one descriptor per file stays open, at most `max_open`
of them, the least recently used closed first. Another process appending to the same file (a
CLI import, an old gateway not yet gone) is kept out by `flock` on that descriptor around
reading the size and writing. A file unlinked or replaced meanwhile (a purge, ours or someone
else's) is noticed under the lock and opened again, so no append lands in a file that is gone.
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from transcripts.jsonl import write_record

# readable: the torn-line check reads the last byte; private: HALO_HOME is the family's
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_MODE = 0o600


@dataclass(slots=True)
class _Descriptor:
    fd: int
    # flock does not keep apart two threads on one descriptor: this does (a cancelled append's
    # thread can still be writing when the next append of that file starts)
    writing: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # appends holding it now: it is closed only once they are done
    dropped: bool = False  # out of the cache while in use: the last user closes it


def _open(path: Path) -> int:
    try:
        return os.open(path, _FLAGS, _MODE)
    except FileNotFoundError:  # the directory is not there yet (or was removed)
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, _FLAGS, _MODE)


def _size_if_current(fd: int, path: Path) -> int | None:
    """The file's size if `fd` is still the file at `path`; None once it was unlinked or replaced."""
    held = os.fstat(fd)
    if held.st_nlink == 0:
        return None
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return None
    if (named.st_ino, named.st_dev) != (held.st_ino, held.st_dev):
        return None
    return held.st_size


def _close_all(cache: OrderedDict[Path, _Descriptor]) -> None:
    for descriptor in cache.values():
        os.close(descriptor.fd)
    cache.clear()


class FileAppender:
    """Appends records to files, each through a descriptor kept open (at most `max_open` of them).

    Thread-safe: appends to different files run side by side, appends to one file one at a time.
    """

    def __init__(self, max_open: int = 128) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.max_open = max_open
        self._cache: OrderedDict[Path, _Descriptor] = OrderedDict()  # least recently used first
        self._mutex = threading.Lock()  # guards the cache and the users counts
        weakref.finalize(self, _close_all, self._cache)  # a store dropped without close() leaks nothing

    def append(self, path: Path, data: bytes, *, wait: bool = True) -> tuple[int, int] | None:
        """Append `data` (whole lines) durably. Returns (the file's size before, the record's offset);
        with `wait=False`, None instead of waiting for an append of the file already under way
        (another thread's, or another process's)."""
        descriptor = self._checkout(path)
        try:
            if not descriptor.writing.acquire(blocking=wait):
                return None
            try:
                while True:
                    try:
                        fcntl.flock(descriptor.fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        return None
                    try:
                        if (size := _size_if_current(descriptor.fd, path)) is not None:
                            return size, write_record(descriptor.fd, path, size, data)
                    finally:
                        fcntl.flock(descriptor.fd, fcntl.LOCK_UN)
                    stale, descriptor.fd = descriptor.fd, _open(path)  # no one else uses it: we are its user
                    os.close(stale)
            finally:
                descriptor.writing.release()
        finally:
            self._release(descriptor)

    def remove(self, path: Path) -> bool:
        """Unlink `path` under its flock, so no append (of any process) is half done in it; True if it existed."""
        self.forget(path)
        while True:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _size_if_current(fd, path) is not None:
                    path.unlink()
                    return True
            finally:
                os.close(fd)  # and with it the flock

    def forget(self, path: Path) -> None:
        """Close the descriptor of `path`, now or when the append using it is done."""
        with self._mutex:
            if (descriptor := self._cache.pop(path, None)) is not None:
                self._drop(descriptor)

    def close(self) -> None:
        """Close every descriptor. Appends after this open their files again."""
        with self._mutex:
            for descriptor in self._cache.values():
                self._drop(descriptor)
            self._cache.clear()

    def _checkout(self, path: Path) -> _Descriptor:
        with self._mutex:
            if (descriptor := self._cache.get(path)) is None:
                descriptor = self._cache[path] = _Descriptor(_open(path))
            else:
                self._cache.move_to_end(path)
            descriptor.users += 1
            self._close_idle_beyond_bound()
        return descriptor

    def _release(self, descriptor: _Descriptor) -> None:
        with self._mutex:
            descriptor.users -= 1
            if descriptor.dropped and not descriptor.users:
                os.close(descriptor.fd)
            self._close_idle_beyond_bound()

    def _close_idle_beyond_bound(self) -> None:
        """Close the least recently used descriptors no append is using, down to `max_open`."""
        excess = len(self._cache) - self.max_open
        if excess <= 0:
            return
        idle = list(islice((path for path, descriptor in self._cache.items() if not descriptor.users), excess))
        for path in idle:
            os.close(self._cache.pop(path).fd)

    def _drop(self, descriptor: _Descriptor) -> None:
        if descriptor.users:
            descriptor.dropped = True
        else:
            os.close(descriptor.fd)
