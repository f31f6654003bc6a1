"""Memory files in HALO_HOME are read once and again only when they change (`DiskMemory.text`)."""

from __future__ import annotations

import os
from pathlib import Path

from memory.store import DiskMemory


def test_an_edit_is_seen_even_within_the_same_mtime(tmp_path: Path):
    path = tmp_path / "SOUL.md"
    path.write_text("You are halo.")
    memory = DiskMemory(tmp_path)
    assert memory.text("SOUL.md") == "You are halo."
    before = path.stat()
    path.write_text("You are halo, and brief.")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # a coarse clock: same timestamp
    assert memory.text("SOUL.md") == "You are halo, and brief."


def test_an_unchanged_file_is_not_read_again(tmp_path: Path):
    path = tmp_path / "SOUL.md"
    path.write_text("facts")
    memory = DiskMemory(tmp_path)
    first = memory.text("SOUL.md")
    assert first == "facts"
    before = path.stat()
    path.write_text("FACTS")  # same size, and the same timestamp put back: looks unchanged
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = memory.text("SOUL.md")
    assert again == "facts" and again is first  # only the stat happened: the same text, not a new read


def test_a_missing_file_reads_as_none(tmp_path: Path):
    assert DiskMemory(tmp_path).text("SOUL.md") is None
