"""The one way halo appends a JSONL record: transcripts, the audit log, the notification log.

One record is one newline-terminated line written through an O_APPEND descriptor, so it
lands whole at the end even with another process appending. A torn last line (a crash
mid-write) gets a newline first, so it never swallows the next record. `durable` waits for
the bytes (and, for a new file, its directory entry) to reach the disk.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

_fsync = getattr(os, "fdatasync", os.fsync)  # the size is the only metadata an append needs on disk


def append_line(path: Path, data: bytes, *, durable: bool = True) -> tuple[int, int]:
    """Append `data` (one record ending in a newline). Returns (the file's size before, the
    record's byte offset). The caller serialises appends to one file if it needs offsets."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        return size, write_record(fd, path, size, data, durable=durable)
    finally:
        os.close(fd)


def write_record(fd: int, path: Path, size: int, data: bytes, *, durable: bool = True) -> int:
    """Write `data` at the end of `fd` (readable, O_APPEND, `size` bytes long); the record's offset.

    The caller keeps other writers out between reading `size` and this write. A torn last line
    gets a newline first. `durable`: for a file that was empty, its directory entry too.
    """
    offset = size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        logger.warning("%s: last line is torn (crash?); starting a fresh line at %d", path, size)
        data = b"\n" + data
        offset = size + 1
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if durable:
        _fsync(fd)
        if size == 0:
            fsync_dir(path.parent)  # a new file is durable only once its directory entry is
    return offset


def fsync_dir(directory: Path) -> None:
    """Make a new or renamed file's directory entry durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the data itself is already on disk
    finally:
        os.close(fd)
