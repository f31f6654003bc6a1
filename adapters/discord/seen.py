"""What the Discord adapter must not forget across a reconnect or a restart (halo.db).

- Message ids it took in: a resumed gateway session may replay events, and Discord
  delivers at least once, so a message id is claimed before it is handled; a second
  delivery of the same id finds the claim and is dropped. Claiming first means a crash in
  the middle of a turn loses that one answer rather than risking two (Discord does not
  replay messages to a fresh session, so nothing would bring it back anyway).
"""

from __future__ import annotations

import time

from sqlalchemy import BigInteger, Column, Float, MetaData, Table, delete, select
from sqlalchemy.exc import IntegrityError

from halo.port import Tables

KEEP_SECONDS = 14 * 24 * 3600

metadata = MetaData()
messages_table = Table(
    "discord_messages",
    metadata,
    Column("message_id", BigInteger, primary_key=True, autoincrement=False),
    Column("at", Float, nullable=False),
)


class SeenMessages:
    def __init__(self, db: Tables) -> None:
        self.db = db

    async def claim(self, message_id: int) -> bool:
        """True the first time a message id is claimed, False ever after."""
        try:
            async with self.db.write(metadata) as conn:
                await conn.execute(messages_table.insert().values(message_id=message_id, at=time.time()))
        except IntegrityError:
            return False
        return True

    async def seen(self, message_id: int) -> bool:
        async with self.db.read(metadata) as conn:
            row = await conn.execute(
                select(messages_table.c.message_id).where(messages_table.c.message_id == message_id)
            )
            return row.first() is not None

    async def forget_old(self) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(delete(messages_table).where(messages_table.c.at < time.time() - KEEP_SECONDS))
