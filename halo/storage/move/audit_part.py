"""The audit log as a part of a move: `logs/events.jsonl` in HALO_HOME, `audit_events` on
PostgreSQL (one row an event, its line as the log holds it). Ordered: the log's order, which
is PostgreSQL's ids, is part of the record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from halo.storage.audit_rows import audit_events
from halo.storage.family import carry_family
from halo.storage.move.digest import canonical
from halo.storage.move.lines import append_lines, batches_of, complete_lines
from halo.storage.move.part import BATCH, Embedded, Postgres, Side

EVENTS = "logs/events.jsonl"
KIND_LENGTH = 64


@dataclass(frozen=True, slots=True)
class Event:
    ts: datetime
    kind: str
    scope_id: str | None
    json: str  # the log's line, without its newline


def _when(value: Any) -> datetime:
    try:
        ts = datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)  # an event without a readable time sorts first
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _events_of(path: Path) -> Iterator[Event]:
    """The log's whole lines that are JSON objects (a corrupt one is skipped, as `tail` does)."""
    if not path.is_file():
        return
    for raw in complete_lines(path):
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        scope_id = event.get("scope_id")
        yield Event(
            _when(event.get("ts")),
            str(event.get("kind", ""))[:KIND_LENGTH],
            scope_id if isinstance(scope_id, str) else None,
            raw.decode("utf-8", errors="replace"),
        )


class AuditPart:
    name = "audit log"
    ordered = True

    def __init__(self, family_id: str) -> None:
        self.family_id = family_id
        carry_family(audit_events.metadata)  # HaloDB adds `family_id` on first use; the move writes it itself

    async def count(self, side: Side) -> int:
        if isinstance(side, Postgres):
            return int((await side.conn.execute(select(func.count()).select_from(audit_events))).scalar_one())
        return await asyncio.to_thread(lambda: sum(1 for _ in _events_of(side.root / EVENTS)))

    async def read(self, side: Side) -> AsyncIterator[Sequence[Event]]:
        if isinstance(side, Embedded):
            async for batch in batches_of(lambda: _events_of(side.root / EVENTS)):
                yield batch
            return
        a = audit_events.c
        result = await side.conn.stream(select(a.ts, a.kind, a.scope_id, a.event).order_by(a.id))
        async for chunk in result.partitions(BATCH):
            yield [Event(row.ts, row.kind, row.scope_id, row.event) for row in chunk]

    def canonical(self, record: Event) -> bytes:
        return canonical((record.json,))

    async def prepare(self, side: Side) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(audit_events.delete())

    async def write(self, side: Side, records: Sequence[Event]) -> None:
        if isinstance(side, Postgres):
            rows = [
                {"family_id": self.family_id, "ts": e.ts, "kind": e.kind, "scope_id": e.scope_id, "event": e.json}
                for e in records
            ]
            await side.conn.execute(audit_events.insert(), rows)  # ids in the log's order
            return
        await asyncio.to_thread(append_lines, side.root / EVENTS, [e.json for e in records])

    async def finish(self, side: Side) -> None:
        return None

    def local_paths(self, home: Path) -> list[Path]:
        return [home / EVENTS] if (home / EVENTS).is_file() else []
