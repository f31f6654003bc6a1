"""The audit log's events in PostgreSQL, when `storage.url` is set: every process's in one place.

The store of record: with `storage.url` no event is written to `logs/events.jsonl`.
`AuditLog.write` is synchronous and called from the event loop and from threads, so an event
is only queued here; the queue is written about once a second (`WriteBehind`, one INSERT a
batch) and on close. While PostgreSQL cannot be reached the events wait and are tried again
(at most `KEEP` of them, the oldest dropped beyond that, said in the log); a write refused
because this process no longer holds its family (`Fenced`) is dropped: a stale process adds
nothing to the family's record.

For `halo storage migrate`: `AuditRows.insert(events)` writes any number of events, all or
none; `read_all()` reads the family's events, oldest first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, Column, DateTime, MetaData, String, Table, Text, insert, select

from halo.storage.db import unreachable
from transcripts.audit import AuditEvent, EventFilter
from transcripts.write_behind import WriteBehind

if TYPE_CHECKING:
    from halo.storage.db import HaloDB

log = logging.getLogger(__name__)

WRITE_EVERY = 1.0  # seconds an event may wait for its batch
KEEP = 10_000  # events kept while PostgreSQL cannot be reached (about 5 MB)
INSERT_CHUNK = 5000  # events a statement: PostgreSQL takes at most 32767 parameters (4 an event)
PAGE = 500  # events read at a time while a filter in Python (`match`) looks for enough

metadata = MetaData()
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False, index=True),
    Column("kind", String(64), nullable=False),
    Column("scope_id", String(200)),  # the event's own scope_id, for the filter
    Column("event", Text, nullable=False),  # the log's JSON line, secrets dropped
)


class AuditRows:
    """`transcripts.audit.AuditRecord` on `HaloDB`'s PostgreSQL."""

    def __init__(self, db: HaloDB, every: float = WRITE_EVERY, keep: int = KEEP) -> None:
        self.db = db
        self._behind: WriteBehind[AuditEvent] = WriteBehind(
            self.insert, every, "audit events", keep=keep, again=unreachable
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._early: list[AuditEvent] = []  # added from a thread before any event on the loop
        self._mutex = threading.Lock()

    def add(self, event: AuditEvent) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a thread: hand it to the loop's queue
            with self._mutex:
                if self._loop is None or self._loop.is_closed():
                    self._early.append(event)
                    return
                loop = self._loop
            try:
                loop.call_soon_threadsafe(self._behind.add, event)
            except RuntimeError:  # the loop closed meanwhile: kept for a flush that may still come
                with self._mutex:
                    self._early.append(event)
            return
        with self._mutex:
            self._loop = loop
            early, self._early = self._early, []
        for waiting in early:
            self._behind.add(waiting)
        self._behind.add(event)

    @property
    def waiting(self) -> int:
        """Events not written yet (PostgreSQL away: kept to try again)."""
        with self._mutex:
            return len(self._early) + self._behind.waiting

    async def flush(self) -> None:
        """Write what waits now (the admin API reads its own events back at once)."""
        with self._mutex:
            early, self._early = self._early, []
        for waiting in early:
            self._behind.add(waiting)
        await self._behind.flush()

    async def close(self) -> None:
        await self.flush()
        await self._behind.close()

    async def insert(self, events: Sequence[AuditEvent]) -> None:
        rows = [{"ts": e.ts, "kind": e.kind[:64], "scope_id": e.scope_id, "event": e.json} for e in events]
        if not rows:
            return
        if len(rows) <= INSERT_CHUNK:  # a second's batch: one statement, no write turn, no BEGIN
            async with self.db.autocommit(metadata) as conn:
                await conn.execute(insert(audit_events).values(rows))
            return
        async with self.db.write(metadata) as conn:  # a migration's bulk: all or nothing
            for start in range(0, len(rows), INSERT_CHUNK):
                await conn.execute(insert(audit_events).values(rows[start : start + INSERT_CHUNK]))

    async def tail(
        self, lines: int, scope_id: str | None = None, kind: str | None = None, match: EventFilter | None = None
    ) -> list[dict[str, Any]]:
        if lines <= 0:
            return []
        await self.flush()
        found: list[dict[str, Any]] = []
        async with self.db.read(metadata) as conn:  # first: it gives the table its `family_id` (HaloDB)
            query = select(audit_events.c.id, audit_events.c.ts, audit_events.c.event).where(
                audit_events.c.family_id == self.db.family_id
            )
            if scope_id is not None:
                query = query.where(audit_events.c.scope_id == scope_id)
            if kind is not None:
                query = query.where(audit_events.c.kind == kind)
            query = query.order_by(audit_events.c.ts.desc(), audit_events.c.id.desc())
            offset = 0
            while len(found) < lines:
                page = (await conn.execute(query.limit(PAGE if match else lines).offset(offset))).all()
                for row in page:
                    event = _event(row.event)
                    if event is not None and (match is None or match(event)):
                        found.append(event)
                        if len(found) == lines:
                            break
                if match is None or len(page) < PAGE:
                    break
                offset += len(page)
        found.reverse()
        return found

    async def read_all(self) -> list[AuditEvent]:
        """The family's events, oldest first."""
        await self.flush()
        async with self.db.read(metadata) as conn:  # first: it gives the table its `family_id`
            query = (
                select(audit_events.c.ts, audit_events.c.kind, audit_events.c.scope_id, audit_events.c.event)
                .where(audit_events.c.family_id == self.db.family_id)
                .order_by(audit_events.c.ts, audit_events.c.id)
            )
            return [AuditEvent(row.ts, row.kind, row.scope_id, row.event) for row in await conn.execute(query)]


def _event(raw: str) -> dict[str, Any] | None:
    try:
        event = json.loads(raw)
    except ValueError:
        log.warning("audit_events: skipping a row that is not JSON")
        return None
    return event if isinstance(event, dict) else None
