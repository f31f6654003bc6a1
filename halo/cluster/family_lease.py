"""The family lease: which process serves the family now, and the epoch its writes carry.

One row per family (`family_leases`). A take is one statement that locks the row `FOR UPDATE`
and, when the lease lapsed (PostgreSQL's clock) or the holder's session is gone (killed, cut
off: its `pg_backend_pid` left `pg_stat_activity`), makes this process the holder and raises
the epoch. Locking the row waits for the writes already past their epoch check (they hold it
`FOR KEY SHARE`, halo/storage/db.py), so everything written under the old epoch is committed
before the new one exists. The holder renews on its own session, which is what "the holder's
session" means; the renewal names the epoch, so a holder that was replaced finds no row.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import text

from halo.cluster.tables import metadata
from halo.storage import HaloDB

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection  # PostgreSQL only: the package loads the ORM

LOCK_WAIT = "2s"  # a take waits this long for writes in flight, then tries again on the next beat

ENSURE = text(
    """
    INSERT INTO family_leases (family_id, holder, epoch, expires_at, holder_pid)
    VALUES (:family, '', 0, now() - interval '1 second', 0)
    ON CONFLICT (family_id) DO NOTHING
    """
)
FREE = text(
    """
    SELECT l.holder, l.epoch, n.address,
           l.expires_at < now() OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid) AS free
    FROM family_leases l LEFT JOIN nodes n ON n.node_id = l.holder
    WHERE l.family_id = :family
    """
)
TAKE = text(
    """
    WITH lapsed AS (
        SELECT family_id FROM family_leases l
        WHERE l.family_id = :family AND (
            l.expires_at < now() OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid))
        FOR UPDATE
    )
    UPDATE family_leases l
    SET holder = :node, epoch = l.epoch + 1, expires_at = now() + make_interval(secs => :secs),
        holder_pid = pg_backend_pid()
    FROM lapsed WHERE l.family_id = lapsed.family_id
    RETURNING l.epoch
    """
)
RENEW = text(
    """
    UPDATE family_leases SET expires_at = now() + make_interval(secs => :secs), holder_pid = pg_backend_pid()
    WHERE family_id = :family AND holder = :node AND epoch = :epoch
    RETURNING epoch
    """
)
RELEASE = text(
    """
    UPDATE family_leases SET expires_at = now() - interval '1 second'
    WHERE family_id = :family AND holder = :node AND epoch = :epoch
    """
)


@dataclass(frozen=True, slots=True)
class Node:
    """This process, as the others see it."""

    id: str
    host: str
    address: str  # cluster.advertise_url: where a standby forwards requests to
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @classmethod
    def here(cls, address: str) -> Node:
        return cls(uuid.uuid4().hex[:16], socket.gethostname(), address)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the family, as a standby last saw it."""

    node_id: str | None
    epoch: int
    address: str | None
    free: bool


class FamilyLease:
    """Take, renew and give back the family, on a session of its own (its pid is the holder's)."""

    def __init__(self, db: HaloDB, node: Node, lease_seconds: float) -> None:
        self.db = db
        self.node = node
        self.lease_seconds = lease_seconds
        self._session: AsyncConnection | None = None

    async def _conn(self) -> AsyncConnection:
        if self._session is None or self._session.closed or self._session.invalidated:
            await self.drop_session()
            session = await self.db.engine.execution_options(isolation_level="AUTOCOMMIT").connect()
            await session.execute(text(f"SET lock_timeout = '{LOCK_WAIT}'"))
            self._session = session
        return self._session

    async def drop_session(self) -> None:
        """After an error: the next statement opens a new session (the old one may be broken)."""
        session, self._session = self._session, None
        if session is not None:
            try:
                await session.invalidate()
                await session.close()
            except Exception:
                pass

    def _params(self, epoch: int | None = None) -> dict[str, object]:
        return {"family": self.db.family_id, "node": self.node.id, "secs": self.lease_seconds, "epoch": epoch}

    async def holder(self) -> Holder:
        """Who holds the family now (one unlocked read: a standby's poll never gets in the active's way)."""
        conn = await self._conn()
        row = (await conn.execute(FREE, self._params())).first()
        if row is None:
            return Holder(None, 0, None, True)
        return Holder(row.holder or None, int(row.epoch), row.address, bool(row.free))

    async def take(self) -> int | None:
        """The new epoch when this process now holds the family; None when another holds it."""
        conn = await self._conn()
        await conn.execute(ENSURE, self._params())
        return (await conn.execute(TAKE, self._params())).scalar()

    async def renew(self, epoch: int) -> bool:
        """False when the family is no longer this process's at `epoch` (another took it)."""
        conn = await self._conn()
        return (await conn.execute(RENEW, self._params(epoch))).scalar() is not None

    async def release(self, epoch: int) -> None:
        """A clean stop: the lease lapses now, so a standby takes the family at its next poll."""
        conn = await self._conn()
        await conn.execute(RELEASE, self._params(epoch))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


__all__ = ["FamilyLease", "Holder", "Node", "metadata"]
