"""What the Telegram adapter must not forget across a restart (tables in halo.db).

- Processed updates: Telegram delivers an update again until a later getUpdates confirms
  it, so after a crash it may arrive twice. An update id is recorded as processed once its
  reply is queued in halo's outbox, and a processed update is never answered again.
"""

from __future__ import annotations

import time

from sqlalchemy import BigInteger, Column, Float, MetaData, Table, func, select

from halo.port import Tables

KEEP_PROCESSED_SECONDS = 7 * 24 * 3600  # Telegram keeps unconfirmed updates for 24 hours

metadata = MetaData()
updates_table = Table(
    "telegram_updates",
    metadata,
    Column("update_id", BigInteger, primary_key=True, autoincrement=False),
    Column("done_at", Float, nullable=False),
)


class TelegramStore:
    def __init__(self, db: Tables) -> None:
        self.db = db

    async def seen(self, update_id: int) -> bool:
        async with self.db.read(metadata) as conn:
            found = await conn.execute(select(updates_table.c.update_id).where(updates_table.c.update_id == update_id))
            return found.first() is not None

    async def complete(self, update_id: int) -> bool:
        """Mark the update processed (its reply is already in halo's outbox). False when it
        had been processed already."""
        async with self.db.write(metadata) as conn:
            done = await conn.execute(select(updates_table.c.update_id).where(updates_table.c.update_id == update_id))
            if done.first() is not None:
                return False
            await conn.execute(updates_table.insert().values(update_id=update_id, done_at=time.time()))
        return True

    async def last_update_id(self) -> int | None:
        async with self.db.read(metadata) as conn:
            return (await conn.execute(select(func.max(updates_table.c.update_id)))).scalar_one_or_none()

    async def forget_old_updates(self) -> None:
        """Processed ids older than Telegram could redeliver are not needed; the newest is kept."""
        newest = await self.last_update_id()
        async with self.db.write(metadata) as conn:
            await conn.execute(
                updates_table.delete().where(
                    updates_table.c.done_at < time.time() - KEEP_PROCESSED_SECONDS,
                    updates_table.c.update_id != (newest if newest is not None else -1),
                )
            )
