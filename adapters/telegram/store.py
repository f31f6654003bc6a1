"""What the Telegram adapter must not forget across a restart (tables in halo.db).

- Processed updates: Telegram delivers an update again until a later getUpdates confirms
  it, so after a crash it may arrive twice. An update id is recorded as processed in the
  same transaction that queues its replies: either both happened or neither did, and a
  processed update is never answered again.
- The outbox: every message halo sends waits here until Telegram accepted it. A message
  Telegram refuses outright (blocked, chat gone) is kept as `failed`, never dropped.
- Which unconfigured groups were told once that a parent must configure them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, MetaData, String, Table, Text, func, select

from adapters.telegram.format import split_message
from halo.port import Tables

KEEP_PROCESSED_SECONDS = 7 * 24 * 3600  # Telegram keeps unconfirmed updates for 24 hours

metadata = MetaData()
updates_table = Table(
    "telegram_updates",
    metadata,
    Column("update_id", BigInteger, primary_key=True, autoincrement=False),
    Column("done_at", Float, nullable=False),
)
outbox_table = Table(
    "telegram_outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("chat_id", BigInteger, nullable=False, index=True),
    Column("text", Text, nullable=False),
    Column("reply_to", BigInteger),
    Column("plain", Boolean, nullable=False, default=False),  # send without formatting
    Column("status", String(16), nullable=False, default="pending"),  # pending | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_try", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_error", Text),
)
notices_table = Table(
    "telegram_group_notices",
    metadata,
    Column("chat_id", BigInteger, primary_key=True, autoincrement=False),
    Column("at", Float, nullable=False),
)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A reply to queue: `reply_to` quotes the message it answers (in groups)."""

    chat_id: int
    text: str
    reply_to: int | None = None


@dataclass(frozen=True, slots=True)
class Queued:
    id: int
    chat_id: int
    text: str
    reply_to: int | None
    plain: bool
    attempts: int


def _rows(messages: list[Outgoing], now: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for message in messages:
        for n, piece in enumerate(split_message(message.text)):
            rows.append(
                {
                    "chat_id": message.chat_id,
                    "text": piece,
                    "reply_to": message.reply_to if n == 0 else None,
                    "plain": False,
                    "status": "pending",
                    "attempts": 0,
                    "next_try": now,
                    "created_at": now,
                }
            )
    return rows


class TelegramStore:
    def __init__(self, db: Tables) -> None:
        self.db = db

    async def seen(self, update_id: int) -> bool:
        async with self.db.read(metadata) as conn:
            found = await conn.execute(select(updates_table.c.update_id).where(updates_table.c.update_id == update_id))
            return found.first() is not None

    async def complete(self, update_id: int, replies: list[Outgoing]) -> bool:
        """Queue the replies and mark the update processed, atomically. False (nothing queued)
        when it had been processed already."""
        now = time.time()
        async with self.db.write(metadata) as conn:
            done = await conn.execute(select(updates_table.c.update_id).where(updates_table.c.update_id == update_id))
            if done.first() is not None:
                return False
            await conn.execute(updates_table.insert().values(update_id=update_id, done_at=now))
            if rows := _rows(replies, now):
                await conn.execute(outbox_table.insert(), rows)
        return True

    async def enqueue(self, messages: list[Outgoing]) -> None:
        if rows := _rows(messages, time.time()):
            async with self.db.write(metadata) as conn:
                await conn.execute(outbox_table.insert(), rows)

    async def first_notice(self, chat_id: int) -> bool:
        """True the first time it is asked about a chat, False ever after."""
        async with self.db.write(metadata) as conn:
            found = await conn.execute(select(notices_table.c.chat_id).where(notices_table.c.chat_id == chat_id))
            if found.first() is not None:
                return False
            await conn.execute(notices_table.insert().values(chat_id=chat_id, at=time.time()))
            return True

    async def next_for(self, chat_id: int, now: float) -> Queued | None:
        """The chat's oldest pending message if it is due. Later ones wait behind it: order holds."""
        async with self.db.read(metadata) as conn:
            row = (
                (
                    await conn.execute(
                        select(outbox_table)
                        .where(outbox_table.c.chat_id == chat_id, outbox_table.c.status == "pending")
                        .order_by(outbox_table.c.id)
                        .limit(1)
                    )
                )
                .mappings()
                .first()
            )
        if row is None or row["next_try"] > now:
            return None
        return Queued(row["id"], row["chat_id"], row["text"], row["reply_to"], row["plain"], row["attempts"])

    async def delivered(self, message_id: int) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(outbox_table.delete().where(outbox_table.c.id == message_id))

    async def retry_later(self, message_id: int, error: str, at: float) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(
                outbox_table.update()
                .where(outbox_table.c.id == message_id)
                .values(
                    attempts=outbox_table.c.attempts + 1,
                    next_try=at,
                    last_error=error[:500],
                )
            )

    async def failed(self, message_id: int, error: str) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(
                outbox_table.update()
                .where(outbox_table.c.id == message_id)
                .values(
                    status="failed",
                    attempts=outbox_table.c.attempts + 1,
                    last_error=error[:500],
                )
            )

    async def change(self, message_id: int, *, chat_id: int | None = None, plain: bool | None = None) -> None:
        """Send elsewhere (a group became a supergroup) or without formatting (Telegram refused it)."""
        values = {k: v for k, v in {"chat_id": chat_id, "plain": plain}.items() if v is not None}
        async with self.db.write(metadata) as conn:
            await conn.execute(outbox_table.update().where(outbox_table.c.id == message_id).values(**values))

    async def waiting(self) -> tuple[list[int], float | None]:
        """Chats with a pending message, and when the earliest of them is due."""
        async with self.db.read(metadata) as conn:
            rows = (
                await conn.execute(
                    select(outbox_table.c.chat_id, func.min(outbox_table.c.next_try))
                    .where(outbox_table.c.status == "pending")
                    .group_by(outbox_table.c.chat_id)
                )
            ).all()
        return [chat for chat, _ in rows], min((due for _, due in rows), default=None)

    async def counts(self) -> dict[str, int]:
        async with self.db.read(metadata) as conn:
            rows = (
                await conn.execute(select(outbox_table.c.status, func.count()).group_by(outbox_table.c.status))
            ).all()
        found = {status: int(n) for status, n in rows}
        return {"pending": found.get("pending", 0), "failed": found.get("failed", 0)}

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
