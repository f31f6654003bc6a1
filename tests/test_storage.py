"""halo.db on PostgreSQL (`storage.url`) and on SQLite: the setting, the Alembic schema, the
family id every row carries, and halo end to end on PostgreSQL across a restart.

The stores' own suites run on both backends too (`on_both_stores` in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp.test_utils import TestServer
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, insert, select

from admin_api.server import create_app
from config.loader import ConfigError
from config.settings import Settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.turn import Turn
from halo.runtime.app import build_halo
from halo.storage import HaloDB
from halo.storage.db import SchemaError, StorageUnavailable
from halo.work.tasks import TaskStore, tasks_table
from halo.work.tasks import metadata as task_tables
from tests.conftest import OWNER_AUTH, Outbox, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import every_store_metadata, fresh_database
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def _storage_as_each_test_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose their backend themselves, even under HALO_TEST_STORAGE=postgres."""
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


# --- the setting ---------------------------------------------------------------------------


def test_a_postgresql_url_in_any_spelling_becomes_the_asyncpg_url_and_is_never_shown(settings_for) -> None:
    for given in ("postgresql://halo:s3cret@db:5432/halo", "postgres://halo:s3cret@db:5432/halo"):
        settings = settings_for(f"storage: {{url: '{given}'}}")
        assert settings.storage.url is not None
        assert settings.storage.url.get_secret_value() == "postgresql+asyncpg://halo:s3cret@db:5432/halo"
        assert "s3cret" not in str(settings.redacted())
    assert settings_for().storage.url is None  # unset: the SQLite file, as before


