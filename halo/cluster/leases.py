"""Scope leases: which process serves a scope, so that per-scope order and a single writer hold
across processes.

A lease is a row (`scope_leases`: scope, node, expiry) taken with one statement — an insert
that, on conflict, takes the row over only when it has expired or is this node's already.
The heartbeat renews the node's row and every lease it holds in one statement, each
`lease_seconds / 3`; a turn on a scope this node holds costs no round trip: the lease is
checked against the local deadline the last renewal set. A node that stops beating (killed,
frozen, cut off) loses its scopes `lease_seconds` after its last beat, and whoever receives a
message for one of them takes it. Expiry is PostgreSQL's clock (`now()`), so the nodes' own
clocks never have to agree.

When this node takes a scope it did not hold, every `ScopeTaker` (halo/core/scope_takers.py)
brings its local mirror of that scope up to date (transcripts, memory) before the first turn
runs there; when it finds a lease lost, `on_lost` says so (the takers forget they took it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from halo.cluster.tables import metadata
from halo.core.scope_takers import ScopeTaker
from halo.storage import HaloDB

log = logging.getLogger(__name__)

LEADER = "halo:leader"  # the lease the singletons run under (no scope's id starts with `halo:`)


@dataclass(frozen=True, slots=True)
class Node:
    """This process, as the others see it."""

    id: str
    host: str
    address: str  # http://host:port of its admin server (the web chat)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @classmethod
    def here(cls, address: str) -> Node:
        return cls(uuid.uuid4().hex[:16], socket.gethostname(), address)


@dataclass(frozen=True, slots=True)
class NodeView:
    """A running node as /status shows it."""

    id: str
    host: str
    address: str
    started_at: datetime
    heartbeat_age: float  # seconds since its last beat, by PostgreSQL's clock
    scopes: int  # leases it holds (the leader lease not counted)
    leader: bool


TAKE = text(
    """
    INSERT INTO scope_leases (scope_id, node_id, expires_at, family_id)
    VALUES (:scope, :node, now() + make_interval(secs => :secs), :family)
    ON CONFLICT (scope_id) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at
    WHERE scope_leases.expires_at < now() OR scope_leases.node_id = excluded.node_id
    RETURNING node_id
    """
)
HOLDER = text("SELECT node_id FROM scope_leases WHERE scope_id = :scope AND expires_at >= now()")
BEAT = text(
    """
    WITH beat AS (UPDATE nodes SET heartbeat_at = now() WHERE node_id = :node)
    UPDATE scope_leases SET expires_at = now() + make_interval(secs => :secs)
    WHERE node_id = :node RETURNING scope_id
    """
)
JOIN = text(
    """
    INSERT INTO nodes (node_id, host, address, started_at, heartbeat_at, family_id)
    VALUES (:node, :host, :address, :started, now(), :family)
    """
)
GONE_FOR = 86400  # seconds: a node silent this long (killed, never restarted) is forgotten at the next join
FORGET = text(
    """
    WITH forgotten AS (
        DELETE FROM nodes WHERE heartbeat_at < now() - make_interval(secs => :gone) RETURNING node_id
    )
    DELETE FROM handoffs WHERE state = 'answered' AND created < now() - make_interval(secs => :gone)
    """
)
NODES = text(
    """
    SELECT n.node_id, n.host, n.address, n.started_at,
           extract(epoch FROM now() - n.heartbeat_at) AS age,
           count(l.scope_id) FILTER (WHERE l.scope_id <> :leader AND l.expires_at >= now()) AS scopes,
           bool_or(l.scope_id = :leader AND l.expires_at >= now()) AS leader
    FROM nodes n LEFT JOIN scope_leases l ON l.node_id = n.node_id
    GROUP BY n.node_id ORDER BY n.started_at
    """
)


class Leases:
    """This node's leases. `acquire(scope)` is the decision a message takes: None when this node
    serves the scope (held, or taken now), else the id of the node that does."""

    def __init__(
        self,
        db: HaloDB,
        node: Node,
        lease_seconds: float,
        takers: Sequence[ScopeTaker] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.node = node
        self.lease_seconds = lease_seconds
        self.takers = list(takers)
        self.clock = clock
        self.on_beat: list[Callable[[], Awaitable[None]]] = []  # after each beat: the leader, handoffs' poll
        self.on_lost: list[Callable[[str], None]] = []  # a scope another node took: its mirror is stale from now on
        self._held: dict[str, float] = {}  # scope → this process's deadline for it (monotonic)
        self._taking: dict[str, asyncio.Lock] = {}
        self._beating: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()

    @property
    def every(self) -> float:
        """Seconds between beats: a third of the lease, so two beats can fail before it lapses."""
        return self.lease_seconds / 3

    def holds(self, scope_id: str) -> bool:
        """This node serves the scope now (no round trip: the last renewal's deadline)."""
        deadline = self._held.get(scope_id)
        return deadline is not None and self.clock() < deadline

    def held(self) -> list[str]:
        return sorted(scope for scope in self._held if scope != LEADER and self.holds(scope))

    async def acquire(self, scope_id: str) -> str | None:
        """None when this node serves `scope_id` (after the takers brought it up to date when it
        was not held here); otherwise the node that holds it."""
        if self.holds(scope_id):
            return None
        async with self._taking.setdefault(scope_id, asyncio.Lock()):
            if self.holds(scope_id):
                return None
            holder = await self._take(scope_id)
            if holder is not None:
                return holder
            try:
                for taker in self.takers:
                    await taker.take(scope_id)
            except BaseException:  # not served from a stale mirror: the next message tries again
                self._held.pop(scope_id, None)
                raise
            return None

    async def _take(self, scope_id: str) -> str | None:
        """One attempt at the lease; None when it is now this node's."""
        asked = self.clock()
        params = {"scope": scope_id, "node": self.node.id, "secs": self.lease_seconds, "family": self.db.family_id}
        async with self.db.atomic(metadata) as conn:
            taken = (await conn.execute(TAKE, params)).first()
            if taken is not None:
                self._held[scope_id] = asked + self.lease_seconds
                return None
            if self._held.pop(scope_id, None) is not None:
                for lost in self.on_lost:
                    lost(scope_id)
            holder = (await conn.execute(HOLDER, {"scope": scope_id})).scalar()
        # expired between the two statements: try again next time (the caller hands over to nobody)
        return str(holder) if holder is not None else await self._take(scope_id)

    async def start(self) -> None:
        """Join and beat from now on."""
        await self.join()
        self._beating = asyncio.create_task(self._beat_forever(), name="lease heartbeat")

    async def join(self) -> None:
        """The node's row: the others see it running (its beats keep it fresh)."""
        node = self.node
        async with self.db.atomic(metadata) as conn:
            await conn.execute(
                JOIN,
                {
                    "node": node.id,
                    "host": node.host,
                    "address": node.address,
                    "started": node.started_at,
                    "family": self.db.family_id,
                },
            )
            await conn.execute(FORGET, {"gone": GONE_FOR})  # and outcomes whose origin died before reading them

    async def beat(self) -> None:
        """Renew the node's row and all its leases in one statement; a lease missing from the
        answer was lost (this node did not beat in time and another took it)."""
        asked = self.clock()
        async with self.db.atomic(metadata) as conn:
            renewed = {
                str(s) for s in (await conn.execute(BEAT, {"node": self.node.id, "secs": self.lease_seconds})).scalars()
            }
        deadline = asked + self.lease_seconds
        for scope_id, held_until in list(self._held.items()):
            if scope_id in renewed:
                self._held[scope_id] = max(held_until, deadline)
            elif held_until <= deadline:  # taken before this beat asked, and not renewed by it
                log.warning("the lease on %s was lost: another process serves it now", scope_id)
                del self._held[scope_id]
                for lost in self.on_lost:
                    lost(scope_id)

    async def _beat_forever(self) -> None:
        while not self._stopped.is_set():
            try:
                await self.beat()
                for then in self.on_beat:
                    await then()
            except Exception:  # PostgreSQL unreachable for a moment: the leases lapse if it lasts
                log.exception("heartbeat failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self.every)

    async def take_leader(self) -> bool:
        """Take or keep the leader lease (no takers: it has no mirror)."""
        if self.holds(LEADER):
            return True
        return await self._take(LEADER) is None

    async def nodes(self) -> list[NodeView]:
        """Every node that beat within the lease, oldest first."""
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(NODES, {"leader": LEADER})).all()
        return [
            NodeView(r.node_id, r.host, r.address, r.started_at, float(r.age), int(r.scopes), bool(r.leader))
            for r in rows
            if float(r.age) <= self.lease_seconds
        ]

    def status(self) -> dict[str, Any]:
        return {"node": self.node.id, "lease_seconds": self.lease_seconds, "scopes_held": len(self.held())}

    async def stop(self) -> None:
        """A clean stop: beat no more and give every lease back, so the others take them at once."""
        self._stopped.set()
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
        self._held.clear()
        async with self.db.atomic(metadata) as conn:
            await conn.execute(text("DELETE FROM scope_leases WHERE node_id = :node"), {"node": self.node.id})
            await conn.execute(text("DELETE FROM nodes WHERE node_id = :node"), {"node": self.node.id})
