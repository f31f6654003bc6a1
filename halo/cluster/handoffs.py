"""A message for a scope another node serves, handed to that node through PostgreSQL.

The node a message came in on (the origin) writes it to `handoffs`, addressed to the lease
holder, and NOTIFYs the holder's channel in the same transaction. The holder claims the row
with `SELECT … FOR UPDATE SKIP LOCKED` and keeps that transaction open while it answers, then
writes the outcome and NOTIFYs the origin, which reads and deletes the row and answers its
client. LISTEN only wakes: each heartbeat also looks for rows a lost notification left behind.

If the holder dies, its claim's transaction dies with it (the row is waiting again) and its
lease lapses; the origin, which looks again every `lease_seconds / 3`, then takes the scope
itself or readdresses the row to whoever took it. A row is answered by exactly one
transaction: the one that holds its lock when it writes the outcome.

`live`: a person waits on the origin's request (the web chat). The holder then answers without
queuing the reply, and the origin queues it, so its own adapter hands it to the waiting
request. Otherwise (a chat app's message) the holder queues the reply in the outbox itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import text

from halo.cluster.leases import Leases
from halo.cluster.tables import metadata
from halo.port import Attachment, Incoming, Sender, TurnOutcome, VoiceNote
from halo.storage import HaloDB

log = logging.getLogger(__name__)

Answer = Callable[[Incoming, bool], Awaitable[TurnOutcome]]  # (message, live) → its outcome, on this node

HAND_OVER = text(
    """
    WITH queued AS (
        INSERT INTO handoffs (id, scope_id, origin_node, target_node, live, message, media, state, created, family_id)
        VALUES (:id, :scope, :origin, :target, :live, :message, :media, 'waiting', now(), :family)
        RETURNING id
    )
    SELECT pg_notify(:channel, 'h:' || id) FROM queued
    """
)
CLAIM = text(
    "SELECT scope_id, origin_node, live, message, media FROM handoffs "
    "WHERE id = :id AND state = 'waiting' FOR UPDATE SKIP LOCKED"
)
ANSWERED = text("UPDATE handoffs SET state = 'answered', outcome = :outcome WHERE id = :id")
READDRESS = text("UPDATE handoffs SET target_node = :target WHERE id = :id AND state = 'waiting'")
COLLECT = text("DELETE FROM handoffs WHERE id = :id AND state = 'answered' RETURNING outcome")
NOTIFY = text("SELECT pg_notify(:channel, :payload)")
ADDRESSED_HERE = text("SELECT id FROM handoffs WHERE target_node = :node AND state = 'waiting'")


def channel(node_id: str) -> str:
    return f"halo_node_{node_id}"


class Handoffs:
    """Hand a message over (`hand_over`, on the origin) and answer the ones handed here."""

    def __init__(self, db: HaloDB, leases: Leases) -> None:
        self.db = db
        self.leases = leases
        self._answer: Answer | None = None
        self._waiting: dict[str, asyncio.Future[None]] = {}  # handoff id → woken when answered
        self._running: dict[str, asyncio.Task[None]] = {}
        self._listener: asyncpg.Connection | None = None
        self.handed_over = 0
        self.answered_here = 0

    def answer_with(self, answer: Answer) -> None:
        """How this node answers a message handed to it (the inbound's own path, lease held)."""
        self._answer = answer

    async def start(self) -> None:
        """LISTEN on this node's channel; each heartbeat also looks for rows addressed here."""
        await self._listen()
        self.leases.on_beat.append(self.poll)

    async def _listen(self) -> None:
        dsn = self.db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            self._listener = await asyncpg.connect(dsn)
            await self._listener.add_listener(channel(self.leases.node.id), self._notified)
        except (OSError, asyncpg.PostgresError) as exc:  # the heartbeat's poll still finds every row
            log.warning("LISTEN for handoffs failed, polling each heartbeat instead: %s", exc)
            self._listener = None

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        kind, _, handoff_id = payload.partition(":")
        if kind == "h":
            self._run_soon(handoff_id)
        elif kind == "a" and (waiting := self._waiting.get(handoff_id)) is not None and not waiting.done():
            waiting.set_result(None)

    async def poll(self) -> None:
        """Rows addressed here that a lost notification left waiting (each heartbeat)."""
        if self._listener is None or self._listener.is_closed():
            await self._listen()
        async with self.db.read(metadata) as conn:
            ids = (await conn.execute(ADDRESSED_HERE, {"node": self.leases.node.id})).scalars().all()
        for handoff_id in ids:
            self._run_soon(str(handoff_id))

    # --- the origin ------------------------------------------------------------------

    async def hand_over(self, message: Incoming, scope_id: str, holder: str, *, live: bool) -> TurnOutcome:
        """Have `holder` answer `message`, and wait for the outcome (however long the turn
        takes; if the holder dies, this node or the scope's next holder answers it)."""
        media = await _media(message)
        waiting = asyncio.get_running_loop().create_future()
        self._waiting[message.id] = waiting
        try:
            async with self.db.atomic(metadata) as conn:
                await conn.execute(
                    HAND_OVER,
                    {
                        "id": message.id,
                        "scope": scope_id,
                        "origin": self.leases.node.id,
                        "target": holder,
                        "live": live,
                        "message": _dump(message),
                        "media": media,
                        "family": self.db.family_id,
                        "channel": channel(holder),
                    },
                )
            self.handed_over += 1
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiting), self.leases.every)
                outcome = await self._collect(message.id)
                if outcome is not None:
                    return outcome
                await self._route(message.id, scope_id)  # its holder may be gone: answer it here, or readdress it
        finally:
            self._waiting.pop(message.id, None)

    async def _collect(self, handoff_id: str) -> TurnOutcome | None:
        async with self.db.atomic(metadata) as conn:
            found = (await conn.execute(COLLECT, {"id": handoff_id})).scalar()
        return None if found is None else TurnOutcome(**json.loads(found))

    async def _route(self, handoff_id: str, scope_id: str) -> None:
        holder = await self.leases.acquire(scope_id)
        if holder is None:
            await self._run(handoff_id)
            return
        async with self.db.atomic(metadata) as conn:
            await conn.execute(READDRESS, {"id": handoff_id, "target": holder})
            await conn.execute(NOTIFY, {"channel": channel(holder), "payload": f"h:{handoff_id}"})

    # --- the holder ------------------------------------------------------------------

    def _run_soon(self, handoff_id: str) -> None:
        if handoff_id not in self._running:
            task = asyncio.create_task(self._run(handoff_id), name=f"handoff {handoff_id}")
            self._running[handoff_id] = task
            task.add_done_callback(lambda _: self._running.pop(handoff_id, None))

    async def _run(self, handoff_id: str) -> None:
        """Claim the row and answer it here, keeping the claim until the outcome is written; a row
        claimed elsewhere, or answered already, is left alone."""
        if self._answer is None:
            raise RuntimeError("Handoffs.answer_with was not called: this node cannot answer a handoff")
        async with self.db.atomic(metadata) as conn:
            row = (await conn.execute(CLAIM, {"id": handoff_id})).first()
            if row is None:
                return
            holder = await self.leases.acquire(row.scope_id)
            if holder is not None:  # this node no longer serves the scope: to the one that does
                await conn.execute(READDRESS, {"id": handoff_id, "target": holder})
                await conn.execute(NOTIFY, {"channel": channel(holder), "payload": f"h:{handoff_id}"})
                return
            message = _load(row.message, row.media)
            try:
                outcome = await self._answer(message, bool(row.live))
            except Exception:  # answered with silence once, never retried forever
                log.exception("answering a handed-over message in %s failed", row.scope_id)
                outcome = TurnOutcome(None, "failed")
            await conn.execute(ANSWERED, {"id": handoff_id, "outcome": json.dumps(asdict(outcome))})
            await conn.execute(NOTIFY, {"channel": channel(row.origin_node), "payload": f"a:{handoff_id}"})
        self.answered_here += 1

    def status(self) -> dict[str, Any]:
        return {"handed_over": self.handed_over, "answered_here": self.answered_here, "waiting": len(self._waiting)}

    async def stop(self) -> None:
        """Finish the handoffs being answered here (their origins wait for them)."""
        if self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)
        if self._listener is not None:
            await self._listener.close()
            self._listener = None


