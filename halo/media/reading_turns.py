"""Whose document is read now: one at a time per member, a few at a time for the family.

Each read is a process with a core and up to its memory limit; without a queue, eight
documents from four members are eight of them on a small machine. The rest wait their turn,
in the order they came (asyncio's locks and semaphores are fair), and the sender is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

YOURS_NEXT = "I'm reading another document of yours just now; this one is next."
OTHERS_FIRST = "I'm reading other documents just now; yours is next in line."


class ReadingTurns:
    def __init__(self, family_wide: int) -> None:
        self._family = asyncio.Semaphore(family_wide)
        self._own: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self.reading = 0  # documents being read now

    @asynccontextmanager
    async def turn(self, member: str, told: Callable[[str], Awaitable[None]]) -> AsyncIterator[None]:
        """Held while `member`'s document is read. When it must wait, `told` is awaited once
        first, with what to say to the sender."""
        own = self._own.setdefault(member, asyncio.Lock())
        self._users[member] = self._users.get(member, 0) + 1
        said = False
        try:
            if own.locked():
                await told(YOURS_NEXT)
                said = True
            async with own:
                if self._family.locked() and not said:
                    await told(OTHERS_FIRST)
                async with self._family:
                    self.reading += 1
                    try:
                        yield
                    finally:
                        self.reading -= 1
        finally:
            self._users[member] -= 1
            if not self._users[member]:  # nobody waiting: no lock kept per member forever
                del self._users[member], self._own[member]
