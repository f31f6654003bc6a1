"""This process's part in serving a family with others on PostgreSQL: active or warm standby.

Every `every` seconds (a third of the lease, at most one second) the process beats its
`nodes` row and then, when active, renews the family lease; as a standby, it looks whether
the lease is free and takes it. Taking it sets the fence's epoch (every write from then on
carries it) and runs `activate` (the adapters, the schedules, the outbox); losing it — the
renewal finds another holder, a write is refused with a newer epoch, or no renewal succeeded
for `lease_seconds` (PostgreSQL unreachable) — clears the epoch first, so nothing more is
written, then runs `deactivate`. Nothing here restarts the process: a standby that finds the
lease free again (the database back, the other process gone) takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import text

from halo.cluster.family_lease import FamilyLease, Holder, Node
from halo.cluster.tables import metadata
from halo.storage import Fence, HaloDB
from halo.storage.db import unreachable

log = logging.getLogger(__name__)

Role = Literal["active", "standby"]
Step = Callable[[], Awaitable[None]]

GONE_FOR = 86400  # seconds: a node silent this long (killed, never restarted) is forgotten at the next join
JOIN = text(
    """
    WITH forgotten AS (DELETE FROM nodes WHERE heartbeat_at < now() - make_interval(secs => :gone))
    INSERT INTO nodes (node_id, host, address, started_at, heartbeat_at, epoch, family_id)
    VALUES (:node, :host, :address, :started, now(), NULL, :family)
    ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now(), epoch = NULL
    """
)
BEAT = text(
    """
    INSERT INTO nodes (node_id, host, address, started_at, heartbeat_at, epoch, family_id)
    VALUES (:node, :host, :address, :started, now(), :epoch, :family)
    ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now(), epoch = excluded.epoch
    """
)
LEAVE = text("DELETE FROM nodes WHERE node_id = :node")
NODES = text(
    """
    SELECT n.node_id, n.host, n.address, n.started_at, n.epoch,
           extract(epoch FROM now() - n.heartbeat_at) AS age,
           (l.holder = n.node_id AND l.epoch = n.epoch AND l.expires_at >= now()) AS active
    FROM nodes n LEFT JOIN family_leases l ON l.family_id = n.family_id
    WHERE n.family_id = :family
    ORDER BY n.started_at
    """
)


@dataclass(frozen=True, slots=True)
class NodeView:
    """A process of the family as /status shows it."""

    id: str
    host: str
    address: str
    started_at: datetime
    role: Role
    epoch: int | None
    heartbeat_age: float  # seconds since its last beat, by PostgreSQL's clock


class Cluster:
    def __init__(self, db: HaloDB, node: Node, lease_seconds: float) -> None:
        self.db = db
        self.node = node
        self.lease_seconds = lease_seconds
        self.lease = FamilyLease(db, node, lease_seconds)
        self.fence = Fence()
        self.fence.on_refused.append(self._refused)
        self.epoch: int | None = None  # held now (the fence's, kept here for /status)
        self.holder: Holder | None = None  # the last look at the lease: where a standby forwards
        self.problem: str | None = None  # PostgreSQL unreachable, said plainly (/status, /livez)
        self.takes = 0
        self._activate: Step | None = None
        self._deactivate: Step | None = None
        self._renewed_at = 0.0  # monotonic time of the last good renewal
        self._switching = asyncio.Lock()
        self._loop: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._closing = False
        self.started = False  # never started (a CLI command, a test's halo): it acts alone, unfenced

    @property
    def every(self) -> float:
        """Seconds between beats: a third of the lease (two can fail before it lapses), at most 1 s
        so a standby notices a dead holder's session quickly."""
        return min(self.lease_seconds / 3, 1.0)

    @property
    def active(self) -> bool:
        return self.fence.epoch is not None

    @property
    def role(self) -> Role:
        return "active" if self.active else "standby"

    def active_address(self) -> str | None:
        """Where the active process answers (None: none holds the family, or this one does)."""
        holder = self.holder
        if self.active or holder is None or holder.free or holder.node_id in (None, self.node.id):
            return None
        return holder.address

    async def start(self, activate: Step, deactivate: Step) -> None:
        """Join as a standby, fence every write from now on, and beat; the first beat may make
        this process active at once (no other holds the family)."""
        self._activate, self._deactivate = activate, deactivate
        self.started = True
        self.db.fence = self.fence
        async with self.db.unfenced(metadata) as conn:  # the schema checked, the node's row in
            await conn.execute(JOIN, self._node_params() | {"gone": GONE_FOR})
        await self.beat()
        self._loop = asyncio.create_task(self._beat_forever(), name="family lease")

    def _node_params(self) -> dict[str, object]:
        node = self.node
        return {
            "node": node.id,
            "host": node.host,
            "address": node.address,
            "started": node.started_at,
            "family": self.db.family_id,
            "epoch": self.epoch,
        }

    async def beat(self) -> None:
        """One beat: renew (active) or look and take (standby), then the node's row."""
        try:
            if self.fence.epoch is not None:
                await self._renew(self.fence.epoch)
            elif self.epoch is None:
                await self._look()
            # else: giving the family up is under way; look again once it is done
            async with self.db.unfenced(metadata) as conn:
                await conn.execute(BEAT, self._node_params())
        except Exception as exc:
            await self._beat_failed(exc)
        else:
            if self.problem is not None:
                log.warning("PostgreSQL answers again")
                self.problem = None

    async def _renew(self, epoch: int) -> None:
        asked_at = time.monotonic()  # the lease runs from the renewal, which comes after this
        if await self.lease.renew(epoch):
            self._renewed_at = time.monotonic()
            self.fence.lapses_at = asked_at + self.lease_seconds
        else:
            self.fence.epoch = None
            self._in_background(self.give_up(f"another process took the family (this process had epoch {epoch})"))

    async def _look(self) -> None:
        self.holder = await self.lease.holder()
        if not self.holder.free or self._closing:
            return
        asked_at = time.monotonic()
        epoch = await self.lease.take()
        if epoch is None:
            return
        self._renewed_at = time.monotonic()
        self.fence.lapses_at = asked_at + self.lease_seconds
        self.takes += 1
        await self._become_active(int(epoch))
        self.holder = Holder(self.node.id, int(epoch), self.node.address, False)

    async def _beat_failed(self, exc: Exception) -> None:
        await self.lease.drop_session()
        if unreachable(exc):
            if self.problem is None:
                log.warning("PostgreSQL cannot be reached: %s", exc)
            self.problem = f"halo cannot reach its storage (PostgreSQL): {type(exc).__name__}"
            with contextlib.suppress(Exception):
                await self.db.engine.dispose()  # broken pooled connections go; new ones once it answers
        else:
            log.exception("the family lease's beat failed")
        if self.fence.epoch is not None and time.monotonic() - self._renewed_at > self.lease_seconds:
            self.fence.epoch = None  # at once; the adapters stop beside the beats (they may wait on the database)
            self._in_background(self.give_up(f"no renewal for {self.lease_seconds:g} s: {exc}"))

    async def _become_active(self, epoch: int) -> None:
        """Writes carry `epoch` from now on; the adapters and schedules start beside the beats
        (a slow start must not keep the lease from being renewed)."""
        log.warning("this process (%s) is active for family %s, epoch %d", self.node.id, self.db.family_id, epoch)
        self.epoch = self.fence.epoch = epoch
        self._in_background(self._run_activate(epoch))

    async def _run_activate(self, epoch: int) -> None:
        async with self._switching:
            if self.epoch != epoch or self._activate is None:
                return
            try:
                await self._activate()
            except Exception:
                log.exception("starting to serve the family failed")
                self._in_background(self.give_up("starting to serve the family failed"))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def activated(self) -> None:
        """Wait until what a take (or a loss) started has run (the bench, the clean stop)."""
        await asyncio.gather(*list(self._background), return_exceptions=True)
        async with self._switching:
            return

    async def give_up(self, why: str) -> None:
        """Stop writing at once (the fence), then stop the adapters and singletons."""
        if self.fence.epoch is None and self.epoch is None:
            return
        self.fence.epoch = None  # before anything awaits: no write goes out from here on
        async with self._switching:
            if self.epoch is None:
                return
            log.warning("this process (%s) is a standby now: %s", self.node.id, why)
            self.epoch = None
            if self._deactivate is not None and not self._closing:
                try:
                    await self._deactivate()
                except Exception:  # stopped as far as it could be: what failed is logged
                    log.exception("stopping the adapters and schedules failed")

    def _refused(self, found: int | None) -> None:
        """A write found the family at another epoch: this process is stale."""
        if self.epoch is not None and found != self.epoch:
            self._in_background(self.give_up(f"a write found epoch {found}"))

    async def _beat_forever(self) -> None:
        while not self._stopped.is_set():
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11 loses a cancel (test_background_loops_stop)
                async with asyncio.timeout(self.every):
                    await self._stopped.wait()
            if not self._stopped.is_set():
                try:
                    await self.beat()
                except Exception:  # the beat goes on whatever one of them met
                    log.exception("the family lease's beat failed")

    async def nodes(self) -> list[NodeView]:
        """The family's processes that beat within the lease, oldest first."""
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(NODES, {"family": self.db.family_id})).all()
        return [
            NodeView(
                r.node_id,
                r.host,
                r.address,
                r.started_at,
                "active" if r.active else "standby",
                None if r.epoch is None else int(r.epoch),
                float(r.age),
            )
            for r in rows
            if float(r.age) <= self.lease_seconds
        ]

    def status(self) -> dict[str, Any]:
        return {"node": self.node.id, "role": self.role, "epoch": self.epoch, "problem": self.problem}

    @contextlib.asynccontextmanager
    async def running(self, activate: Step, deactivate: Step) -> AsyncIterator[None]:
        """This process among the family's (`start`) until halo stops (`closing`); the lease
        itself lapses at `stop`, after every write of the stop."""
        await self.start(activate, deactivate)
        try:
            yield
        finally:
            await self.closing()

    async def closing(self) -> None:
        """halo is stopping: from now on nothing is taken and nothing started or stopped from here
        (the close stops the parts itself, writing under the epoch it still holds and renews)."""
        self._closing = True
        await self.activated()

    async def stop(self) -> None:
        """The end of a clean stop: beat no more, and let the lease lapse now for a standby."""
        self._closing = True
        self._stopped.set()
        if self._loop is not None:
            await asyncio.gather(self._loop, return_exceptions=True)
        await asyncio.gather(*self._background, return_exceptions=True)
        epoch = self.epoch
        await self.give_up("stopping")
        await asyncio.gather(*self._background, return_exceptions=True)
        with contextlib.suppress(Exception):  # unreachable: the lease lapses by itself
            if epoch is not None:
                await self.lease.release(epoch)
            async with self.db.unfenced(metadata) as conn:
                await conn.execute(LEAVE, {"node": self.node.id})
        await self.lease.close()
