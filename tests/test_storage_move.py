"""Moving a family (issue 24, part 5): an embedded HALO_HOME with data made through halo itself
→ `halo storage migrate --to` a fresh PostgreSQL database → `--from` into a new HALO_HOME; the
round trip equals the original, a non-empty target is refused without --force, and a halo
built on the PostgreSQL copy goes on where the embedded one stopped."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from admin_api.starting import StartingFront
from config.loader import load_settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.runtime.app import build_halo
from halo.storage.move import MoveError, from_postgres, to_postgres
from halo.storage.move.digest import Digest, canonical
from halo.workspace.backups import export_workspace, import_workspace
from memory.state import JobState, JobStateStore
from memory.store import local_files
from tests import processes
from tests.conftest import Outbox, free_port, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import database_url, drop_database, fresh_database, new_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # `uv run halo` processes

FAMILY_ID = "sharma"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source family runs on the embedded store, whatever HALO_TEST_STORAGE says."""
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


async def say(halo: Halo, member_id: str, scope_id: str, text: str, platform: str = "telegram") -> str | None:
    family = halo.policy.family
    member = family.member(member_id)
    assert member is not None
    user = member.telegram_user_id if platform == "telegram" else member.discord_user_id
    envelope = Envelope(platform, resolve_scope(family, scope_id), Speaker(str(user), member=member), text)  # type: ignore[arg-type]
    return (await halo.gateway.handle(envelope)).text


async def stranger(halo: Halo, user_id: int, text: str) -> None:
    family = halo.policy.family
    scope = resolve_scope(family, f"telegram:{user_id}")
    await halo.gateway.handle(Envelope("telegram", scope, Speaker(str(user_id), None, display_name="Kiran"), text))


@pytest.fixture
async def family_home(tmp_path: Path, fake_llm: FakeOpenAI, embedded: None) -> Path:
    """A HALO_HOME whose halo.db holds rows of many stores, all made through halo."""
    home = write_home(tmp_path / "home", llm_yaml(fake_llm))
    halo = build_halo(load_settings(home))
    sent = Outbox()
    halo.delivery.register("telegram", sent)
    halo.delivery.register("discord", sent)
    try:
        fake_llm.reply("Noted, the dentist is on Friday.")
        assert (
            await say(halo, "mom", "telegram:1002", "The dentist is on Friday.") == "Noted, the dentist is on Friday."
        )
        assert "remind Aarav" in str(await say(halo, "mom", "telegram:1002", "/remind aarav in 20m pack your kit"))
        await say(halo, "priya", "discord:3001", "/task add ContextForge: Write the migration guide", "discord")
        await say(halo, "priya", "discord:3001", "/task note 1 drafted the first two sections", "discord")
        await say(halo, "mom", "telegram:-1001234", "/list add milk, eggs")
        await say(halo, "mom", "telegram:1002", "/remember Aarav's football boots are size 5")
        await stranger(halo, 5555, "hi, can I talk to you?")
        assert await halo.pairing.list_pending()
    finally:
        await halo.close()
    return home


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of a halo.db that holds rows, with them, sorted: what a round trip must give
    back (a table no store has used yet is absent, or there and empty)."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = {name: sorted(_rows_by_column(conn, name), key=repr) for name in names}
        return {name: rows for name, rows in found.items() if rows and name != "memory_jobs"}
    finally:
        conn.close()


