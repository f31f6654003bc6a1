"""The outbox table in halo.db: every message halo sends, written before its first attempt.

A row is `pending` until an adapter takes it (`sent`) or refuses it for good (`failed`); it
is never deleted, so a failure stays visible and the web inbox can be read from it. Rows of
one scope are delivered oldest first: a later one waits while an earlier one is retried.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, func, select, text

from halo.db_conn import Conn
from halo.port import Choice, Outbound, OutboundKind
from halo.storage import HaloDB

metadata = MetaData()
outbox_table = Table(
    "outbox",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),  # the order rows were queued in
    Column("id", String(32), nullable=False, unique=True),
    Column("scope_id", String(200), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("reply_to", String(64)),
    Column("in_reply_to_envelope", String(64)),
    Column("about", String(100)),  # the member an alert concerns
    Column("batch", String(32)),  # copies of one notification to several scopes share it
    Column("created", DateTime(timezone=True), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("state", String(8), nullable=False, default="pending", index=True),  # pending | sent | failed
    Column("last_error", Text),
    Column("choices", Text),  # JSON [[label, choice id], …]: the buttons under the message (halo/outbound/asks.py)
)


def _choices_json(choices: tuple[Choice, ...]) -> str | None:
    return json.dumps([[c.label, c.id] for c in choices]) if choices else None


def _choices(stored: str | None) -> tuple[Choice, ...]:
    return tuple(Choice(label, choice_id) for label, choice_id in json.loads(stored)) if stored else ()


@dataclass(frozen=True, slots=True)
class Row:
    """One queued message as stored; `message` is what the adapter is handed."""

    seq: int
    message: Outbound
    attempts: int
    next_attempt_at: datetime
    state: str
    about: str | None = None
    batch: str | None = None
    last_error: str | None = None


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # SQLite drops the zone


def _row(r: object) -> Row:
    m = r._mapping  # type: ignore[attr-defined]
    message = Outbound(
        m["id"],
        m["scope_id"],
        m["text"],
        kind=m["kind"],
        reply_to=m["reply_to"],
        in_reply_to_envelope=m["in_reply_to_envelope"],
        created_at=_aware(m["created"]),
        choices=_choices(m["choices"]),
    )
    return Row(
        m["seq"],
        message,
        m["attempts"],
        _aware(m["next_attempt_at"]),
        m["state"],
        m["about"],
        m["batch"],
        m["last_error"],
    )


class Marks(Protocol):
    """What became of one attempt, written to its row."""

    async def sent(self, message_id: str) -> None: ...
    async def failed(self, message_id: str, error: str) -> None: ...
    async def retry_at(self, message_id: str, at: datetime, error: str) -> None: ...


# PostgreSQL: the scope's oldest pending row, locked for this transaction unless another
# process's transaction holds it. `first_seq` alone (no row): that process is sending it.
CLAIM_OLDEST = text(
    """
    WITH first AS (SELECT min(seq) AS seq FROM outbox WHERE scope_id = :scope AND state = 'pending')
    SELECT first.seq AS first_seq, o.* FROM first LEFT JOIN LATERAL (
        SELECT * FROM outbox WHERE outbox.seq = first.seq AND outbox.state = 'pending' FOR UPDATE SKIP LOCKED
    ) o ON true
    """
)


class RowMarks:
    """`Marks` as updates of the message's row; a subclass says where they are written
    (`_update`): the claim's own transaction, or a durable one of their own."""

    __slots__ = ()

    async def sent(self, message_id: str) -> None:
        await self._update(message_id, state="sent", attempts=outbox_table.c.attempts + 1, last_error=None)

    async def failed(self, message_id: str, error: str) -> None:
        await self._update(message_id, state="failed", attempts=outbox_table.c.attempts + 1, last_error=error[:500])

    async def retry_at(self, message_id: str, at: datetime, error: str) -> None:
        await self._update(message_id, next_attempt_at=at, attempts=outbox_table.c.attempts + 1, last_error=error[:500])

    async def _update(self, message_id: str, **values: object) -> None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Claimed(RowMarks):
    """The oldest pending row of a scope, held by this process until the attempt's mark is
    written (`row`); or why there is none: nothing pending, or another process holds it (`busy`)."""

    row: Row | None
    busy: bool
    conn: Conn | None = None

    async def _update(self, message_id: str, **values: object) -> None:
        assert self.conn is not None
        await self.conn.execute(outbox_table.update().where(outbox_table.c.id == message_id).values(**values))


