"""Several families on one halo.db (#31): every statement a family's `HaloDB` runs sees and
changes only that family's rows, whether or not the store wrote the filter; the same chat,
update and member ids live side by side; and on PostgreSQL row-level security refuses a
connection another family's rows, even for raw SQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import delete, func, insert, select, text, update

from adapters.telegram.store import TelegramStore
from config.settings import Settings
from halo.lists.store import ListStore
from halo.lists.store import items_table as list_items
from halo.lists.store import metadata as list_tables
from halo.reminders.when import When
from halo.storage import HaloDB
from halo.storage.family import ForeignFamilyRow
from tests.conftest import OWNER_AUTH, Outbox, write_home
from tests.storage_support import fresh_database
from tests.waiting import eventually
from transcripts.lines import Message

GROUP = "telegram:-1001234"  # the parents' group: the same chat id in both families


@pytest.fixture(autouse=True)
def _storage_as_each_test_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


@pytest.fixture
async def two_families(tmp_path: Path) -> AsyncIterator[tuple[HaloDB, HaloDB]]:
    """The Sharmas and the Joneses on one PostgreSQL database (SQLite's file is one family's)."""
    async with fresh_database(migrated=True) as url:
        sharma = HaloDB(tmp_path / "halo.db", url, family_id="sharma")
        jones = HaloDB(tmp_path / "halo.db", url, family_id="jones")
        yield sharma, jones
        await sharma.close()
        await jones.close()


@pytest.mark.postgres
async def test_a_statement_written_without_a_filter_reads_and_changes_only_its_familys_rows(
    two_families: tuple[HaloDB, HaloDB],
) -> None:
    sharma, jones = two_families
    await ListStore(sharma).add(GROUP, "shopping", ["apples", "milk"], by="wags")
    await ListStore(jones).add(GROUP, "shopping", ["bread"], by="wags")

    async with sharma.read(list_tables) as conn:  # no family_id anywhere in these statements
        everything = (await conn.execute(select(list_items.c.text).order_by(list_items.c.text))).scalars().all()
        counted = (await conn.execute(select(func.count()).select_from(list_items))).scalar_one()
        newest = select(func.max(list_items.c.id)).scalar_subquery()
        last = (await conn.execute(select(list_items.c.text).where(list_items.c.id == newest))).scalars().all()
        raw = (await conn.execute(text("SELECT count(*) FROM list_items"))).scalar_one()
    assert everything == ["apples", "milk"] and counted == 2
    assert last == ["milk"]  # unfiltered, the subquery would find the Joneses' newer bread and match nothing
    assert raw == (2 if await _rls_applies(sharma) else 3)  # text() is not rewritten: RLS, when it applies, is

    async with sharma.write(list_tables) as conn:
        ticked = (await conn.execute(update(list_items).values(done=True))).rowcount
        with pytest.raises(ForeignFamilyRow, match="jones"):
            await conn.execute(insert(list_items).values(family_id="jones", scope_id=GROUP, list_name="x", text="y"))
    assert ticked == 2
    async with sharma.write(list_tables) as conn:
        removed = (await conn.execute(delete(list_items))).rowcount
    assert removed == 2
    assert [(i.text, i.done) for i in await ListStore(jones).items(GROUP, "shopping")] == [("bread", False)]
    assert await ListStore(sharma).items(GROUP, "shopping") == []


@pytest.mark.postgres
async def test_the_same_update_ids_in_two_families_are_each_processed_once(two_families: tuple[HaloDB, HaloDB]) -> None:
    """Telegram update ids count per bot: two families' bots send the same ones."""
    sharma, jones = TelegramStore(two_families[0]), TelegramStore(two_families[1])
    assert await sharma.complete(7001) and await jones.complete(7001)
    assert not await sharma.complete(7001) and not await jones.complete(7001)
    assert await sharma.seen(7001) and not await sharma.seen(7002)