def _rows_by_column(conn: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    """A table's rows with their columns in name order: a column an older file got by ALTER
    TABLE stands last there, and where Alembic's schema puts it in a file made afresh."""
    columns = sorted(r[1] for r in conn.execute(f'PRAGMA table_info("{table}")'))
    names = ", ".join(f'"{c}"' for c in columns)
    return conn.execute(f'SELECT {names} FROM "{table}"').fetchall()


def files(home: Path) -> dict[str, bytes]:
    """The transcripts, the audit log and the markdown memory, by path: what a round trip
    must give back byte for byte."""
    found = {p: p for p in (home / "transcripts").glob("*.jsonl")}
    found |= {home / f.path: home / f.path for f in local_files(home)}
    found[home / "logs" / "events.jsonl"] = home / "logs" / "events.jsonl"
    return {path.relative_to(home).as_posix(): path.read_bytes() for path in found if path.is_file()}


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database (no schema: the move migrates it)."""
    async with fresh_database() as url:
        yield url


async def pg_count(url: str, table: str) -> int | None:
    """Rows of `table`; None when the database has no such table."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            exists = (await conn.execute(text("SELECT to_regclass(:t)"), {"t": table})).scalar()
            if exists is None:
                return None
            return int((await conn.execute(text(f'SELECT count(*) FROM "{table}"'))).scalar_one())
    finally:
        await engine.dispose()


async def test_a_family_goes_to_postgresql_and_back_unchanged(
    family_home: Path, database: str, tmp_path: Path, fake_llm: FakeOpenAI
):
    progress = JobStateStore(family_home / "halo.db")  # distillation's and extraction's progress moves too
    progress.put(JobState("web:mom", "distill", offset=1234, runs=3, items=9, pending=[[10, 20]]))
    progress.put(JobState("web:mom", "graph", offset=99))  # graph memory's stays with its local graph
    jobs = [s for s in progress.all() if s.job != "graph"]
    progress.close()
    original = tables(family_home / "halo.db")
    assert {"outbox", "reminders", "tasks", "task_notes", "pairing_requests", "list_items", "usage"} <= set(original)

    there = await to_postgres(family_home, database, family_id=FAMILY_ID)
    by_part = {m.part: m for m in there}
    assert all(m.ok for m in there)
    assert by_part["outbox"].target_records == len(original["outbox"]) > 0
    assert await pg_count(database, "task_notes") == len(original["task_notes"]) == 2

    assert by_part["transcripts"].target_records == sum(
        len(p.read_text().splitlines()) for p in (family_home / "transcripts").glob("*.jsonl")
    )
    assert by_part["memory files"].target_records >= 3  # SOUL.md, the USER.md files, MEMORY.md
    assert by_part["audit log"].target_records > 0
    assert by_part["memory jobs"].target_records == len(jobs) >= 1

    back_home = tmp_path / "back"
    back = await from_postgres(back_home, database)
    assert all(m.ok for m in back)
    assert [(m.part, m.source_checksum) for m in back] == [(m.part, m.target_checksum) for m in there]
    assert tables(back_home / "halo.db") == original
    assert JobStateStore(back_home / "halo.db").all() == jobs, "the progress came back as it went"
    original_files = files(family_home)
    assert "memory/scopes" in str(list(original_files)) and "transcripts/" in str(list(original_files))
    assert files(back_home) == original_files
    assert not [p for p in back_home.iterdir() if p.name.startswith(".migrate-")]  # the staging folder is gone

    # the embedded halo on the returned home goes on where the family was
    shutil.copy(family_home / "halo.yaml", back_home / "halo.yaml")
    halo = build_halo(load_settings(back_home))
    try:
        await halo.start_background()
        assert "#2" in str(await say(halo, "priya", "discord:3001", "/task add ContextForge: Review it", "discord"))
        fake_llm.reply("Friday it is.")
        assert await say(halo, "mom", "telegram:1002", "When is the dentist?") == "Friday it is."
        assert "The dentist is on Friday." in fake_llm.last_prompt_text()
    finally:
        await halo.close()


async def test_a_target_with_data_is_refused_without_force(family_home: Path, database: str, tmp_path: Path):
    await to_postgres(family_home, database, family_id=FAMILY_ID)
    tasks_before = await pg_count(database, "tasks")

    with pytest.raises(MoveError, match=r"already holds halo's data: .*outbox \(\d+\).*--force"):
        await to_postgres(family_home, database, family_id=FAMILY_ID)
    assert await pg_count(database, "tasks") == tasks_before

    # the embedded side: the original home is not empty either
    with pytest.raises(MoveError, match=r"already holds halo's data: .*tasks \(1\).*transcripts \(\d+\).*--force"):
        await from_postgres(family_home, database)

    # --force replaces: PostgreSQL gets what the (now smaller) home holds, no more
    conn = sqlite3.connect(family_home / "halo.db")
    with conn:
        conn.execute("DELETE FROM task_notes")
    conn.close()
    moved = await to_postgres(family_home, database, family_id=FAMILY_ID, force=True)
    assert all(m.ok for m in moved)
    assert await pg_count(database, "task_notes") == 0 and await pg_count(database, "tasks") == tasks_before

    # and into the home: the replaced halo.db and files are kept aside, not deleted
    before, before_files = tables(family_home / "halo.db"), files(family_home)
    stray = family_home / "memory" / "scopes" / ("0" * 16) / "MEMORY.md"  # a file PostgreSQL has no row for
    stray.parent.mkdir(parents=True)
    stray.write_text("- kept only here\n")
    await from_postgres(family_home, database, force=True)
    assert tables(family_home / "halo.db") == before and files(family_home) == before_files
    assert not stray.exists()  # the home holds what PostgreSQL holds, no more
    [aside] = (family_home / "backups").glob("before-migrate-*")
    assert tables(aside / "halo.db") == before
    assert (aside / "SOUL.md").read_bytes() == before_files["SOUL.md"]
    assert (aside / stray.relative_to(family_home)).read_text() == "- kept only here\n"


async def test_a_failed_copy_leaves_postgresql_as_it_was(family_home: Path, database: str):
    """A row PostgreSQL rejects half-way (SQLite never enforced the length): schema and rows
    are rolled back together, and the error says what PostgreSQL said."""
    conn = sqlite3.connect(family_home / "halo.db")
    with conn:
        conn.execute("UPDATE tasks SET owner = ?", ("x" * 500,))
    conn.close()
    with pytest.raises(MoveError, match="nothing was changed"):
        await to_postgres(family_home, database, family_id=FAMILY_ID)
    assert await pg_count(database, "alembic_version") is None  # not even the migration stayed
    assert await pg_count(database, "outbox") is None


async def test_halo_on_the_postgresql_copy_goes_on(
    family_home: Path, database: str, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """A halo on the copy, with a HALO_HOME of its own that holds nothing but halo.yaml: the
    scope's history, memory and rows all come from PostgreSQL."""
    await to_postgres(family_home, database, family_id=FAMILY_ID)
    monkeypatch.setenv("HALO_STORAGE__URL", database)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(family_home / "halo.yaml", elsewhere / "halo.yaml")
    halo = build_halo(load_settings(elsewhere))
    try:
        await halo.start_background()  # as `halo serve` does: the schema checked, the memory mirror joined
        # the moved task is there, and the next one is numbered after it (the sequence moved on)
        reply = await say(halo, "priya", "discord:3001", "/task add ContextForge: Review the guide", "discord")
        assert "#2" in str(reply)
        fake_llm.reply("Friday it is.")
        assert await say(halo, "mom", "telegram:1002", "When is the dentist?") == "Friday it is."
        prompt = fake_llm.last_prompt_text()
        assert "The dentist is on Friday." in prompt and "Noted, the dentist is on Friday." in prompt
        assert "football boots are size 5" in prompt  # MEMORY.md, from PostgreSQL
        assert [p.platform_user_id for p in await halo.pairing.list_pending()] == ["5555"]
    finally:
        await halo.close()
    assert await pg_count(database, "tasks") == 2


async def test_halo_export_on_postgresql_holds_what_lives_there(
    family_home: Path, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Exported from a HALO_HOME that holds nothing but halo.yaml: the archive holds what
    PostgreSQL keeps (rows as they are there now, transcripts, audit log, memory files)."""
    await to_postgres(family_home, database, family_id=FAMILY_ID)
    engine = create_async_engine(database)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE tasks SET title = 'Moved and edited on PostgreSQL'"))
    await engine.dispose()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(family_home / "halo.yaml", elsewhere / "halo.yaml")

    archive = tmp_path / "family.tar.gz"
    done = await asyncio.to_thread(halo_command, elsewhere, "export", str(archive), storage_url=database)
    assert done.returncode == 0, done.stderr
    restored = tmp_path / "restored"
    import_workspace(archive, restored)
    [task] = tables(restored / "halo.db")["tasks"]
    assert "Moved and edited on PostgreSQL" in task
    assert tables(restored / "halo.db")["task_notes"] == tables(family_home / "halo.db")["task_notes"]
    assert files(restored) == files(family_home)


def halo_command(
    home: Path, *args: str, storage_url: str | None = None, **more_env: str
) -> subprocess.CompletedProcess[str]:
    """`uv run halo …` on `home`, embedded unless `storage_url` says otherwise."""
    env = {k: v for k, v in os.environ.items() if k != "HALO_STORAGE__URL"} | {"HALO_HOME": str(home)} | more_env
    if storage_url is not None:
        env["HALO_STORAGE__URL"] = storage_url
    return processes.run(
        ["uv", "run", "--no-sync", "halo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def password_url() -> Iterator[str]:
    """A fresh database named by a URL with a password (trust auth ignores it): it must never be printed."""
    name = asyncio.run(new_database())
    url = make_url(database_url(name)).set(drivername="postgresql", password="s3cret-pw")
    yield url.render_as_string(hide_password=False)
    asyncio.run(drop_database(name))


def test_the_cli_moves_a_family_and_never_prints_the_password(family_home: Path, password_url: str, tmp_path: Path):
    def halo_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return halo_command(home, "storage", "migrate", *args)

    there = halo_cli(family_home, "--to", password_url)
    assert there.returncode == 0, there.stderr
    assert "s3cret-pw" not in there.stdout + there.stderr
    assert "outbox" in there.stdout and "DIFFERS" not in there.stdout
    assert "copied and verified" in there.stdout

    again = halo_cli(family_home, "--to", password_url)
    assert again.returncode == 2
    assert "already holds halo's data" in again.stderr and "--force" in again.stderr
    assert "s3cret-pw" not in again.stdout + again.stderr

    back_home = tmp_path / "back"
    back = halo_cli(back_home, "--from", password_url)
    assert back.returncode == 0, back.stderr
    assert tables(back_home / "halo.db") == tables(family_home / "halo.db")

    unreachable = halo_cli(back_home, "--from", "postgresql://halo:s3cret-pw@127.0.0.1:1/halo")
    assert unreachable.returncode == 2
    assert "did not let halo in" in unreachable.stderr and "s3cret-pw" not in unreachable.stderr


def test_a_checksum_tells_rows_apart_but_not_their_order():
    rows = [canonical([1, "milk", 2.5, None, True]), canonical([2, "eggs", 0.1, "x", False])]
    unordered = [Digest(ordered=False) for _ in range(3)]
    for record in rows:
        unordered[0].add(record)
    for record in reversed(rows):
        unordered[1].add(record)
    unordered[2].add(rows[0])
    unordered[2].add(canonical([2, "eggs", 0.1, "x", True]))
    assert unordered[0].hexdigest() == unordered[1].hexdigest() != unordered[2].hexdigest()
    ordered = [Digest(ordered=True) for _ in range(2)]
    for record in rows:
        ordered[0].add(record)
    for record in reversed(rows):
        ordered[1].add(record)
    assert ordered[0].hexdigest() != ordered[1].hexdigest()


async def test_a_halo_serving_the_home_is_stopped_first(family_home: Path, database: str):
    """`halo serve` on the same HALO_HOME (its front door, as it answers from the first moment):
    the move refuses, and PostgreSQL is not touched."""
    runner = web.AppRunner(StartingFront(family_home).front)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        done = await asyncio.to_thread(
            halo_command, family_home, "storage", "migrate", "--to", database, HALO_ADMIN__PORT=str(port)
        )
    finally:
        await runner.cleanup()
    assert done.returncode == 2 and "halo is running on" in done.stderr and "stop it first" in done.stderr
    assert await pg_count(database, "alembic_version") is None


async def test_a_row_that_would_write_outside_the_memory_leaves_the_home_as_it_was(
    family_home: Path, database: str, tmp_path: Path
):
    """The embedded side's all or nothing: a memory row PostgreSQL should never hold (a path
    that leaves the memory) is not written, the check sees the copy short, and the home the
    copy was going into is left exactly as it was, no staging folder behind."""
    await to_postgres(family_home, database, family_id=FAMILY_ID)
    engine = create_async_engine(database)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO memory_files (family_id, path, content, sha256, updated_at) "
                "VALUES (:f, '../outside.md', 'x', 'x', now())"
            ),
            {"f": FAMILY_ID},
        )
    await engine.dispose()
    target = tmp_path / "target"
    target.mkdir()
    (target / "halo.yaml").write_text((family_home / "halo.yaml").read_text())
    with pytest.raises(MoveError, match=r"does not match the source \(memory files\): nothing was changed"):
        await from_postgres(target, database)
    assert sorted(p.name for p in target.iterdir()) == ["halo.yaml"]
    assert not (tmp_path / "outside.md").exists()


async def test_what_only_running_processes_hold_is_never_moved(family_home: Path, database: str, tmp_path: Path):
    """halo/cluster's tables (nodes, the family lease) say who runs now: a move skips them,
    and the names it skips are exactly cluster's tables."""
    from halo.cluster.tables import metadata as cluster_tables
    from halo.storage.move.directions import RUNNING_STATE

    assert set(cluster_tables.tables) == RUNNING_STATE
    there = await to_postgres(family_home, database, family_id=FAMILY_ID)
    assert not {m.part for m in there} & RUNNING_STATE
    engine = create_async_engine(database)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO nodes (family_id, node_id, host, address, started_at, heartbeat_at) "
                    f"VALUES ('{FAMILY_ID}', 'n1', 'h', 'http://x', now(), now())"
                )
            )
    finally:
        await engine.dispose()
    back_home = tmp_path / "back"
    back = await from_postgres(back_home, database)
    assert all(m.ok for m in back) and not {m.part for m in back} & RUNNING_STATE
    assert not set(tables(back_home / "halo.db")) & RUNNING_STATE


