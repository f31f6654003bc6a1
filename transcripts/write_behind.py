"""Writes that may wait a moment: gathered, and written together about once a second.

For records derived from something already durable (a reply's outbox row, the daily log's
lines: both stand in the fsync'd transcript), so the message path never waits for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class WriteBehind(Generic[T]):
    """Items written later, together: the first one waiting starts a timer of `every` seconds,
    and `write` gets all that gathered by then, in the order they came. `flush` writes now
    (all, or the ones `only` picks), waiting for a batch being written, so order holds."""

    def __init__(self, write: Callable[[list[T]], Awaitable[None]], every: float, what: str) -> None:
        self._write = write
        self.every = every
        self.what = what  # for the log, when a batch cannot be written
        self._waiting: list[T] = []
        self._timer: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()

    def add(self, item: T) -> None:
        self._waiting.append(item)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._soon())

    async def _soon(self) -> None:
        await asyncio.sleep(self.every)
        self._timer = None
        await self.flush()

    async def flush(self, only: Callable[[T], bool] | None = None) -> None:
        async with self._writing:
            if only is None:
                batch, self._waiting = self._waiting, []
            else:
                batch = [item for item in self._waiting if only(item)]
                self._waiting = [item for item in self._waiting if not only(item)]
            if not batch:
                return
            try:
                await self._write(batch)
            except Exception:  # derived records: the source stands, only this copy is missing
                log.exception("could not write %d %s", len(batch), self.what)

    async def close(self) -> None:
        """Stop the timer and write what waits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self.flush()