def test_a_url_that_is_not_postgresql_stops_start_up_naming_the_key_without_the_password(settings_for) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_for("storage: {url: 'mysql://halo:s3cret@db/halo'}")
    assert "storage.url" in str(refused.value) and "PostgreSQL" in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_the_environment_sets_the_url_and_the_family_id_defaults_to_the_familys_name(
    settings_for, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HALO_STORAGE__URL", "postgresql://postgres@127.0.0.1:5432/halo")
    settings = settings_for()
    assert settings.storage.url is not None and settings.storage.url.get_secret_value().startswith("postgresql+asyncpg")
    assert settings.family_id == "sharma"  # family: {name: Sharma}
    assert settings_for("storage: {family_id: sharma-home}").family_id == "sharma-home"
    assert settings.storage.lease_seconds == 10
    for bad in ("storage: {family_id: 'Sharma Home'}", "storage: {lease_seconds: 0}"):
        with pytest.raises(ConfigError):
            settings_for(bad)


# --- the schema ----------------------------------------------------------------------------


@pytest.mark.postgres
async def test_the_migrations_make_exactly_the_tables_the_stores_declare() -> None:
    """Every MetaData under halo/ and adapters/ against the schema Alembic builds: a store that
    adds a table or a column without a revision fails here (`python -m tests.storage_support`
    writes the revision)."""
    stores = every_store_metadata()
    assert {"outbox", "pairing_requests", "approvals", "reminders", "telegram_updates", "web_inbox"} <= {
        name for m in stores for name in m.tables
    }
    async with fresh_database() as url:
        db = HaloDB(Path("unused.db"), url)
        await db.prepare()
        async with db.engine.connect() as conn:
            differences = await conn.run_sync(
                lambda c: compare_metadata(MigrationContext.configure(c, opts={"compare_type": True}), stores)
            )
        await db.close()
    assert differences == []


@pytest.mark.postgres
async def test_processes_starting_together_on_an_empty_database_take_turns_migrating_it() -> None:
    async with fresh_database() as url:
        starting = [HaloDB(Path("unused.db"), url) for _ in range(3)]
        await asyncio.gather(*(db.prepare() for db in starting))
        await TaskStore(starting[0]).add("Halo", "Ship PostgreSQL", scope_id="discord:3001", by="priya")
        assert [t.title for t in await TaskStore(starting[2]).list()] == ["Ship PostgreSQL"]
        for db in starting:
            await db.close()
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            versions = [r["version_num"] for r in await conn.fetch("SELECT version_num FROM alembic_version")]
            assert versions == [newest_revision()]  # migrated once, to the head
        finally:
            await conn.close()


@pytest.mark.postgres
async def test_a_table_no_migration_creates_is_refused_by_name_on_postgresql(tmp_path: Path) -> None:
    stray = MetaData()
    table = Table("stray_notes", stray, Column("n", Integer))
    async with fresh_database(migrated=True) as url:
        db = HaloDB(tmp_path / "halo.db", url)
        with pytest.raises(SchemaError, match="stray_notes"):
            async with db.write(stray) as conn:
                await conn.execute(insert(table).values(n=1))
        await db.close()
    sqlite = HaloDB(tmp_path / "halo.db")  # the embedded file makes a store's tables on first use
    async with sqlite.write(stray) as conn:
        await conn.execute(insert(table).values(n=1))
    await sqlite.close()


# --- the family id -------------------------------------------------------------------------


async def test_every_row_carries_the_family_id_of_the_db_it_was_written_through(
    on_both_stores: str | None, tmp_path: Path
) -> None:
    db = HaloDB(tmp_path / "halo.db", on_both_stores, family_id="sharma")
    await TaskStore(db).add("Halo", "Ship PostgreSQL", scope_id="discord:3001", by="priya")
    async with db.read(task_tables) as conn:
        assert (await conn.execute(select(tasks_table.c.family_id))).scalars().all() == ["sharma"]
    await db.close()


async def test_a_halo_db_file_from_before_family_ids_gets_the_column_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "halo.db"
    with sqlite3.connect(path) as old:  # the tasks table as an older halo made it
        old.execute(
            "CREATE TABLE tasks (number INTEGER PRIMARY KEY, project VARCHAR(80) NOT NULL, title VARCHAR(200) "
            "NOT NULL, status VARCHAR(16) NOT NULL, owner VARCHAR(64), scope_id VARCHAR(128) NOT NULL, "
            "created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL)"
        )
        old.execute("INSERT INTO tasks VALUES (1, 'Halo', 'Old task', 'todo', NULL, 'discord:3001', 1.0, 1.0)")
    old.close()
    db = HaloDB(path, family_id="sharma")
    store = TaskStore(db)
    await store.add("Halo", "New task", scope_id="discord:3001", by="priya")
    assert [t.title for t in await store.list()] == ["Old task", "New task"]
    async with db.read(task_tables) as conn:
        assert (await conn.execute(select(tasks_table.c.family_id))).scalars().all() == ["sharma", "sharma"]
    await db.close()


async def test_halo_keeps_its_tables_where_the_settings_say(on_both_stores: str | None, settings_for) -> None:
    halo = build_halo(settings_for())
    try:
        assert halo.db.backend == ("postgresql" if on_both_stores else "sqlite")
        assert halo.db.family_id == "sharma"
    finally:
        await halo.close()


# --- halo end to end on PostgreSQL ----------------------------------------------------------


def _turn(halo: Any, member_id: str, scope_id: str) -> Turn:
    family = halo.family
    member = family.member(member_id)
    envelope = Envelope("web", resolve_scope(family, scope_id), Speaker(member_id, member=member), "…")
    return Turn(envelope, halo.policy)


async def _rows(url: str, query: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return [dict(r) for r in await conn.fetch(query)]
    finally:
        await conn.close()


@pytest.fixture
async def empty_postgres() -> AsyncIterator[str]:
    """A database with no tables: halo brings the schema up itself. Set up before `serve_halo`,
    so it is dropped after the halo serving from it is closed."""
    async with fresh_database() as url:
        yield url


@pytest.mark.postgres
async def test_halo_on_postgresql_answers_the_web_chat_and_a_restart_finds_what_it_left(
    empty_postgres: str, fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Callable[..., Any]
) -> None:
    url = empty_postgres
    settings = settings_for(llm_yaml(fake_llm), storage={"url": url})
    first = build_halo(settings)
    parents_chats = Outbox()  # parents' Telegram DMs: where an approval is asked
    first.delivery.register("telegram", parents_chats)
    server = TestServer(create_app(first), host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession() as http:
        fake_llm.reply("Soccer practice is at 5pm.")
        async with http.post(
            server.make_url("/api/chat"), json={"text": "When is soccer practice?"}, headers=OWNER_AUTH
        ) as r:
            assert r.status == 200 and (await r.json())["reply"] == "Soccer practice is at 5pm."
        async with http.post(
            server.make_url("/api/chat"),
            json={"text": "/remind aarav in 2h pack your kit"},
            headers={"Authorization": "Bearer mom-token"},
        ) as r:
            assert (await r.json())["reply"].startswith("OK, I'll remind Aarav")

    replies = "SELECT scope_id, text, state, family_id FROM outbox WHERE text LIKE 'Soccer%'"
    sent = {"scope_id": "web:wags", "text": "Soccer practice is at 5pm.", "state": "sent", "family_id": "sharma"}

    async def reply_row_sent() -> bool:
        return await _rows(url, replies) == [sent]

    await eventually(reply_row_sent, what="the reply's outbox row in PostgreSQL, sent")
    code = await first.pairing.on_stranger("telegram", Speaker("5555", None, display_name="Kiran Shah"))
    assert code is not None
    assert first.approvals is not None
    asked = await first.approvals.ask(_turn(first, "aarav", "web:aarav"), "web_search", {"q": "dinosaurs"}, "search")
    assert asked.startswith("Not done yet"), asked
    await eventually(lambda: parents_chats.to("telegram:1001"), what="the question in a parent's DM")
    await server.close()
    await first.close()
    assert not (settings.paths.halo_db).exists() or _sqlite_tables(settings.paths.halo_db) == set()

    again = await serve_halo(settings)  # a new process on the same database
    async with again.http.get(again.url("/status"), headers=OWNER_AUTH) as r:
        storage = (await r.json())["storage"]
        assert (storage["backend"], storage["family_id"]) == ("postgresql", "sharma")
    async with again.http.get(again.url("/pairing/requests"), headers=OWNER_AUTH) as r:
        assert [p["displayName"] for p in await r.json()] == ["Kiran Shah"]
    async with again.http.get(again.url("/reminders"), headers=OWNER_AUTH) as r:
        assert [(x["target"], x["text"], x["state"]) for x in await r.json()] == [("aarav", "pack your kit", "pending")]
    assert again.halo.approvals is not None
    assert [p.summary for p in await again.halo.approvals.waiting_for("wags")] == ["search"]


def _sqlite_tables(path: Path) -> set[str]:
    """halo.db's tables in the SQLite file: on PostgreSQL there should be none."""
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return names - {"memory_jobs"}  # distillation's watermarks stay beside the transcript files


@pytest.mark.postgres
async def test_a_postgresql_that_refuses_halo_stops_the_start_saying_where_without_the_password(
    tmp_path: Path,
) -> None:
    nobody = HaloDB(tmp_path / "halo.db", "postgresql+asyncpg://halo:s3cret@127.0.0.1:1/halo")
    with pytest.raises(StorageUnavailable) as refused:
        await nobody.prepare()
    assert "127.0.0.1:1/halo" in str(refused.value) and "s3cret" not in str(refused.value)
    await nobody.close()

    no_such_db = HaloDB(tmp_path / "halo.db", "postgresql+asyncpg://postgres@127.0.0.1:5432/halo_no_such_database")
    with pytest.raises(StorageUnavailable, match="halo_no_such_database"):
        await no_such_db.prepare()
    await no_such_db.close()


def newest_revision() -> str:
    """The head of halo's PostgreSQL migrations, as Alembic reads them from the package."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from halo.storage.migrate import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head
