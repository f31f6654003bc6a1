"""PostgreSQL's schema of halo.db's tables, kept by Alembic (the revisions in migrations/).

`upgrade` brings a database to the newest revision inside one transaction that first takes a
transaction-level advisory lock: processes starting together take turns, and the second finds
the schema already at head. PostgreSQL's DDL is transactional, so a failed upgrade leaves the
schema as it was. SQLite does not use this: its file is made by `create_all` (halo/storage/db.py).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, MetaData, inspect, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

MIGRATIONS = Path(__file__).with_name("migrations")
MIGRATION_LOCK = 0x68616C6F6D696772  # "halomigr": the advisory lock every halo process agrees on


def alembic_config(connection: Connection, target_metadata: list[MetaData] | None = None) -> Config:
    """Alembic's configuration without an alembic.ini: the revisions, and the connection they run on."""
    config = _config()
    config.attributes["connection"] = connection
    config.attributes["target_metadata"] = target_metadata
    return config


async def upgrade(engine: AsyncEngine) -> frozenset[str]:
    """Migrate to head; returns the tables the schema then has."""
    async with engine.begin() as conn:
        return await upgrade_in(conn)


async def upgrade_in(conn: AsyncConnection) -> frozenset[str]:
    """Migrate to head inside `conn`'s transaction (under the lock every halo process takes):
    `halo storage migrate` copies a family in the same transaction, so a failure undoes both."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    return await conn.run_sync(_upgrade)


def _config(**kwargs: object) -> Config:
    config = Config(**kwargs)  # type: ignore[arg-type]
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    """The newest revision this halo knows."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head()


def known_revisions() -> frozenset[str]:
    from alembic.script import ScriptDirectory

    return frozenset(s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions())


TABLE_DDL = re.compile(r'^(CREATE|DROP) TABLE "?(\w+)"?', re.MULTILINE)


def head_tables() -> frozenset[str]:
    """The tables a database at head has, read from the revisions' DDL written out offline
    (no database needed): what `halo doctor` expects to find."""
    buffer = io.StringIO()
    command.upgrade(_config(output_buffer=buffer), "head", sql=True)
    tables: set[str] = set()
    for verb, name in TABLE_DDL.findall(buffer.getvalue()):
        (tables.add if verb == "CREATE" else tables.discard)(name)
    return frozenset(tables)


def current_revision(connection: Connection) -> str | None:
    """The revision a database is at; None when Alembic never ran there."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _upgrade(connection: Connection) -> frozenset[str]:
    command.upgrade(alembic_config(connection), "head")
    return frozenset(inspect(connection).get_table_names())
