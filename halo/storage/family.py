"""Every row in halo.db carries the id of the family it belongs to.

A store declares only its own columns; `HaloDB` adds `family_id` to each table it is handed
(`carry_family`), and the column's default reads the id from the engine the row is written
through, so no insert can leave it out. One family per database today: nothing filters on
it yet. Hosting several families becomes additive: PostgreSQL row-level security on this
column, and natural keys widened to (family_id, key) in a migration.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, MetaData, String

FAMILY_COLUMN = "family_id"
FAMILY_OPTION = "halo_family_id"  # the engine's execution option that holds the id
FAMILY_ID_LENGTH = 64


def _family_of(context: Any) -> str:
    """The column default: the family of the engine this insert runs on."""
    family_id = context.execution_options.get(FAMILY_OPTION)
    if not family_id:
        raise RuntimeError("a row was written outside HaloDB: its engine names no family")
    return str(family_id)


def family_column(*, primary_key: bool = False) -> Column[str]:
    """The column; a table declares it itself only to put it in its primary key."""
    return Column(FAMILY_COLUMN, String(FAMILY_ID_LENGTH), nullable=False, primary_key=primary_key, default=_family_of)


def carry_family(metadata: MetaData) -> None:
    """Give each of `metadata`'s tables its `family_id` column (once; idempotent)."""
    for table in metadata.tables.values():
        if FAMILY_COLUMN not in table.c:
            table.append_column(family_column())
