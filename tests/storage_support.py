"""halo.db on both backends in tests: a fresh PostgreSQL database per test, dropped after it,
and every store's tables found by walking halo/ and adapters/.

`python -m tests.storage_support "what changed"` writes a new Alembic revision with the
difference between the stores' tables and the migrated schema (review it before committing).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pkgutil
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import MetaData

from halo.storage import HaloDB
from halo.storage.family import carry_family

POSTGRES = os.environ.get("HALO_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
PACKAGES = ("halo", "adapters")


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(POSTGRES, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES} ({exc}). The `postgres` tests need it: "
            ".ci/run starts it (pg_ctlcluster … main start); set HALO_TEST_POSTGRES for another server.",
            pytrace=False,
        )


def _url(database: str) -> str:
    return POSTGRES.replace("postgresql://", "postgresql+asyncpg://", 1).rsplit("/", 1)[0] + f"/{database}"


_templates: list[str] = []  # this process's migrated template database, once made


async def _migrated_template() -> str:
    """A database at the newest migration, made once per test process: copying it is faster
    than migrating each test's database (the tests that prove the migration start empty)."""
    if not _templates:
        name = f"halo_template_{uuid.uuid4().hex[:12]}"
        await _create(name)
        db = HaloDB(Path("unused.db"), _url(name))
        await db.prepare()
        await db.close()
        _templates.append(name)
    return _templates[0]


async def _create(name: str, template: str | None = None) -> None:
    admin = await _admin()
    try:
        await admin.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    finally:
        await admin.close()


async def _drop(name: str) -> None:
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def drop_templates() -> None:
    """At the end of the test session (tests/conftest.py)."""
    while _templates:
        asyncio.run(_drop(_templates.pop()))


async def new_database(*, migrated: bool = False) -> str:
    """A new database `halo_test_<random>`, empty or (`migrated`) at the newest migration; its
    name. `drop_database` it after."""
    name = f"halo_test_{uuid.uuid4().hex[:12]}"
    await _create(name, await _migrated_template() if migrated else None)
    return name


async def drop_database(name: str) -> None:
    await _drop(name)


def database_url(name: str) -> str:
    return _url(name)


@asynccontextmanager
async def fresh_database(*, migrated: bool = False) -> AsyncIterator[str]:
    """`new_database` for the block; yields its SQLAlchemy URL and drops the database after."""
    name = await new_database(migrated=migrated)
    try:
        yield _url(name)
    finally:
        await _drop(name)


def every_store_metadata() -> list[MetaData]:
    """Each module-level `MetaData` under halo/ and adapters/ (each with `family_id`, as
    HaloDB gives it): what halo.db holds, found rather than listed, so a new store's
    table cannot be forgotten by the migrations."""
    found: dict[int, MetaData] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, f"{package_name}."):
            if ".migrations" in module.name:
                continue
            for value in vars(importlib.import_module(module.name)).values():
                if isinstance(value, MetaData) and value.tables:
                    found[id(value)] = value
    for metadata in found.values():
        carry_family(metadata)
    return sorted(found.values(), key=lambda m: sorted(m.tables))


async def _new_revision(message: str) -> None:
    from alembic import command
    from sqlalchemy.ext.asyncio import create_async_engine

    from halo.storage.migrate import alembic_config, upgrade

    async with fresh_database() as url:
        engine = create_async_engine(url)
        await upgrade(engine)
        metadata = every_store_metadata()
        async with engine.begin() as conn:
            await conn.run_sync(
                lambda c: command.revision(alembic_config(c, metadata), message=message, autogenerate=True)
            )
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(_new_revision(" ".join(sys.argv[1:]) or "schema change"))
