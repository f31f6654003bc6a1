"""A group chat halo is not configured for: one notice, then silence.

The first time halo is addressed in such a chat, or added to it, it says once how a parent
sets the chat up (the halo.yaml key and the chat's id) and stays quiet there after. Which
chats were told is kept in halo.db, so a restart does not repeat it.
"""

from __future__ import annotations

import time

from sqlalchemy import Column, Float, MetaData, String, Table
from sqlalchemy.exc import IntegrityError

from halo.core.envelope import Scope
from halo.outbound.delivery import Delivery
from halo.storage import HaloDB

metadata = MetaData()
noticed_table = Table(
    "unconfigured_chats_noticed",
    metadata,
    Column("scope_id", String(200), primary_key=True),
    Column("at", Float, nullable=False),
)

WHERE_TO_NAME_IT = {
    "telegram": "put its chat id {chat} under parents_group.telegram_chat_id (or family_group.telegram_chat_id)",
    "discord": "add {chat} to work.discord_channel_ids",
}


def unconfigured_notice(scope_id: str) -> str:
    platform, _, chat = scope_id.partition(":")
    how = WHERE_TO_NAME_IT.get(platform, "name chat {chat} in halo.yaml").format(chat=chat)
    return (
        "Hi! I'm this family's assistant. I don't work in this chat until a parent sets it up: "
        f"{how} in halo.yaml. Until then I stay quiet here."
    )


class UnconfiguredChats:
    """Tells each unconfigured group chat once, through the outbox, how to set it up."""

    def __init__(self, db: HaloDB, delivery: Delivery) -> None:
        self._db = db
        self._delivery = delivery

    async def tell_once(self, scope: Scope, *, reply_to: str | None = None) -> bool:
        """Queue the notice unless this chat was told before; True when it was queued now."""
        try:
            async with self._db.write(metadata) as conn:
                await conn.execute(noticed_table.insert().values(scope_id=scope.id, at=time.time()))
        except IntegrityError:
            return False
        await self._delivery.send(scope.id, unconfigured_notice(scope.id), kind="notice", reply_to=reply_to)
        return True