class OutboxStore(RowMarks):
    """Reads and writes of the outbox table; each write is one durable transaction."""

    def __init__(self, db: HaloDB) -> None:
        self.db = db

    async def add(
        self,
        scope_id: str,
        text: str,
        *,
        kind: OutboundKind,
        reply_to: str | None,
        in_reply_to_envelope: str | None = None,
        about: str | None = None,
        batch: str | None = None,
        now: datetime,
        message_id: str | None = None,
        choices: tuple[Choice, ...] = (),
    ) -> Row:
        """The new pending row, committed; its id is `message_id` when the caller chose one."""
        async with self.db.write(metadata) as conn:
            return await self.add_in(
                conn,
                scope_id,
                text,
                kind=kind,
                reply_to=reply_to,
                in_reply_to_envelope=in_reply_to_envelope,
                about=about,
                batch=batch,
                now=now,
                message_id=message_id,
                choices=choices,
            )

    @staticmethod
    async def add_in(
        conn: Conn,
        scope_id: str,
        text: str,
        *,
        kind: OutboundKind,
        reply_to: str | None = None,
        in_reply_to_envelope: str | None = None,
        about: str | None = None,
        batch: str | None = None,
        now: datetime,
        message_id: str | None = None,
        choices: tuple[Choice, ...] = (),
    ) -> Row:
        """The new pending row, inside the caller's transaction (opened with this module's
        `metadata` among its tables): it commits, or rolls back, with the caller's own writes.
        Its id is `message_id` when the caller chose one."""
        message_id = message_id or uuid.uuid4().hex
        inserted = await conn.execute(
            outbox_table.insert().values(
                id=message_id,
                scope_id=scope_id,
                kind=kind,
                text=text,
                reply_to=reply_to,
                in_reply_to_envelope=in_reply_to_envelope,
                about=about,
                batch=batch,
                created=now,
                attempts=0,
                next_attempt_at=now,
                state="pending",
                choices=_choices_json(choices),
            )
        )
        message = Outbound(
            message_id,
            scope_id,
            text,
            kind=kind,
            reply_to=reply_to,
            in_reply_to_envelope=in_reply_to_envelope,
            created_at=now,
            choices=choices,
        )
        seq = inserted.inserted_primary_key[0] if inserted.inserted_primary_key else 0
        return Row(int(seq), message, 0, now, "pending", about, batch)

    async def record_sent(self, handed_over: list[tuple[Outbound, str | None, str | None]]) -> None:
        """Rows for messages already handed over (`message`, `about`, `batch`), in one transaction."""
        values = [
            {
                "id": message.id,
                "scope_id": message.scope_id,
                "kind": message.kind,
                "text": message.text,
                "reply_to": message.reply_to,
                "in_reply_to_envelope": message.in_reply_to_envelope,
                "about": about,
                "batch": batch,
                "created": message.created_at,
                "attempts": 1,
                "next_attempt_at": message.created_at,
                "state": "sent",
                "choices": _choices_json(message.choices),
            }
            for message, about, batch in handed_over
        ]
        if values:
            async with self.db.write(metadata) as conn:
                await conn.execute(outbox_table.insert(), values)

    async def oldest_pending(self, scope_id: str) -> Row | None:
        async with self.db.read(metadata) as conn:
            found = await conn.execute(
                select(outbox_table)
                .where(outbox_table.c.scope_id == scope_id, outbox_table.c.state == "pending")
                .order_by(outbox_table.c.seq)
                .limit(1)
            )
            row = found.first()
        return _row(row) if row is not None else None

    @asynccontextmanager
    async def claim_oldest(self, scope_id: str) -> AsyncIterator[Claimed]:
        """PostgreSQL, several processes: the scope's oldest pending row, locked (`FOR UPDATE
        SKIP LOCKED`) while it is attempted, so no two processes send one row; its mark commits
        with the release. Never a later row while an earlier one is held elsewhere: order holds."""
        async with self.db.atomic(metadata) as conn:
            found = (await conn.execute(CLAIM_OLDEST, {"scope": scope_id})).first()
            if found is None or found.first_seq is None:
                yield Claimed(None, busy=False)
            elif found.seq is None:
                yield Claimed(None, busy=True)
            else:
                yield Claimed(_row(found), busy=False, conn=conn)

    async def due_now(self, scope_prefix: str, now: datetime) -> int:
        """Pending messages of scopes starting with `scope_prefix` become due at `now`."""
        async with self.db.write(metadata) as conn:
            changed = await conn.execute(
                outbox_table.update()
                .where(
                    outbox_table.c.state == "pending",
                    outbox_table.c.scope_id.startswith(scope_prefix, autoescape=True),
                    outbox_table.c.next_attempt_at > now,
                )
                .values(next_attempt_at=now)
            )
        return int(changed.rowcount or 0)

    async def _update(self, message_id: str, **values: object) -> None:
        async with self.db.write(metadata) as conn:
            await conn.execute(outbox_table.update().where(outbox_table.c.id == message_id).values(**values))

    async def waiting(self) -> list[tuple[str, datetime]]:
        """Each scope with a pending message, and when its oldest pending message is due."""
        async with self.db.read(metadata) as conn:
            first = (
                select(outbox_table.c.scope_id, func.min(outbox_table.c.seq).label("seq"))
                .where(outbox_table.c.state == "pending")
                .group_by(outbox_table.c.scope_id)
                .subquery()
            )
            rows = (
                await conn.execute(
                    select(outbox_table.c.scope_id, outbox_table.c.next_attempt_at).join(
                        first, outbox_table.c.seq == first.c.seq
                    )
                )
            ).all()
        return [(scope_id, _aware(due)) for scope_id, due in rows]

    async def counts(self) -> dict[str, int]:
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(select(outbox_table.c.state, func.count()).group_by(outbox_table.c.state))).all()
        found = {state: int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in ("pending", "sent", "failed")}

    async def rows(
        self, *, scope_id: str | None = None, batch: str | None = None, kind: str | None = None, limit: int = 50
    ) -> list[Row]:
        """The latest matching rows, oldest first."""
        query = select(outbox_table)
        if scope_id is not None:
            query = query.where(outbox_table.c.scope_id == scope_id)
        if batch is not None:
            query = query.where(outbox_table.c.batch == batch)
        if kind is not None:
            query = query.where(outbox_table.c.kind == kind)
        async with self.db.read(metadata) as conn:
            found = (await conn.execute(query.order_by(outbox_table.c.seq.desc()).limit(max(limit, 0)))).all()
        return [_row(r) for r in reversed(found)]
