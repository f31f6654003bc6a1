"""WriteBehind (transcripts/write_behind.py): records written later, together, in order."""

from __future__ import annotations

import asyncio

import pytest

from transcripts.write_behind import WriteBehind


async def test_items_gathered_are_written_together_in_order_and_a_flush_can_pick() -> None:
    batches: list[list[str]] = []

    async def write(batch: list[str]) -> None:
        batches.append(batch)

    later = WriteBehind(write, every=3600, what="lines")  # the timer never fires here: flushes decide
    for item in ("a:1", "b:1", "a:2"):
        later.add(item)
    await later.flush(only=lambda item: item.startswith("a"))  # a forget in scope a sees its lines first
    later.add("b:2")
    await later.close()
    assert batches == [["a:1", "a:2"], ["b:1", "b:2"]]


async def test_the_timer_writes_what_gathered_in_one_batch() -> None:
    written = asyncio.Event()
    batches: list[list[int]] = []

    async def write(batch: list[int]) -> None:
        batches.append(batch)
        written.set()

    later = WriteBehind(write, every=0, what="numbers")
    later.add(1)
    later.add(2)  # before the loop runs the timer: the same batch
    await asyncio.wait_for(written.wait(), timeout=10)
    assert batches == [[1, 2]]
    await later.close()


async def test_a_batch_that_cannot_be_written_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def write(batch: list[int]) -> None:
        raise OSError("disk full")

    later = WriteBehind(write, every=3600, what="rows")
    later.add(1)
    await later.close()
    assert "could not write 1 rows" in caplog.text
