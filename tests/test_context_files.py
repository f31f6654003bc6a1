"""Context files are read once and again only when they change."""

from __future__ import annotations

import os
from pathlib import Path

from halo.context.builder import CachedFile


def test_an_edit_is_seen_even_within_the_same_mtime(tmp_path: Path):
    path = tmp_path / "SOUL.md"
    path.write_text("You are halo.")
    cached = CachedFile(path)
    assert cached.read() == "You are halo."
    before = path.stat()
    path.write_text("You are halo, and brief.")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # a coarse clock: same timestamp
    assert cached.read() == "You are halo, and brief."


def test_an_unchanged_file_is_not_read_again(tmp_path: Path):
    path = tmp_path / "MEMORY.md"
    path.write_text("facts")
    cached = CachedFile(path)
    assert cached.read() == "facts"
    before = path.stat()
    path.write_text("FACTS")  # same size, and the same timestamp put back: looks unchanged
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert cached.read() == "facts"  # only the stat happened


def test_a_missing_file_reads_as_empty(tmp_path: Path):
    assert CachedFile(tmp_path / "nope.md").read() == ""