async def _rls_applies(db: HaloDB) -> bool:
    async with db.engine.connect() as conn:
        found = await conn.execute(text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"))
        return not found.scalar_one()


# --- PostgreSQL: row-level security, the second wall ----------------------------------------


@pytest.fixture
async def halo_role_url() -> AsyncIterator[str]:
    """A migrated database and a role like the one halo should connect as: no superuser, no
    BYPASSRLS (a superuser skips every policy). Yields the role's URL."""
    async with fresh_database(migrated=True) as url:
        role = f"halo_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            await admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
            await admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
            await admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
            yield url.replace("postgres@", f"{role}@", 1)
            await admin.execute(f"DROP OWNED BY {role}")
            await admin.execute(f"DROP ROLE {role}")
        finally:
            await admin.close()


@pytest.mark.postgres
async def test_row_level_security_refuses_a_connection_another_familys_rows(halo_role_url: str, tmp_path: Path) -> None:
    sharma = HaloDB(tmp_path / "unused.db", halo_role_url, family_id="sharma")
    jones = HaloDB(tmp_path / "unused.db", halo_role_url, family_id="jones")
    await ListStore(sharma).add(GROUP, "shopping", ["apples"], by="wags")
    await ListStore(jones).add(GROUP, "shopping", ["bread"], by="wags")
    async with sharma.read(list_tables) as conn:  # raw SQL, which the statement filter does not touch
        assert (await conn.execute(text("SELECT text FROM list_items"))).scalars().all() == ["apples"]
    await sharma.close()
    await jones.close()

    conn = await asyncpg.connect(halo_role_url.replace("+asyncpg", ""))
    try:
        assert await conn.fetch("SELECT text FROM list_items") == []  # a connection that names no family
        await conn.execute("SET halo.family_id = 'jones'")
        assert [r["text"] for r in await conn.fetch("SELECT text FROM list_items")] == ["bread"]
        assert await conn.execute("DELETE FROM list_items WHERE family_id = 'sharma'") == "DELETE 0"
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO list_items (family_id, scope_id, list_name, text, done, added_at) "
                "VALUES ('sharma', $1, 'shopping', 'planted', false, 0)",
                GROUP,
            )
        await conn.execute("SET halo.family_id = 'sharma'")
        assert [r["text"] for r in await conn.fetch("SELECT text FROM list_items")] == ["apples"]
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_every_family_table_has_row_level_security_forced() -> None:
    """A new table with `family_id` needs its policy in a migration (as 0006 does)."""
    async with fresh_database(migrated=True) as url:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            rows = await conn.fetch(
                """
                SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                       (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
                FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'family_id'
                WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
                """
            )
        finally:
            await conn.close()
    assert len(rows) > 20
    unguarded = sorted(
        r["relname"] for r in rows if not (r["relrowsecurity"] and r["relforcerowsecurity"] and r["policies"])
    )
    assert unguarded == []


@pytest.mark.postgres
async def test_every_family_table_but_the_clusters_own_refuses_a_write_at_a_stale_epoch() -> None:
    """A new table with `family_id` needs the fence trigger (migration 0011) in its migration."""
    async with fresh_database(migrated=True) as url:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            rows = await conn.fetch(
                """
                SELECT c.relname, EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid
                                          AND t.tgname = 'halo_fence') AS fenced
                FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'family_id'
                WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
                """
            )
            await conn.execute("SET halo.family_id = 'sharma'")
            await conn.execute("INSERT INTO family_leases VALUES ('sharma', 'n', 3, now() + interval '1 hour', 0)")
            await conn.execute("SET halo.epoch = '2'")  # a process that held epoch 2
            with pytest.raises(asyncpg.PostgresError, match="does not hold its family") as refused:
                await conn.execute("INSERT INTO list_items (family_id, list_name, text) VALUES ('sharma', 'x', 'y')")
            assert refused.value.sqlstate == "HL409"
        finally:
            await conn.close()
    unfenced = sorted(r["relname"] for r in rows if not r["fenced"])
    assert unfenced == ["family_config", "family_leases", "nodes"]


# --- two families' halos on one database, through the admin API -----------------------------


