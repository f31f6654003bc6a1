"""The singletons — the chat apps' polling and gateways, the MQTT subscription, the schedules —
run on one process at a time: the one holding the leader lease (`halo:leader`, a lease like a
scope's, renewed by the same heartbeat). Each beat, a node that does not lead tries to take it;
a leader that finds it lost stops its singletons. When the leader dies, its lease lapses and
another node starts them within `lease_seconds` plus one beat."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from halo.cluster.leases import Leases

log = logging.getLogger(__name__)


class Leadership:
    def __init__(
        self,
        leases: Leases,
        start: Callable[[], Awaitable[None]],
        stop: Callable[[], Awaitable[None]],
    ) -> None:
        self.leases = leases
        self._start = start
        self._stop = stop
        self.leading = False

    async def start(self) -> None:
        """Lead now if nobody does, and look again on every beat."""
        await self.check()
        self.leases.on_beat.append(self.check)

    async def check(self) -> None:
        leading = await self.leases.take_leader()
        if leading and not self.leading:
            log.warning("this process (%s) leads now: it runs the chat apps and the schedules", self.leases.node.id)
            self.leading = True
            await self._start()
        elif not leading and self.leading:
            log.warning("this process (%s) no longer leads: its singletons stop", self.leases.node.id)
            self.leading = False
            await self._stop()

    async def stop(self) -> None:
        if self.leading:
            self.leading = False
            await self._stop()
