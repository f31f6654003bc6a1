"""The move itself, whatever the direction: refuse a target that holds data (unless forced),
copy each part, then read the target back and compare counts and checksums with the source."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from halo.storage.move.digest import Digest
from halo.storage.move.part import MoveError, Part, Side

Progress = Callable[[str, int, int], None]  # the part, records done, records in all


@dataclass(frozen=True, slots=True)
class Moved:
    """One part's result: what the source held and what the target holds after the copy."""

    part: str
    source_records: int
    target_records: int
    source_checksum: str
    target_checksum: str

    @property
    def ok(self) -> bool:
        return self.source_records == self.target_records and self.source_checksum == self.target_checksum


class Unverified(MoveError):
    """The target, read back, differs from the source: the copy is thrown away."""

    def __init__(self, moved: list[Moved]) -> None:
        self.moved = moved
        wrong = ", ".join(m.part for m in moved if not m.ok)
        super().__init__(f"the copy does not match the source ({wrong}): nothing was changed")


async def occupied(parts: Sequence[Part], side: Side) -> list[tuple[str, int]]:
    """The parts that hold records on `side`, with how many."""
    found = [(part.name, await part.count(side)) for part in parts]
    return [(name, n) for name, n in found if n]


async def digest(part: Part, side: Side) -> Digest:
    summed = Digest(ordered=part.ordered)
    async for records in part.read(side):
        for record in records:
            summed.add(part.canonical(record))
    return summed


async def copy_parts(
    parts: Sequence[Part], source: Side, target: Side, progress: Progress | None = None
) -> list[Moved]:
    """Copy every part from `source` to `target` and verify it; raises `Unverified` (the
    caller then discards the target's changes) when any part differs."""
    moved: list[Moved] = []
    for part in reversed(parts):  # a table that refers to another is emptied first
        await part.prepare(target)
    for part in parts:
        total = await part.count(source)
        summed = Digest(ordered=part.ordered)
        done = 0
        if progress is not None:
            progress(part.name, 0, total)
        async for records in part.read(source):
            for record in records:
                summed.add(part.canonical(record))
            await part.write(target, records)
            done += len(records)
            if progress is not None:
                progress(part.name, done, total)
        await part.finish(target)
        copied = await digest(part, target)
        moved.append(Moved(part.name, summed.count, copied.count, summed.hexdigest(), copied.hexdigest()))
    if not all(m.ok for m in moved):
        raise Unverified(moved)
    return moved
