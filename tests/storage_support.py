"""halo.db on both backends in tests: a PostgreSQL database of each test's own, empty at the
newest migration (a copy of a template, or one an earlier test of the process had, emptied and
checked against the template) or empty without one, and every store's tables found by walking
halo/ and adapters/.

`python -m tests.storage_support "what changed"` writes a new Alembic revision with the
difference between the stores' tables and the migrated schema (review it before committing).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pkgutil
import queue
import sys
import threading
import uuid
import warnings
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


# What makes two databases the same to halo but for their rows: every object outside
# PostgreSQL's own schemas, with its definition and grants, and the Alembic revision.
SCHEMA_PRINT = """
SELECT md5(string_agg(x, E'\\n' ORDER BY x)) FROM (
  SELECT 'rel ' || c.oid::regclass::text || c.relkind::text || coalesce(c.relacl::text, '')
         || c.relrowsecurity::text || c.relforcerowsecurity::text || c.relpersistence::text
         || coalesce(c.reloptions::text, '') AS x
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  UNION ALL
  SELECT 'col ' || a.attrelid::regclass::text || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || a.attnotnull::text || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || coalesce(a.attacl::text, '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint ' || conrelid::regclass::text || conname || pg_get_constraintdef(oid) FROM pg_constraint
   WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  UNION ALL
  SELECT 'policy ' || polrelid::regclass::text || polname || polcmd::text || polpermissive::text || polroles::text
         || coalesce(pg_get_expr(polqual, polrelid), '') || coalesce(pg_get_expr(polwithcheck, polrelid), '')
    FROM pg_policy
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(oid) || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL
  SELECT 'function ' || pg_get_functiondef(p.oid) || coalesce(p.proacl::text, '') FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL
  SELECT 'type ' || t.oid::regtype::text || coalesce(t.typacl::text, '') FROM pg_type t
    JOIN pg_namespace n ON n.oid = t.typnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND t.typrelid = 0
  UNION ALL
  SELECT 'schema ' || nspname || coalesce(nspacl::text, '') FROM pg_namespace
  UNION ALL
  SELECT 'extension ' || extname || extversion FROM pg_extension
  UNION ALL
  SELECT 'sequence ' || seqrelid::regclass::text || seqstart::text || seqincrement::text || seqmax::text
         || seqmin::text || seqcycle::text FROM pg_sequence
  UNION ALL
  SELECT 'database ' || coalesce(datacl::text, '') || datconnlimit::text || datallowconn::text
    FROM pg_database WHERE datname = current_database()
  UNION ALL
  SELECT 'settings ' || setrole::text || coalesce(setconfig::text, '') FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT 'default acl ' || defaclacl::text FROM pg_default_acl
  UNION ALL
  SELECT 'large objects ' || count(*)::text FROM pg_largeobject_metadata
  UNION ALL
  SELECT 'prepared transactions ' || count(*)::text FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT 'revision ' || version_num FROM alembic_version
) everything
"""


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]  # "<nodeid> (setup)"


class _MigratedCopies:
    """Databases at the newest migration, ready before the tests that take them, kept by a
    thread of this process's own. A test's database is a new copy of the template, or one an
    earlier test of this process had, emptied again: every other connection to it ended, its
    schema checked to be the template's down to the grants (SCHEMA_PRINT), each table with
    rows but Alembic's truncated and each sequence used restarted. One that differs is dropped.

    Copying the template is PostgreSQL writing its catalogs (9 MB) to the WAL and syncing
    them, and dropping a database makes PostgreSQL 15 checkpoint the whole server: together a
    tenth of a second on an idle machine, most of a second in the suite, where the other
    worker and the halos it runs write too. Emptying one takes a fraction of that, and this
    thread does it while a test runs."""

    AHEAD = 2  # databases kept ready for the next tests

    def __init__(self) -> None:
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        # ("back", name, test), ("took", "", test), ("drop", name, ""), or None to stop
        self._work: queue.Queue[tuple[str, str, str] | None] = queue.Queue()
        self._handed: set[str] = set()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), name="halo-test-databases")
        self._thread.daemon = True  # a worker that dies leaves databases, as one mid-test always did
        self._thread.start()

    def take(self) -> str:
        """The next database's name (waiting while it is made); `give_back` it after the test."""
        got = self._ready.get()
        if isinstance(got, BaseException):
            self._ready.put(got)  # PostgreSQL is not there: every test that wants a database says so
            raise got
        self._handed.add(got)
        self._work.put(("took", "", _current_test()))
        return got

    def handed(self, name: str) -> bool:
        return name in self._handed

    def discard(self, name: str) -> None:
        """Drop `name`, never to be handed out again."""
        self._handed.discard(name)
        self._work.put(("drop", name, ""))

    def give_back(self, name: str) -> None:
        self._handed.discard(name)
        self._work.put(("back", name, _current_test()))

    def stop(self) -> None:
        """Drop every database made here, then the template."""
        self._work.put(None)
        self._thread.join()

    async def _serve(self) -> None:
        given_back: list[tuple[str, str]] = []  # (name, the test that had it)
        try:
            template = await _migrated_template()
            schema = await _schema_print(template)
            while True:
                while self._ready.qsize() < self.AHEAD and self._work.empty():
                    name = f"halo_test_{uuid.uuid4().hex[:12]}"
                    await _create(name, template)
                    self._ready.put(name)
                work = self._work.get()
                if work is None:
                    break
                what, name, test = work
                if what == "drop":
                    await _drop(name)
                    continue
                if what == "back":
                    given_back.append((name, test))
                    continue
                # Another test has started: a test that gave a database back is over, and the
                # processes it started are killed (tests/conftest.py): none of them writes now.
                over = [(n, t) for n, t in given_back if t != test]
                for name, had in over:
                    given_back.remove((name, had))
                    if await _emptied(name, schema):
                        self._ready.put(name)
                    else:
                        await _drop(name)
        except BaseException as exc:  # pytest.fail's too: the test waiting for a database reports it
            self._ready.put(exc)
            return
        for name, _ in given_back:
            await _drop(name)
        while not self._ready.empty():
            leftover = self._ready.get()
            if isinstance(leftover, str):
                await _drop(leftover)
        while _templates:
            await _drop(_templates.pop())


async def _connect(database: str) -> asyncpg.Connection:
    return await asyncpg.connect(POSTGRES.rsplit("/", 1)[0] + f"/{database}", timeout=10)


async def _schema_print(database: str) -> str:
    conn = await _connect(database)
    try:
        return str(await conn.fetchval(SCHEMA_PRINT))
    finally:
        await conn.close()


async def _emptied(database: str, schema: str) -> bool:
    """Empty `database` again, as a copy of the template is; False when it differs from one."""
    try:
        conn = await _connect(database)
    except (OSError, asyncpg.PostgresError):
        return False
    try:
        ended = await conn.fetchval(
            "SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        if ended is False or await conn.fetchval(SCHEMA_PRINT) != schema:
            return False
        written, called = await _used(conn)
        async with conn.transaction():
            if written:
                await conn.execute("TRUNCATE " + ", ".join(written))
            for sequence in called:
                await conn.execute(f"ALTER SEQUENCE {sequence} RESTART")
        return True
    except (OSError, asyncpg.PostgresError):
        return False
    finally:
        await conn.close()


async def _used(conn: asyncpg.Connection) -> tuple[list[str], list[str]]:
    """The tables but Alembic's that hold rows, and the sequences that were used."""
    tables = [
        row[0]
        for row in await conn.fetch(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'"
        )
    ]
    # Only what the test wrote is truncated: that makes new files for a table and its indexes,
    # a fraction of a second for all of them while the suite runs, when most tests write a few.
    written = await conn.fetchval(
        "SELECT array_remove(ARRAY["
        + ", ".join(f"CASE WHEN EXISTS (SELECT FROM {table}) THEN '{table}' END" for table in tables)
        + "]::text[], NULL)"
    )
    called = await conn.fetch(
        "SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences WHERE last_value IS NOT NULL"
    )
    return list(written or []), [row[0] for row in called]


async def _untouched(database: str) -> bool:
    """No rows and no sequence used: checked again as a test takes the database, so a write
    that came after it was emptied (a process of an earlier test's, say) is never read."""
    conn = await _connect(database)
    try:
        return await _used(conn) == ([], [])
    finally:
        await conn.close()


_copies: list[_MigratedCopies] = []  # started by the first test of this process that wants a copy


def drop_templates() -> None:
    """At the end of the test session (tests/conftest.py)."""
    while _copies:
        _copies.pop().stop()
    while _templates:
        asyncio.run(_drop(_templates.pop()))


async def new_database(*, migrated: bool = False) -> str:
    """A database `halo_test_<random>` no one else uses: a new, empty one, or (`migrated`) one
    at the newest migration with no rows (_MigratedCopies); its name. `drop_database` it after."""
    if migrated:
        if not _copies:
            _copies.append(_MigratedCopies())
        while True:
            name = await asyncio.to_thread(_copies[0].take)
            if await _untouched(name):
                return name
            warnings.warn(f"{name} had rows again after it was emptied: dropped, another taken", stacklevel=2)
            _copies[0].discard(name)
    name = f"halo_test_{uuid.uuid4().hex[:12]}"
    await _create(name)
    return name


async def drop_database(name: str) -> None:
    if _copies and _copies[0].handed(name):
        _copies[0].give_back(name)  # emptied for a later test, or dropped, by the thread that made it
    else:
        await _drop(name)


def database_url(name: str) -> str:
    return _url(name)


@asynccontextmanager
async def fresh_database(*, migrated: bool = False) -> AsyncIterator[str]:
    """`new_database` for the block; yields its SQLAlchemy URL and `drop_database`s it after."""
    name = await new_database(migrated=migrated)
    try:
        yield _url(name)
    finally:
        await drop_database(name)


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
