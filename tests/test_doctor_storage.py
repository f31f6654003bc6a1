"""`halo doctor` on PostgreSQL (issue 24): reachable, the schema at head, and what is missing,
said plainly, against real databases; the password never shown."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from config.settings import Settings
from halo.runtime.doctor import check_storage
from halo.storage.migrate import head_revision
from tests.storage_support import fresh_database

pytestmark = pytest.mark.postgres


def with_password(url: str) -> str:
    return make_url(url).set(password="s3cret-pw").render_as_string(hide_password=False)


async def execute(url: str, sql: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


async def test_no_check_without_a_storage_url(settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)
    assert await check_storage(settings_for()) is None


async def test_an_unreachable_server_is_named_without_its_password(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HALO_STORAGE__URL", "postgresql://halo:s3cret-pw@127.0.0.1:1/halo")
    check = await check_storage(settings_for())
    assert check is not None and not check.ok
    assert "127.0.0.1:1/halo is unreachable" in check.detail and "check storage.url" in check.fix
    assert "s3cret-pw" not in check.detail + check.fix


async def test_the_schema_is_checked_against_this_halos_head(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
):
    async with fresh_database() as empty:
        monkeypatch.setenv("HALO_STORAGE__URL", with_password(empty))
        check = await check_storage(settings_for())
        assert check is not None and check.ok and check.warn
        assert "empty" in check.detail and "halo storage migrate --to" in check.fix
        assert "s3cret-pw" not in check.detail + check.fix

    async with fresh_database(migrated=True) as url:
        monkeypatch.setenv("HALO_STORAGE__URL", url)
        check = await check_storage(settings_for())
        assert check is not None and check.ok and not check.warn
        assert f"schema at revision {head_revision()} (the newest)" in check.detail

        await execute(url, "DROP TABLE task_notes")
        check = await check_storage(settings_for())
        assert check is not None and not check.ok
        assert "lacks the table(s) task_notes" in check.detail

        await execute(url, "UPDATE alembic_version SET version_num = '0001'")
        check = await check_storage(settings_for())
        assert check is not None and check.ok and check.warn
        assert "revision 0001" in check.detail and "halo upgrades it when it starts" in check.fix

        await execute(url, "UPDATE alembic_version SET version_num = '9999'")
        check = await check_storage(settings_for())
        assert check is not None and not check.ok and "does not know" in check.detail


async def test_a_database_of_something_else_is_said_so(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
):
    async with fresh_database() as url:
        await execute(url, "CREATE TABLE invoices (id int)")
        monkeypatch.setenv("HALO_STORAGE__URL", url)
        check = await check_storage(settings_for())
        assert check is not None and not check.ok
        assert "not halo's (invoices)" in check.detail
