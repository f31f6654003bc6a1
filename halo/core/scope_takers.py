"""What a process does when it takes a scope: the work that makes its local copies current.

On PostgreSQL the store of record is shared and the serving process holds what it uses in
memory (the transcript's lines, the markdown memory's rows) beside a local semantic index.
Before a process first uses a scope it runs each `ScopeTaker` once for it: for every scope
when it takes the family (`holding`, a part that runs while this process serves the family:
halo/parts.py), and in any case the first time this process uses it (`ensure`: a turn, the
admin API's memory routes); losing the family calls `release_all`, so the next use takes each
scope again. On the embedded store there are no takers and `ensure` returns at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Protocol


class ScopeTaker(Protocol):
    async def take(self, scope_id: str) -> None:
        """Bring this process's local state of the scope up to date with the store of record."""


class ScopeTakers:
    def __init__(self, takers: Sequence[ScopeTaker] = (), *, before_answering: Sequence[ScopeTaker] = ()) -> None:
        self.takers = list(takers)
        # work a crash may have left for whoever answers next in the scope (a distillation): run
        # before this process answers there, not for the admin API's or the CLI's own reads
        self.before_answering = list(before_answering)
        self._taken: set[str] = set()
        self._ready_to_answer: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    async def ensure(self, scope_id: str, *, answering: bool = True) -> None:
        """Take the scope unless this process has already taken it; callers at once wait for one
        take. `answering=False`: a read or a change of the admin API or the CLI, which does its
        own memory work and needs no catch-up first."""
        if not self.takers or (scope_id in self._ready_to_answer or (not answering and scope_id in self._taken)):
            return
        lock = self._locks.setdefault(scope_id, asyncio.Lock())
        async with lock:
            if scope_id not in self._taken:
                for taker in self.takers:
                    await taker.take(scope_id)
                self._taken.add(scope_id)
            if answering and scope_id not in self._ready_to_answer:
                for taker in self.before_answering:
                    await taker.take(scope_id)
                self._ready_to_answer.add(scope_id)
        self._locks.pop(scope_id, None)

    def release(self, scope_id: str) -> None:
        """This process no longer holds the scope (a lease lost, a purge): take it again before next use."""
        self._taken.discard(scope_id)
        self._ready_to_answer.discard(scope_id)

    def release_all(self) -> None:
        """This process no longer holds the family (or just took it): every scope is taken again."""
        self._taken.clear()
        self._ready_to_answer.clear()

    @asynccontextmanager
    async def holding(self, scope_ids: Callable[[], Awaitable[list[str]]]) -> AsyncIterator[None]:
        """This process took the family: every scope it has is taken now, and each is taken again
        after another process held the family."""
        self.release_all()
        for scope_id in await scope_ids():
            await self.ensure(scope_id)
        try:
            yield
        finally:
            self.release_all()  # another process writes them now: taken again before next use
