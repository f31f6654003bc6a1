"""Writes that may wait a moment: gathered, and written together about once a second.

For records derived from something already durable (a reply's outbox row, the daily log's
lines: both stand in the fsync'd transcript), so the message path never waits for them; and
for the audit events on PostgreSQL, which have no other copy: those are kept while the
database cannot be reached (`keep`) and written once it is back.
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
    (all, or the ones `only` picks), waiting for a batch being written, so order holds.

    A batch that cannot be written is logged and dropped, unless `again(error)` says the
    failure will pass (the database away, not refusing the rows): then it waits again, first
    in line, and is tried every `every` seconds, at most `keep` items waiting (the oldest
    dropped beyond that, counted, and said in one warning when writing works again)."""

    def __init__(
        self,
        write: Callable[[list[T]], Awaitable[None]],
        every: float,
        what: str,
        *,
        keep: int = 0,
        again: Callable[[Exception], bool] = lambda error: False,
    ) -> None:
        self._write = write
        self.every = every
        self.what = what  # for the log, when a batch cannot be written
        self.keep = keep
        self._again = again
        self._waiting: list[T] = []
        self._timer: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        self._failing = False  # the last write failed and its batch waits again
        self._dropped = 0  # the oldest, dropped beyond `keep` since writing last worked

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def add(self, item: T) -> None:
        self._waiting.append(item)
        self._bound()
        self._start()

    def _start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._soon())

    def _bound(self) -> None:
        over = len(self._waiting) - self.keep
        if self._failing and over > 0:
            del self._waiting[:over]
            self._dropped += over

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
            except Exception as error:
                if self.keep <= 0 or not self._again(error):  # derived records: only this copy is missing
                    log.exception("could not write %d %s", len(batch), self.what)
                    return
                if not self._failing:
                    cause = getattr(error, "orig", None) or error  # the driver's, not the statement and its rows
                    log.warning(
                        "could not write %d %s (%s: %s): kept (at most %d), tried again every %gs",
                        len(batch),
                        self.what,
                        type(cause).__name__,
                        cause,
                        self.keep,
                        self.every,
                    )
                self._failing = True
                self._waiting[:0] = batch
                self._bound()
                self._start()
                return
            if self._failing:
                log.warning("wrote %d %s again", len(batch), self.what)
                self._failing = False
            self._say_dropped()

    def _say_dropped(self) -> None:
        if self._dropped:
            log.warning(
                "dropped the oldest %d %s: more than %d waited while they could not be written",
                self._dropped,
                self.what,
                self.keep,
            )
            self._dropped = 0

    async def close(self) -> None:
        """Stop the timer and write what waits; what still cannot be written is said, and lost."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self.flush()
        if self._timer is not None:  # the flush failed and set a retry no one will wait for
            self._timer.cancel()
            self._timer = None
        self._say_dropped()
        if self._waiting:
            log.error("closing with %d %s not written: they are lost", len(self._waiting), self.what)
            self._waiting = []