async def _media(message: Incoming) -> bytes | None:
    """The voice note's or attachment's bytes: the holder cannot ask the origin's platform for them."""
    found = message.voice or message.attachment
    return None if found is None else await found.read()


def _dump(message: Incoming) -> str:
    voice, attachment = message.voice, message.attachment
    return json.dumps(
        {
            "platform": message.platform,
            "chat_id": message.chat_id,
            "chat_kind": message.chat_kind,
            "sender": asdict(message.sender),
            "text": message.text,
            "addressed": message.addressed,
            "message_id": message.message_id,
            "reply_to": message.reply_to,
            "ts": message.ts.isoformat() if message.ts else None,
            "id": message.id,
            "voice": None if voice is None else {"mime": voice.mime, "size": voice.size, "duration": voice.duration},
            "attachment": None
            if attachment is None
            else {"kind": attachment.kind, "mime": attachment.mime, "name": attachment.name, "size": attachment.size},
        }
    )


def _load(dumped: str, media: bytes | None) -> Incoming:
    found = json.loads(dumped)

    async def read() -> bytes:
        return media or b""

    voice = found.pop("voice")
    attachment = found.pop("attachment")
    ts = found.pop("ts")
    return Incoming(
        **{**found, "sender": Sender(**found["sender"])},
        ts=datetime.fromisoformat(ts).astimezone(UTC) if ts else None,
        voice=None if voice is None else VoiceNote(read, **voice),
        attachment=None if attachment is None else Attachment(read, **attachment),
    )
