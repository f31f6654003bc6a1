"""halo.db's tables as parts of a move: one `TablePart` per table of PostgreSQL's schema.

The schema is Alembic's (reflected from the target or source database at head). On the
embedded side the same tables are made in halo.db from it with generic types — the types
the stores' own `create_all` uses — so halo reads the file as if it had written it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    Table,
    UniqueConstraint,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from halo.storage.family import FAMILY_COLUMN
from halo.storage.move.digest import canonical
from halo.storage.move.part import BATCH, Embedded, MoveError, Postgres, Side

ALEMBIC_TABLE = "alembic_version"
Row = dict[str, Any]


def generic_table(table: Table, metadata: MetaData) -> Table:
    """`table` (reflected from PostgreSQL) with generic types and no server defaults, for SQLite.
    A counted key is (family_id, n) on PostgreSQL and n alone here: one family a file, and
    SQLite counts only a key of one column."""
    counted = [c for c in table.primary_key.columns if c.autoincrement is True and isinstance(c.type, Integer)]
    columns = [
        Column(
            c.name,
            c.type.as_generic(),
            primary_key=c.primary_key and (not counted or c in counted),
            nullable=c.nullable,
            autoincrement=c.autoincrement if c.primary_key else False,
        )
        for c in table.columns
    ]
    copy = Table(table.name, metadata, *columns)
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint):
            copy.append_constraint(UniqueConstraint(*[c.name for c in constraint.columns], name=constraint.name))
        elif isinstance(constraint, ForeignKeyConstraint):
            copy.append_constraint(
                ForeignKeyConstraint(
                    [c.name for c in constraint.columns],
                    [e.target_fullname for e in constraint.elements],
                    name=constraint.name,
                )
            )
    for index in table.indexes:
        Index(index.name, *[copy.c[c.name] for c in index.columns], unique=bool(index.unique))
    return copy


class TablePart:
    """One halo.db table. Its rows are a multiset: the checksum ignores their order."""

    ordered = False

    def __init__(self, table: Table, embedded: Table, family_id: str) -> None:
        self.table = table  # PostgreSQL's, with its native types
        self.embedded = embedded  # the same, generic, for halo.db
        self.name = table.name
        self.family_id = family_id  # for a row of an old halo.db table made before family_id
        self.columns = sorted(c.name for c in table.columns)

    def _on(self, side: Side) -> Table:
        return self.table if isinstance(side, Postgres) else self.embedded

    @staticmethod
    def _conn(side: Side) -> AsyncConnection | None:
        return side.conn if isinstance(side, Postgres) else side.db

    async def _embedded_columns(self, side: Embedded) -> set[str] | None:
        """The columns halo.db's table has; None when halo.db has no such table."""
        if side.db is None:
            return None

        def columns(sync: Any) -> set[str] | None:
            found = inspect(sync)
            if not found.has_table(self.name):
                return None
            return {c["name"] for c in found.get_columns(self.name)}

        return await side.db.run_sync(columns)

    async def _readable(self, side: Side) -> list[str] | None:
        """The columns to select on `side` (None: no table there). An embedded table that
        differs from the schema other than by a missing `family_id` stops the move."""
        if isinstance(side, Postgres):
            return self.columns
        present = await self._embedded_columns(side)
        if present is None:
            return None
        expected = set(self.columns)
        unknown, missing = present - expected, expected - present - {FAMILY_COLUMN}
        if unknown or missing:
            said = [f"has {', '.join(sorted(unknown))}"] if unknown else []
            said += [f"lacks {', '.join(sorted(missing))}"] if missing else []
            raise MoveError(
                f"halo.db's table {self.name} {' and '.join(said)}, unlike PostgreSQL's schema: "
                "this halo.db was made by another version of halo"
            )
        return [c for c in self.columns if c in present]

    async def count(self, side: Side) -> int:
        conn = self._conn(side)
        if conn is None or await self._readable(side) is None:
            return 0
        return int((await conn.execute(select(func.count()).select_from(self._on(side)))).scalar_one())

    async def read(self, side: Side) -> AsyncIterator[Sequence[Row]]:
        conn = self._conn(side)
        names = await self._readable(side) if conn is not None else None
        if conn is None or names is None:
            return
        table = self._on(side)
        result = await conn.stream(select(*[table.c[n] for n in names]))
        async for chunk in result.partitions(BATCH):
            rows: list[Row] = []
            for row in chunk:
                values = dict(zip(names, row, strict=True))
                if isinstance(side, Embedded) and self.family_id:  # a home's rows are the family it moves as
                    values[FAMILY_COLUMN] = self.family_id
                rows.append(values)
            yield rows

    def canonical(self, record: Row) -> bytes:
        return canonical(record[c] for c in self.columns)

    async def prepare(self, side: Side) -> None:
        if isinstance(side, Postgres):
            await side.conn.execute(self.table.delete())
            return
        assert side.db is not None
        await side.db.execute(text(f'DROP TABLE IF EXISTS "{self.name}"'))
        await side.db.run_sync(lambda sync: self.embedded.create(sync))

    async def write(self, side: Side, records: Sequence[Row]) -> None:
        conn = self._conn(side)
        assert conn is not None
        await conn.execute(self._on(side).insert(), [{k: utc(v) for k, v in r.items()} for r in records])

    async def finish(self, side: Side) -> None:
        """PostgreSQL: a serial key's sequence goes on after the highest key copied."""
        if not isinstance(side, Postgres):
            return
        for column in self.table.primary_key.columns:
            if not isinstance(column.type, Integer):
                continue
            sequence = (
                await side.conn.execute(
                    text("SELECT pg_get_serial_sequence(:table, :column)"), {"table": self.name, "column": column.name}
                )
            ).scalar_one()
            if sequence is None:
                continue
            # never backwards: on a database several families share, other families' keys may be higher
            highest = f'COALESCE((SELECT MAX("{column.name}") FROM "{self.name}"), 0) + 1'
            await side.conn.execute(
                text(f"SELECT setval(:sequence, GREATEST({highest}, nextval(:sequence)), false)"),
                {"sequence": sequence},
            )

    def local_paths(self, home: Path) -> list[Path]:
        return []


def utc(value: Any) -> Any:
    """A naive datetime from SQLite is UTC (halo writes UTC; SQLite drops the zone)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def table_parts(schema: MetaData, family_id: str, *, skip: frozenset[str] = frozenset()) -> list[TablePart]:
    """A part for each of the schema's tables (parents before the tables that refer to them),
    but Alembic's own and those `skip` names (another part moves them)."""
    embedded = MetaData()
    generic = {t.name: generic_table(t, embedded) for t in schema.sorted_tables if t.name != ALEMBIC_TABLE}
    return [
        TablePart(table, generic[table.name], family_id)
        for table in schema.sorted_tables
        if table.name != ALEMBIC_TABLE and table.name not in skip
    ]