async def test_an_older_halo_db_gets_the_family_id_and_a_foreign_one_is_refused(family_home: Path, database: str):
    """A table an older halo made before `family_id` gets the family's id on PostgreSQL; a table
    with a column PostgreSQL's schema does not know stops the move, naming it."""
    conn = sqlite3.connect(family_home / "halo.db")
    with conn:
        conn.execute("ALTER TABLE list_items DROP COLUMN family_id")
    conn.close()
    moved = await to_postgres(family_home, database, family_id=FAMILY_ID)
    assert all(m.ok for m in moved)
    engine = create_async_engine(database)
    async with engine.connect() as pg:
        families = (await pg.execute(text("SELECT DISTINCT family_id FROM list_items"))).scalars().all()
    await engine.dispose()
    assert families == [FAMILY_ID]

    conn = sqlite3.connect(family_home / "halo.db")
    with conn:
        conn.execute("ALTER TABLE tasks ADD COLUMN colour TEXT")
    conn.close()
    with pytest.raises(MoveError, match=r"halo\.db's table tasks has colour, unlike PostgreSQL's schema"):
        await to_postgres(family_home, database, family_id=FAMILY_ID, force=True)


async def test_a_second_family_moves_in_beside_the_first_and_out_alone(
    family_home: Path, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A database several families share: a move counts, replaces and copies its own family's
    rows only (its connection is bound to the family, halo/storage/family.py)."""
    await to_postgres(family_home, database, family_id=FAMILY_ID)
    moved = await to_postgres(family_home, database, family_id="jones")  # not refused: the Sharmas' rows are theirs
    assert all(m.ok for m in moved)
    per_family = "SELECT family_id, count(*) FROM tasks GROUP BY family_id ORDER BY family_id"
    assert await pg_rows(database, per_family) == [("jones", 1), ("sharma", 1)]
    await to_postgres(family_home, database, family_id="jones", force=True)  # replaces the Joneses' alone
    assert await pg_rows(database, per_family) == [("jones", 1), ("sharma", 1)]
    lists_before = await pg_rows(database, "SELECT family_id, text FROM list_items ORDER BY family_id, id")

    back = tmp_path / "jones-home"
    await from_postgres(back, database, family_id="jones")
    with sqlite3.connect(back / "halo.db") as copied:
        assert copied.execute("SELECT DISTINCT family_id FROM list_items").fetchall() == [("jones",)]
    assert await pg_rows(database, "SELECT family_id, text FROM list_items ORDER BY family_id, id") == lists_before

    monkeypatch.setenv("HALO_STORAGE__FAMILY_ID", "jones")  # the family this home serves
    archive = tmp_path / "jones.tar.gz"
    await asyncio.to_thread(export_workspace, family_home, archive, storage_url=database)
    import_workspace(archive, restored := tmp_path / "restored")
    with sqlite3.connect(restored / "halo.db") as exported:
        assert exported.execute("SELECT DISTINCT family_id FROM tasks").fetchall() == [("jones",)]


async def pg_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(r) for r in (await conn.execute(text(query))).all()]
    finally:
        await engine.dispose()
