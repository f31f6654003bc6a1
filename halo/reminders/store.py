"""The reminders table in halo.db, behind `ReminderStore`: the interface a PostgreSQL store
implements too.

A reminder is `pending` until it fires for the last time (`done`), is cancelled, or was too
late to send when halo came back (`missed`). `due_at` is when it goes next (quiet hours may
have moved it: `held`); `occurrence_at` is the time it was set for, from which a recurring
reminder's next time is counted. Firing changes the row and queues its messages in the same
transaction (`fire`), guarded by the `due_at` it was read with: a reminder is never sent twice.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text, func, insert, or_, select

from halo.db_conn import Conn
from halo.outbound import asks, outbox
from halo.outbound.asks import Option
from halo.outbound.outbox import Row
from halo.reminders.when import When
from halo.storage import HaloDB

State = Literal["pending", "done", "cancelled", "missed"]
PARENTS = "parents"  # a reminder for every parent
MAX_TEXT = 500

metadata = MetaData()
reminders_table = Table(
    "reminders",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("set_by", String(64), nullable=False, index=True),
    Column("target", String(64), nullable=False, index=True),  # a member id, or "parents"
    Column("text", Text, nullable=False),
    Column("scope_id", String(200), nullable=False),  # where it was set
    Column("created_at", Float, nullable=False),
    Column("due_at", Float, nullable=False),
    Column("occurrence_at", Float, nullable=False),
    Column("every", String(40)),  # a Recurrence ("mon-fri 07:30"), or null for once
    Column("urgent", Boolean, nullable=False, default=False),
    Column("held", Boolean, nullable=False, default=False),  # due_at was moved to the end of quiet hours
    Column("state", String(12), nullable=False, default="pending"),
    Column("fired", Integer, nullable=False, default=0),
    Column("last_fired_at", Float),
    Index("reminders_pending_due", "state", "due_at"),
)


@dataclass(frozen=True, slots=True)
class Reminder:
    id: int
    set_by: str
    target: str
    text: str
    scope_id: str
    created_at: datetime
    due_at: datetime
    occurrence_at: datetime
    every: str | None
    urgent: bool
    held: bool
    state: State
    fired: int
    last_fired_at: datetime | None

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "setBy": self.set_by,
            "target": self.target,
            "text": self.text,
            "scopeId": self.scope_id,
            "createdAt": self.created_at.isoformat(),
            "dueAt": self.due_at.isoformat(),
            "every": self.every,
            "urgent": self.urgent,
            "held": self.held,
            "state": self.state,
            "fired": self.fired,
            "lastFiredAt": self.last_fired_at.isoformat() if self.last_fired_at else None,
        }


@dataclass(frozen=True, slots=True)
class Message:
    """One message a firing queues: to `scope_id`, about `about` (the member it is for)."""

    scope_id: str
    text: str
    about: str | None = None
    options: Sequence[Option] = ()  # buttons under it (done · snooze), decided by `about`


@dataclass(frozen=True, slots=True)
class Firing:
    """What becomes of one due reminder: the messages it sends now, and its next state
    (`next_due` set: pending again, at that time; else `state`)."""

    reminder: Reminder
    messages: Sequence[Message]
    state: State = "done"
    next_due: datetime | None = None
    counts_as_fired: bool = True  # False for a missed one: only its setter is told


QueueIn = Callable[[Conn, Message], Awaitable[Row]]


def _sec(at: datetime) -> float:
    """Due times are whole seconds: they round-trip exactly, so `fire` can compare them."""
    return float(math.floor(at.timestamp()))


def _ts(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _reminder(r: object) -> Reminder:
    m = r._mapping  # type: ignore[attr-defined]
    return Reminder(
        id=m["id"],
        set_by=m["set_by"],
        target=m["target"],
        text=m["text"],
        scope_id=m["scope_id"],
        created_at=_ts(m["created_at"]),
        due_at=_ts(m["due_at"]),
        occurrence_at=_ts(m["occurrence_at"]),
        every=m["every"],
        urgent=bool(m["urgent"]),
        held=bool(m["held"]),
        state=m["state"],
        fired=m["fired"],
        last_fired_at=_ts(m["last_fired_at"]) if m["last_fired_at"] is not None else None,
    )


class ReminderStore:
    """Reads and writes of the reminders table; every write is one durable transaction."""

    def __init__(self, db: HaloDB) -> None:
        self.db = db

    async def add(
        self, *, set_by: str, target: str, text: str, scope_id: str, when: When, urgent: bool, now: datetime
    ) -> Reminder:
        due = _sec(when.first)
        async with self.db.write(metadata) as conn:
            result = await conn.execute(
                insert(reminders_table).values(
                    set_by=set_by,
                    target=target,
                    text=text,
                    scope_id=scope_id,
                    created_at=now.timestamp(),
                    due_at=due,
                    occurrence_at=due,
                    every=str(when.every) if when.every else None,
                    urgent=urgent,
                    held=False,
                    state="pending",
                    fired=0,
                )
            )
            number = int(result.inserted_primary_key[0])  # type: ignore[index]
        found = await self.get(number)
        assert found is not None
        return found

    async def get(self, reminder_id: int) -> Reminder | None:
        async with self.db.read(metadata) as conn:
            row = (await conn.execute(select(reminders_table).where(reminders_table.c.id == reminder_id))).first()
        return _reminder(row) if row is not None else None

    async def pending_for(self, member_id: str, *, is_parent: bool) -> builtins.list[Reminder]:
        """Pending reminders `member_id` set or is reminded by, soonest first: what /reminders numbers."""
        mine = or_(reminders_table.c.set_by == member_id, reminders_table.c.target == member_id)
        if is_parent:
            mine = or_(mine, reminders_table.c.target == PARENTS)
        return await self._select(mine, reminders_table.c.state == "pending")

    async def list(self, *, state: State | None = None, limit: int = 500) -> builtins.list[Reminder]:
        """Every reminder (for a parent's dashboard), soonest first."""
        return await self._select(*([reminders_table.c.state == state] if state else []), limit=limit)

    async def _select(self, *where: object, limit: int | None = None) -> builtins.list[Reminder]:
        query = select(reminders_table).order_by(reminders_table.c.due_at, reminders_table.c.id)
        for clause in where:
            query = query.where(clause)  # type: ignore[arg-type]
        if limit is not None:
            query = query.limit(limit)
        async with self.db.read(metadata) as conn:
            return [_reminder(r) for r in (await conn.execute(query)).all()]

    async def cancel(self, reminder_id: int) -> bool:
        """False when it is not pending (fired, cancelled, or no such reminder)."""
        async with self.db.write(metadata) as conn:
            changed = await conn.execute(
                reminders_table.update()
                .where(reminders_table.c.id == reminder_id, reminders_table.c.state == "pending")
                .values(state="cancelled")
            )
        return bool(changed.rowcount)

    async def due(self, now: datetime, limit: int = 200) -> builtins.list[Reminder]:
        """Pending reminders whose time has come, oldest due first."""
        query = (
            select(reminders_table)
            .where(reminders_table.c.state == "pending", reminders_table.c.due_at <= now.timestamp())
            .order_by(reminders_table.c.due_at, reminders_table.c.id)
            .limit(limit)
        )
        async with self.db.read(metadata) as conn:
            return [_reminder(r) for r in (await conn.execute(query)).all()]

    async def next_due(self) -> datetime | None:
        async with self.db.read(metadata) as conn:
            found = (
                await conn.execute(
                    select(func.min(reminders_table.c.due_at)).where(reminders_table.c.state == "pending")
                )
            ).scalar()
        return _ts(found) if found is not None else None

    async def hold(self, reminder: Reminder, until: datetime) -> bool:
        """Quiet hours: it goes at `until` instead. False when it changed since it was read."""
        async with self.db.write(metadata) as conn:
            changed = await conn.execute(self._unchanged(reminder).values(due_at=_sec(until), held=True))
        return bool(changed.rowcount)

    async def fire(self, firings: Sequence[Firing], queue_in: QueueIn, now: datetime) -> builtins.list[Row]:
        """Each firing's new state and its messages, all in one transaction. A reminder that
        changed since it was read (cancelled, fired elsewhere) is skipped with its messages."""
        queued: builtins.list[Row] = []
        async with self.db.write(metadata, outbox.metadata, asks.metadata) as conn:
            for firing in firings:
                values: dict[str, object] = {"held": False}
                if firing.next_due is not None:
                    next_due = _sec(firing.next_due)
                    values.update(state="pending", due_at=next_due, occurrence_at=next_due)
                else:
                    values["state"] = firing.state
                if firing.counts_as_fired:
                    values.update(fired=reminders_table.c.fired + 1, last_fired_at=now.timestamp())
                changed = await conn.execute(self._unchanged(firing.reminder).values(**values))
                if not changed.rowcount:
                    continue
                for message in firing.messages:
                    queued.append(await queue_in(conn, message))
        return queued

    @staticmethod
    def _unchanged(reminder: Reminder):  # type: ignore[no-untyped-def]
        return reminders_table.update().where(
            reminders_table.c.id == reminder.id,
            reminders_table.c.state == "pending",
            reminders_table.c.due_at == _sec(reminder.due_at),
        )
