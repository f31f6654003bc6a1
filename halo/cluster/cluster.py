"""This process's part in serving a family together with others (PostgreSQL, `storage.url`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from halo.cluster.handoffs import Handoffs
from halo.cluster.leadership import Leadership
from halo.cluster.leases import Leases


@dataclass(slots=True)
class Cluster:
    """The node's leases (and heartbeat) and its handoffs; the leader lease's singletons are
    started by the inventory (halo/inventory.py), which knows them."""

    leases: Leases
    handoffs: Handoffs
    leadership: Leadership | None = field(default=None)

    async def start(self) -> None:
        await self.leases.start()
        await self.handoffs.start()

    async def lead(self, start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
        """Run the singletons (`start`, `stop`) while this node holds the leader lease."""
        self.leadership = Leadership(self.leases, start, stop)
        await self.leadership.start()

    async def stop(self, before_release: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop leading, finish what was handed here, then give the leases back. `before_release`:
        what must reach the store of record before another process may take these scopes (the
        memory writes still held back), awaited between the two."""
        if self.leadership is not None:
            await self.leadership.stop()
        await self.handoffs.stop()
        if before_release is not None:
            await before_release()
        await self.leases.stop()

    def status(self) -> dict[str, Any]:
        leading = self.leadership is not None and self.leadership.leading
        return {**self.leases.status(), **self.handoffs.status(), "leader": leading}
