"""Model usage in halo.db: one row per model call, as the provider reported it.

Tokens are kept, not money: a price set later in halo.yaml applies to the whole history,
and a model with no known price stays visible as tokens. Rows are grouped by the family's
calendar day (family.timezone), the day a budget counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, func, insert, select

from transcripts.write_behind import WriteBehind

if TYPE_CHECKING:
    from halo.storage import HaloDB

# what a call was for; "triage" is the routing call that picks a level when the rules cannot
Purpose = Literal[
    "reply", "classifier", "triage", "extraction", "distillation", "graph", "transcription", "vision", "status"
]
PURPOSES: tuple[Purpose, ...] = (
    "reply", "classifier", "triage", "extraction", "distillation", "graph", "transcription", "vision", "status",
)  # fmt: skip
GroupBy = Literal["member", "scope", "model", "purpose", "level", "day"]
GROUPINGS: tuple[GroupBy, ...] = ("member", "scope", "model", "purpose", "level", "day")

metadata = MetaData()
usage_table = Table(
    "usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("ts", Float, nullable=False),
    Column("day", String(10), nullable=False, index=True),  # YYYY-MM-DD in family.timezone
    Column("model", String(128), nullable=False),
    Column("purpose", String(16), nullable=False),
    Column("member_id", String(64)),  # None: nobody's in particular (a quiet scope's extraction)
    Column("scope_id", String(128)),
    Column("level", String(2)),  # L1…L3 for a reply; None for side calls
    Column("input_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
)
notices_table = Table(  # "told once": which budget notices were sent on which day
    "usage_notices",
    metadata,
    Column("day", String(10), primary_key=True),
    Column("key", String(96), primary_key=True),
    Column("ts", Float, nullable=False),
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model call's usage. `input_tokens` includes `cached_tokens`, as providers report it."""

    ts: float
    day: str
    model: str
    purpose: Purpose
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    member_id: str | None = None
    scope_id: str | None = None
    level: str | None = None


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Tokens of the calls sharing a day, a model and a group key (a member, a scope …)."""

    day: str
    key: str | None
    model: str
    calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int


WRITE_EVERY = 1.0  # seconds a usage row may wait to be written with others


class UsageStore:
    """Appends usage rows and sums them; a small port, so PostgreSQL can stand behind it later.

    A row is written behind, with the others of the same second (`WriteBehind`): a model call
    never waits for halo.db's fsync, and the outbox's writes don't queue behind usage rows.
    Every sum writes what waits first, so budgets and `GET /usage` count every call."""

    def __init__(self, db: HaloDB, *, every: float = WRITE_EVERY) -> None:
        self.db = db
        self._pending: WriteBehind[UsageRecord] = WriteBehind(self.add_many, every, "usage rows")

    def add(self, record: UsageRecord) -> None:
        self._pending.add(record)

    async def close(self) -> None:
        """Write what waits (before halo.db closes)."""
        await self._pending.close()

    async def add_many(self, records: Iterable[UsageRecord]) -> None:
        rows = [_row(r) for r in records]
        if rows:
            async with self.db.write(metadata) as conn:
                await conn.execute(insert(usage_table), rows)

    async def totals(
        self, first_day: str, last_day: str, by: GroupBy, *, member_id: str | None = None
    ) -> list[UsageTotal]:
        """Sums per day, model and `by` over [first_day, last_day] (inclusive)."""
        await self._pending.flush()
        t = usage_table.c
        columns = {"member": t.member_id, "scope": t.scope_id, "model": t.model, "purpose": t.purpose}
        key = columns.get(by, t.level if by == "level" else t.day)
        query = (
            select(
                t.day,
                key.label("key"),
                t.model,
                func.count().label("calls"),
                func.sum(t.input_tokens).label("input_tokens"),
                func.sum(t.cached_tokens).label("cached_tokens"),
                func.sum(t.output_tokens).label("output_tokens"),
            )
            .where(t.day >= first_day, t.day <= last_day)
            .group_by(t.day, key, t.model)
            .order_by(t.day, key, t.model)
        )
        if member_id is not None:
            query = query.where(t.member_id == member_id)
        async with self.db.read(metadata) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [
            UsageTotal(
                day=r["day"],
                key=r["key"],
                model=r["model"],
                calls=int(r["calls"]),
                input_tokens=int(r["input_tokens"] or 0),
                cached_tokens=int(r["cached_tokens"] or 0),
                output_tokens=int(r["output_tokens"] or 0),
            )
            for r in rows
        ]

    async def first_notice(self, day: str, key: str, now: float) -> bool:
        """Mark a notice sent for `key` on `day`; True only the first time (the caller sends it then)."""
        async with self.db.write(metadata) as conn:
            found = await conn.execute(
                select(notices_table.c.key).where(notices_table.c.day == day, notices_table.c.key == key)
            )
            if found.first() is not None:
                return False
            await conn.execute(insert(notices_table).values(day=day, key=key, ts=now))
            return True


def _row(record: UsageRecord) -> dict[str, object]:
    return {
        "ts": record.ts,
        "day": record.day,
        "model": record.model,
        "purpose": record.purpose,
        "member_id": record.member_id,
        "scope_id": record.scope_id,
        "level": record.level,
        "input_tokens": record.input_tokens,
        "cached_tokens": record.cached_tokens,
        "output_tokens": record.output_tokens,
    }