@pytest.mark.postgres
async def test_two_families_on_one_database_neither_sees_sends_lists_nor_purges_the_others(
    halo_role_url: str, tmp_path: Path, serve_halo: Callable[[Settings], Any]
) -> None:
    """The same members, the same Telegram chat ids; only `storage.family_id` differs."""
    from config.loader import load_settings

    running = {}
    telegram = {}
    for family in ("sharma", "jones"):
        home = write_home(tmp_path / family)
        settings = load_settings(home, storage={"url": halo_role_url, "family_id": family})
        running[family] = await serve_halo(settings)
        telegram[family] = Outbox()
        running[family].halo.delivery.register("telegram", telegram[family])

    now = datetime.now(UTC)
    for family, instance in running.items():
        halo = instance.halo
        await halo.reminders.store.add(
            set_by="wags",
            target="aarav",
            text=f"{family}: pack your kit",
            scope_id="telegram:1003",
            when=When(first=now + timedelta(hours=2)),
            urgent=False,
            now=now,
        )
        await halo.tasks.add("Home", f"{family}: fix the gate", scope_id="discord:3001", by="priya")
        await halo.lists.add(GROUP, "shopping", [f"{family} apples"], by="wags")
        await halo.delivery.to_member("wags", f"{family}: dinner at 7")
    sharma, jones = running["sharma"], running["jones"]
    for family, instance in running.items():
        line = Message(id=f"{family}-1", ts=now, scope_id=GROUP, text=family, speaker="wags")
        await instance.halo.transcripts.append(line)

    for family, instance in running.items():
        other = "jones" if family == "sharma" else "sharma"

        async def sent(outbox: Outbox = telegram[family], family: str = family) -> bool:
            return outbox.to("telegram:1001") == [f"{family}: dinner at 7"]

        await eventually(sent, what=f"{family}'s message, sent by {family}'s halo alone")
        async with instance.http.get(instance.url("/reminders"), headers=OWNER_AUTH) as r:
            reminders = await r.json()
        assert [x["text"] for x in reminders] == [f"{family}: pack your kit"]
        async with instance.http.get(instance.url("/tasks"), headers=OWNER_AUTH) as r:
            assert [t["title"] for t in await r.json()] == [f"{family}: fix the gate"]
        async with instance.http.get(instance.url("/lists"), headers=OWNER_AUTH) as r:
            assert other not in str(await r.json()) and f"{family} apples" in str(await r.json())
        their_reminder = next(x["id"] for x in await _reminders_of(running[other]))
        async with instance.http.delete(instance.url(f"/reminders/{their_reminder}"), headers=OWNER_AUTH) as r:
            assert r.status == 404  # the other family's reminder is not there to cancel
    assert [x["state"] for x in await _reminders_of(sharma)] == ["pending"]
    assert [x["state"] for x in await _reminders_of(jones)] == ["pending"]

    both = [("jones", "jones-1"), ("sharma", "sharma-1")]
    assert sorted(await _superuser_rows(halo_role_url, GROUP_LINES)) == both
    async with jones.http.post(
        jones.url(f"/sessions/{GROUP}/purge"), params={"confirm": GROUP}, headers=OWNER_AUTH
    ) as r:
        assert r.status == 200, await r.text()
    assert await _superuser_rows(halo_role_url, "SELECT family_id, text FROM outbox ORDER BY family_id") == [
        ("jones", "jones: dinner at 7"),
        ("sharma", "sharma: dinner at 7"),
    ]
    assert await _superuser_rows(halo_role_url, GROUP_LINES) == [("sharma", "sharma-1")]
    async with sharma.http.get(sharma.url("/sessions"), headers=OWNER_AUTH) as r:
        assert GROUP in await r.json()
    async with jones.http.get(jones.url("/sessions"), headers=OWNER_AUTH) as r:
        assert GROUP not in await r.json()


GROUP_LINES = f"SELECT family_id, line::json->>'id' FROM transcript_lines WHERE scope_id = '{GROUP}'"


async def _reminders_of(instance: Any) -> list[dict[str, Any]]:
    async with instance.http.get(instance.url("/reminders"), headers=OWNER_AUTH) as r:
        found: list[dict[str, Any]] = await r.json()
        return found


async def _superuser_rows(role_url: str, query: str) -> list[tuple[Any, ...]]:
    """What is really in the database, every family's rows (the superuser skips the policies)."""
    url = role_url.replace("+asyncpg", "").split("://", 1)[1].split("@", 1)[1]
    conn = await asyncpg.connect(f"postgresql://postgres@{url}")
    try:
        return [tuple(r) for r in await conn.fetch(query)]
    finally:
        await conn.close()
