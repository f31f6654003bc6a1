"""Reading newline-terminated JSONL records backwards, so a tail costs the tail and not the file."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

BLOCK_SIZE = 64 * 1024


def complete_lines_reversed(path: Path, block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """Yield the file's newline-terminated lines, last first, without their newline.

    Bytes after the last newline are a torn (or still being written) record: they are
    skipped with a warning, because only a newline says a record is whole.
    """
    for _, raw in complete_lines_reversed_at(path, block_size):
        yield raw


def complete_lines_reversed_at(path: Path, block_size: int = BLOCK_SIZE) -> Iterator[tuple[int, bytes]]:
    """As `complete_lines_reversed`, with each line's byte offset (the watermark a forward reader uses)."""
    with path.open("rb") as f:
        pos = f.seek(0, os.SEEK_END)
        carry = b""  # the start of a line whose beginning lies in an earlier block
        seen_newline = False
        line_end = pos  # offset just past the newline of the next line to yield
        while pos > 0:
            size = min(block_size, pos)
            pos -= size
            f.seek(pos)
            parts = (f.read(size) + carry).split(b"\n")
            carry = parts[0]
            if not seen_newline:
                if len(parts) == 1:
                    carry = b""  # all of it is still the torn tail
                    line_end = pos
                    continue
                seen_newline = True
                if parts[-1]:
                    logger.warning("%s: skipping %d torn bytes at the end", path, len(parts[-1]))
                line_end -= len(parts[-1])
                parts.pop()
            for raw in reversed(parts[1:]):
                line_end -= len(raw) + 1
                yield line_end, raw
        if seen_newline:
            yield line_end - len(carry) - 1, carry
