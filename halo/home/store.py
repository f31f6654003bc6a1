"""Home events in halo.db: observations (pruned to a limit), each entity's current state, what
each rule last saw and did, the quiet-hours queue and who muted home messages.

Times are stored as POSIX seconds (floats): sortable, and the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)

from halo.db_conn import Conn
from halo.port import Observation
from halo.storage import HaloDB

metadata = MetaData()

observations = Table(
    "home_observations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False, index=True),
    Column("source", String(32), nullable=False),
    Column("entity", String(255), nullable=False),
    Column("topic", String(512), nullable=False),
    Column("state", Text, nullable=False),  # the payload, as JSON
    Column("attributes", Text, nullable=False, default="{}"),
    Column("event_id", String(255), nullable=True, unique=True),  # one row per real-world event
    Column("retained", Boolean, nullable=False, default=False),
)

entity_state = Table(
    "home_entity_state",
    metadata,
    Column("source", String(32), primary_key=True),
    Column("entity", String(255), primary_key=True),
    Column("topic", String(512), nullable=False),
    Column("state", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

rule_state = Table(
    "home_rule_state",
    metadata,
    Column("rule_id", String(64), primary_key=True),
    Column("entity", String(255), primary_key=True),
    Column("matched", Boolean, nullable=False, default=False),
    Column("hold_due", Float, nullable=True),  # for_minutes: fires at this time unless it changes back
    Column("hold_payload", Text, nullable=True),
    Column("hold_topic", String(512), nullable=True),
    Column("last_fired", Float, nullable=True),
)

fired_events = Table(
    "home_fired_events",
    metadata,
    Column("rule_id", String(64), primary_key=True),
    Column("event_id", String(255), primary_key=True),
    Column("at", Float, nullable=False, index=True),
)

queue = Table(
    "home_queue",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope_id", String(255), nullable=False, index=True),
    Column("text", Text, nullable=False),
    Column("rule_id", String(64), nullable=False),
    Column("reason", String(16), nullable=False),  # quiet | burst
    Column("queued_at", Float, nullable=False),
    Column("release_at", Float, nullable=False, index=True),
)

mutes = Table(
    "home_mutes",
    metadata,
    Column("member_id", String(64), primary_key=True),
    Column("until", Float, nullable=False),
)


@dataclass(frozen=True, slots=True)
class RuleMemory:
    matched: bool = False
    hold_due: float | None = None
    last_fired: float | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    rule_id: str
    entity: str
    topic: str
    payload: dict[str, Any]
    due: float


@dataclass(frozen=True, slots=True)
class Queued:
    id: int
    scope_id: str
    text: str
    rule_id: str
    reason: str
    queued_at: float


class HomeStore:
    """Inside `transaction()`, every call of the same task shares one transaction (one commit,
    one fsync, for a batch of observations); outside it each call is its own."""

    def __init__(self, db: HaloDB, keep_observations: int = 20_000) -> None:
        self.db = db
        self.keep = keep_observations
        self._since_prune = 0
        self._tx: ContextVar[Conn | None] = ContextVar(f"home_tx_{id(self)}", default=None)
        self._rules: dict[tuple[str, str], RuleMemory] = {}  # write-through: read on every observation

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.db.write(metadata) as conn:
            token = self._tx.set(conn)
            try:
                yield
            except BaseException:
                self._rules.clear()  # rolled back: the cache may hold what was never committed
                raise
            finally:
                self._tx.reset(token)

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[Conn]:
        current = self._tx.get()
        if current is not None:
            yield current
        else:
            async with self.db.write(metadata) as conn:
                yield conn

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[Conn]:
        current = self._tx.get()
        if current is not None:
            yield current
        else:
            async with self.db.read(metadata) as conn:
                yield conn

    # --- observations and state ----------------------------------------------------

    async def record(self, obs: Observation, at: float) -> bool:
        """Store the observation and the entity's state. Returns False when its event id was
        stored before (a redelivery or a Frigate update): the row is then updated in place."""
        state = json.dumps(obs.payload, default=str, ensure_ascii=False)
        row = {
            "at": at,
            "source": obs.source,
            "entity": obs.entity,
            "topic": obs.topic,
            "state": state,
            "attributes": json.dumps(obs.attributes, default=str),
            "event_id": obs.event_id,
            "retained": obs.retained,
        }
        async with self._writing() as conn:
            first = True
            if obs.event_id is not None:
                done = await conn.execute(
                    update(observations).where(observations.c.event_id == obs.event_id).values(row)
                )
                first = done.rowcount == 0
            if first:
                await conn.execute(insert(observations).values(row))
            key = (entity_state.c.source == obs.source) & (entity_state.c.entity == obs.entity)
            values = {"topic": obs.topic, "state": state, "updated_at": at}
            done = await conn.execute(update(entity_state).where(key).values(values))
            if done.rowcount == 0:
                await conn.execute(insert(entity_state).values(source=obs.source, entity=obs.entity, **values))
            self._since_prune += 1
            if self._since_prune >= 200:
                self._since_prune = 0
                await self._prune(conn)
        return first

    async def _prune(self, conn: Any) -> None:
        newest = (await conn.execute(select(func.max(observations.c.id)))).scalar()
        if newest is not None and newest > self.keep:
            await conn.execute(delete(observations).where(observations.c.id <= newest - self.keep))
            oldest_kept = (await conn.execute(select(func.min(observations.c.at)))).scalar() or 0
            await conn.execute(delete(fired_events).where(fired_events.c.at < oldest_kept))

    async def recent(self, limit: int = 100, entity: str | None = None) -> list[dict[str, Any]]:
        q = select(observations).order_by(observations.c.id.desc()).limit(limit)
        if entity:
            q = q.where(observations.c.entity == entity)
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(q)).mappings().all()
        return [dict(r) for r in rows]

    async def states(self) -> list[dict[str, Any]]:
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(select(entity_state).order_by(entity_state.c.entity))).mappings().all()
        return [dict(r) for r in rows]

    # --- what each rule saw ------------------------------------------------------------

    async def rule_memory(self, rule_id: str, entity: str) -> RuleMemory:
        cached = self._rules.get((rule_id, entity))
        if cached is not None:
            return cached
        q = select(rule_state).where((rule_state.c.rule_id == rule_id) & (rule_state.c.entity == entity))
        async with self._reading() as conn:
            row = (await conn.execute(q)).mappings().first()
        found = RuleMemory() if row is None else RuleMemory(bool(row["matched"]), row["hold_due"], row["last_fired"])
        self._rules[(rule_id, entity)] = found
        return found

    async def set_rule_memory(self, rule_id: str, entity: str, **values: Any) -> None:
        self._rules.pop((rule_id, entity), None)  # read back from the database next time
        key = (rule_state.c.rule_id == rule_id) & (rule_state.c.entity == entity)
        async with self._writing() as conn:
            done = await conn.execute(update(rule_state).where(key).values(values))
            if done.rowcount == 0:
                await conn.execute(insert(rule_state).values(rule_id=rule_id, entity=entity, **values))

    async def due_holds(self, now: float) -> list[Hold]:
        q = select(rule_state).where(rule_state.c.hold_due.is_not(None) & (rule_state.c.hold_due <= now))
        async with self._reading() as conn:
            rows = (await conn.execute(q)).mappings().all()
        return [
            Hold(r["rule_id"], r["entity"], r["hold_topic"] or "", json.loads(r["hold_payload"] or "{}"), r["hold_due"])
            for r in rows
        ]

    async def last_fired(self) -> dict[str, float]:
        q = select(rule_state.c.rule_id, func.max(rule_state.c.last_fired)).group_by(rule_state.c.rule_id)
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(q)).all()
        return {rule_id: at for rule_id, at in rows if at is not None}

    async def first_time(self, rule_id: str, event_id: str, at: float) -> bool:
        """Marks (rule, event) as fired; False when it was already: a duplicate."""
        key = (fired_events.c.rule_id == rule_id) & (fired_events.c.event_id == event_id)
        async with self._writing() as conn:
            if (await conn.execute(select(fired_events.c.at).where(key))).first() is not None:
                return False
            await conn.execute(insert(fired_events).values(rule_id=rule_id, event_id=event_id, at=at))
        return True

    # --- the queue -------------------------------------------------------------------

    async def enqueue(self, scope_id: str, text: str, rule_id: str, reason: str, at: float, release_at: float) -> None:
        async with self._writing() as conn:
            await conn.execute(
                insert(queue).values(
                    scope_id=scope_id, text=text, rule_id=rule_id, reason=reason, queued_at=at, release_at=release_at
                )
            )

    async def burst_release(self, rule_id: str) -> float | None:
        """When this rule's pending burst summary goes out (None: no burst is collecting)."""
        q = select(func.max(queue.c.release_at)).where((queue.c.rule_id == rule_id) & (queue.c.reason == "burst"))
        async with self._reading() as conn:
            return (await conn.execute(q)).scalar()

    async def due(self, now: float) -> dict[str, list[Queued]]:
        """Queued messages whose time has come, per scope, oldest first. Every row of a scope
        that has one due goes with it (one merged message per recipient)."""
        async with self._reading() as conn:
            scopes = (await conn.execute(select(queue.c.scope_id).where(queue.c.release_at <= now).distinct())).all()
            found: dict[str, list[Queued]] = {}
            for (scope_id,) in scopes:
                q = select(queue).where((queue.c.scope_id == scope_id) & (queue.c.release_at <= now))
                rows = (await conn.execute(q.order_by(queue.c.id))).mappings().all()
                found[scope_id] = [
                    Queued(r["id"], r["scope_id"], r["text"], r["rule_id"], r["reason"], r["queued_at"]) for r in rows
                ]
        return found

    async def dequeue(self, ids: list[int]) -> None:
        async with self._writing() as conn:
            await conn.execute(delete(queue).where(queue.c.id.in_(ids)))

    async def pending(self) -> int:
        async with self.db.read(metadata) as conn:
            return int((await conn.execute(select(func.count()).select_from(queue))).scalar() or 0)

    # --- mutes -----------------------------------------------------------------------

    async def mute(self, member_id: str, until: float) -> None:
        async with self._writing() as conn:
            await conn.execute(delete(mutes).where(mutes.c.member_id == member_id))
            await conn.execute(insert(mutes).values(member_id=member_id, until=until))

    async def muted_until(self, member_id: str) -> float | None:
        async with self._reading() as conn:
            return (await conn.execute(select(mutes.c.until).where(mutes.c.member_id == member_id))).scalar()
