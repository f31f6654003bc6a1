"""The files a move reads and writes besides halo.db: JSONL read forward a whole line at a
time, lines appended to a staged file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

from halo.storage.move.part import BATCH

T = TypeVar("T")


def complete_lines(path: Path) -> Iterator[bytes]:
    """The file's newline-terminated lines, without their newline. Bytes after the last
    newline are a torn record (a crash mid-append): never part of the data."""
    with path.open("rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                yield raw[:-1]


async def batches_of(records: Callable[[], Iterator[T]]) -> AsyncIterator[list[T]]:
    """`records()` read in a worker thread, handed out `BATCH` at a time: a big file never
    holds the event loop, nor all of it the memory."""
    iterator = await asyncio.to_thread(records)

    def take() -> list[T]:
        return [record for _, record in zip(range(BATCH), iterator, strict=False)]

    while batch := await asyncio.to_thread(take):
        yield batch


def append_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
