"""After the turn: distillation, indexing, compaction, usage run in the background, so they
never delay the reply; `drain` waits for them and for deliveries in flight (shutdown, tests)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from halo.core.turn import Turn
from halo.pipeline.reply import AfterTurnHook, Reply

if TYPE_CHECKING:
    from halo.outbound.delivery import Delivery
    from memory.service import MemoryService

log = logging.getLogger(__name__)


class AfterTurn:
    def __init__(self, hooks: Sequence[AfterTurnHook], memory: MemoryService, delivery: Delivery) -> None:
        self.hooks = list(hooks)  # each runs after every turn, in its own task
        self.memory = memory  # its log of pending work is flushed on drain
        self.delivery = delivery
        self._background: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """After-turn work not finished yet (a queue depth for /status)."""
        return len(self._background)

    def start(self, turn: Turn, reply: Reply) -> None:
        for hook in self.hooks:
            task = asyncio.create_task(self._run(hook, turn, reply))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for after-turn work and deliveries in flight."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.memory.flush_log()
        await self.delivery.drain()

    async def _run(self, hook: AfterTurnHook, turn: Turn, reply: Reply) -> None:
        try:
            await hook(turn, reply)
        except Exception:
            log.exception("after-turn hook %s failed for %s", getattr(hook, "__name__", hook), turn.scope.id)
