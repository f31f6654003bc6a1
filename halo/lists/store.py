"""List items in halo.db, behind `ListStore` (the interface a PostgreSQL store implements too).

Every read and write names its scope: a list is found only from the scope it belongs to, so
a DM's list cannot show up in a group by construction. Items are numbered in the order they
were added; checking one off keeps it (struck through) until the list is cleared.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Boolean, Column, Float, Index, Integer, MetaData, String, Table, delete, func, insert, select

from halo.storage import HaloDB

DEFAULT_LIST = "list"
MAX_ITEM = 200
MAX_ITEMS = 300
MAX_NAME = 40

metadata = MetaData()
items_table = Table(
    "list_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope_id", String(200), nullable=False),
    Column("list_name", String(MAX_NAME), nullable=False),
    Column("text", String(MAX_ITEM), nullable=False),
    Column("done", Boolean, nullable=False, default=False),
    Column("added_by", String(64)),
    Column("added_at", Float, nullable=False),
    Column("done_by", String(64)),
    Index("list_items_scope_list", "scope_id", "list_name"),
)


class ListError(ValueError):
    """A list change that cannot be made; the message says why, for the person who asked."""


@dataclass(frozen=True, slots=True)
class ListItem:
    id: int
    scope_id: str
    list_name: str
    text: str
    done: bool
    added_by: str | None
    added_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "scopeId": self.scope_id,
            "list": self.list_name,
            "text": self.text,
            "done": self.done,
            "addedBy": self.added_by,
            "addedAt": self.added_at.isoformat(),
        }


def list_name(name: str | None) -> str:
    """A list's name as stored: lower case, single spaces; none is the scope's default list."""
    cleaned = " ".join((name or "").lower().split())
    if len(cleaned) > MAX_NAME:
        raise ListError(f"A list name is at most {MAX_NAME} characters.")
    return cleaned or DEFAULT_LIST


def _the_list(name: str | None) -> str:
    stored = list_name(name)
    return "the list" if stored == DEFAULT_LIST else f"the {stored} list"


def _item(r: object) -> ListItem:
    m = r._mapping  # type: ignore[attr-defined]
    return ListItem(
        m["id"],
        m["scope_id"],
        m["list_name"],
        m["text"],
        bool(m["done"]),
        m["added_by"],
        datetime.fromtimestamp(m["added_at"], UTC),
    )


class ListStore:
    def __init__(self, db: HaloDB, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    async def items(self, scope_id: str, name: str | None = None) -> builtins.list[ListItem]:
        """The list's items in the order added: what its numbers count."""
        query = (
            select(items_table)
            .where(items_table.c.scope_id == scope_id, items_table.c.list_name == list_name(name))
            .order_by(items_table.c.id)
        )
        async with self.db.read(metadata) as conn:
            return [_item(r) for r in (await conn.execute(query)).all()]

    async def names(self, scope_id: str) -> builtins.list[str]:
        """The lists this scope has, by name."""
        query = select(items_table.c.list_name).where(items_table.c.scope_id == scope_id).distinct()
        async with self.db.read(metadata) as conn:
            return sorted(r[0] for r in (await conn.execute(query)).all())

    async def in_use(self, scope_id: str) -> str:
        """The list this scope used last (the one an item was last added to), else the default."""
        query = (
            select(items_table.c.list_name)
            .where(items_table.c.scope_id == scope_id)
            .order_by(items_table.c.id.desc())
            .limit(1)
        )
        async with self.db.read(metadata) as conn:
            return (await conn.execute(query)).scalar_one_or_none() or DEFAULT_LIST

    async def add(self, scope_id: str, name: str | None, texts: Sequence[str], *, by: str | None) -> builtins.list[str]:
        """The items added (cleaned; blanks dropped)."""
        cleaned = [" ".join(t.split()) for t in texts]
        cleaned = [t for t in cleaned if t]
        if not cleaned:
            raise ListError("Nothing to add.")
        too_long = next((t for t in cleaned if len(t) > MAX_ITEM), None)
        if too_long is not None:
            raise ListError(f"An item is at most {MAX_ITEM} characters: {too_long[:40]}…")
        stored = list_name(name)
        async with self.db.write(metadata) as conn:
            count = (
                await conn.execute(
                    select(func.count()).where(items_table.c.scope_id == scope_id, items_table.c.list_name == stored)
                )
            ).scalar_one()
            if count + len(cleaned) > MAX_ITEMS:
                raise ListError(f"A list holds at most {MAX_ITEMS} items; /list clear removes the done ones.")
            now = self.clock()
            await conn.execute(
                insert(items_table),
                [
                    {
                        "scope_id": scope_id,
                        "list_name": stored,
                        "text": t,
                        "done": False,
                        "added_by": by,
                        "added_at": now,
                    }
                    for t in cleaned
                ],
            )
        return cleaned

    async def check_off(self, scope_id: str, name: str | None, ref: str, *, by: str | None) -> ListItem:
        """Mark one item done: `ref` is its number, or its words (the first open item that
        matches, exactly or else as a part)."""
        items = await self.items(scope_id, name)
        ref = " ".join(ref.split()).lstrip("#")
        found: ListItem | None = None
        if ref.isdigit():
            number = int(ref)
            if not 1 <= number <= len(items):
                raise ListError(f"There is no item {number} on {_the_list(name)}.")
            found = items[number - 1]
        else:
            open_items = [i for i in items if not i.done]
            lowered = ref.lower()
            found = next((i for i in open_items if i.text.lower() == lowered), None) or next(
                (i for i in open_items if lowered and lowered in i.text.lower()), None
            )
            if found is None:
                raise ListError(f"{ref!r} is not on {_the_list(name)}.")
        if found.done:
            raise ListError(f"{found.text} is done already.")
        async with self.db.write(metadata) as conn:
            await conn.execute(
                items_table.update()
                .where(items_table.c.id == found.id, items_table.c.scope_id == scope_id)
                .values(done=True, done_by=by)
            )
        return found

    async def clear_done(self, scope_id: str, name: str | None) -> int:
        """Remove the done items; how many went."""
        async with self.db.write(metadata) as conn:
            gone = await conn.execute(
                delete(items_table).where(
                    items_table.c.scope_id == scope_id,
                    items_table.c.list_name == list_name(name),
                    items_table.c.done.is_(True),
                )
            )
        return int(gone.rowcount or 0)

    async def everything(self, limit: int = 2000) -> builtins.list[ListItem]:
        """Every item of every scope (a parent's dashboard), by scope, list and order."""
        query = (
            select(items_table).order_by(items_table.c.scope_id, items_table.c.list_name, items_table.c.id).limit(limit)
        )
        async with self.db.read(metadata) as conn:
            return [_item(r) for r in (await conn.execute(query)).all()]
