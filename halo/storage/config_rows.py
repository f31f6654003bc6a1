"""The family's halo.yaml on PostgreSQL, one row a version: the store of record every process
of the family follows (halo/workspace/config_reload.py).

A version is stored once it was validated; versions only go up, and a process that stores
the text the newest version already has gets that version back instead of a new one. Two
processes storing at once both try the next number: the key (family_id, version) lets one
in, and the other reads again and goes after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, insert, select
from sqlalchemy.exc import IntegrityError

from halo.storage.db import HaloDB
from memory.store import sha256_of

TRIES = 5  # a version taken by another process meanwhile: read again, at most this often

metadata = MetaData()
family_config = Table(
    "family_config",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),  # 1, 2, …: per family
    Column("text", Text, nullable=False),  # halo.yaml without this process's own part (config/editor.py)
    Column("sha256", String(64), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True, slots=True)
class StoredConfig:
    version: int
    text: str
    sha256: str


class ConfigRows:
    """The family's stored halo.yaml versions, through its `HaloDB`."""

    def __init__(self, db: HaloDB) -> None:
        self.db = db

    async def newest(self) -> StoredConfig | None:
        query = select(family_config.c.version, family_config.c.text, family_config.c.sha256)
        async with self.db.read(metadata) as conn:
            row = (await conn.execute(query.order_by(family_config.c.version.desc()).limit(1))).first()
        return StoredConfig(row.version, row.text, row.sha256) if row is not None else None

    async def newest_version(self) -> int | None:
        """The newest version's number alone (the key's index, no text): what every process asks
        twice a second, reading the row itself only once the number changed (`newest`)."""
        query = select(family_config.c.version).order_by(family_config.c.version.desc()).limit(1)
        async with self.db.read(metadata) as conn:
            found = (await conn.execute(query)).scalar()
        return int(found) if found is not None else None

    async def version_of(self, sha256: str) -> int | None:
        """The newest version with this text, or None when it was never stored."""
        query = select(family_config.c.version).where(family_config.c.sha256 == sha256)
        async with self.db.read(metadata) as conn:
            found = (await conn.execute(query.order_by(family_config.c.version.desc()).limit(1))).scalar()
        return int(found) if found is not None else None

    async def add(self, text: str) -> StoredConfig:
        """Store `text` as the next version (or return the newest, when it is that text)."""
        sha = sha256_of(text)
        for _ in range(TRIES):
            newest = await self.newest()
            if newest is not None and newest.sha256 == sha:
                return newest
            stored = StoredConfig((newest.version if newest else 0) + 1, text, sha)
            row = {"version": stored.version, "text": text, "sha256": sha, "updated_at": datetime.now(UTC)}
            try:
                # unfenced: the config is the family's, and a standby stores an edit too (its
                # version is taken by the primary key, so two processes cannot both store one)
                async with self.db.unfenced(metadata) as conn:
                    await conn.execute(insert(family_config).values(**row))
            except IntegrityError:
                continue  # another process stored that version first: go after it
            return stored
        raise RuntimeError(f"halo.yaml could not be stored: its version was taken {TRIES} times in a row")
