"""The markdown memory on PostgreSQL (#24, #31): `memory_files` is its only store, held in memory
by the process serving the family; no HALO_HOME keeps a copy. Two homes share one database:
what one writes, a halo on the other tells the model and finds in its semantic index; an admin
change is in PostgreSQL when it is acknowledged; a purge removes the rows; a process that lost
its family writes nothing more; the embedded default writes none."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from config.loader import load_settings
from config.paths import scope_hash
from config.settings import Settings
from halo.storage import HaloDB
from halo.storage.db import Fenced
from halo.storage.memory_rows import MemoryRows
from halo.storage.memory_store import JOINED, RowMemory, mirror_identity
from memory.store import DiskMemory, MemoryFile, local_files, memory_md, scope_folder
from tests.conftest import OWNER_AUTH, free_port, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.semantic_helpers import save_concept_model
from tests.storage_support import fresh_database
from tests.transcript_support import transcript_text
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # halo serve processes on PostgreSQL

DM = "web:mom"
PARENTS = "telegram:-1001234"
MOM = "mom-token"
VET = "remember the puppy's vet is Dr. Okafor on Oak Road"


@pytest.fixture(autouse=True)
def _storage_as_each_test_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose their backend themselves, even under HALO_TEST_STORAGE=postgres."""
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


@pytest.fixture
async def shared_postgres() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return save_concept_model(tmp_path / "concept-model", ["puppy", "vet", "okafor", "grandma", "december"])


@pytest.fixture
def home_settings(tmp_path: Path, fake_llm: FakeOpenAI, model_dir: Path) -> Callable[..., Settings]:
    """Settings for a HALO_HOME of its own under tmp_path, with the fake model and a real embedder."""

    def make(name: str, url: str | None) -> Settings:
        semantic = f"memory:\n  semantic: {{embedder: model2vec, model: '{model_dir}', sync_interval_minutes: 60}}\n"
        home = write_home(tmp_path / name, llm_yaml(fake_llm) + semantic)
        return load_settings(home, **({"storage": {"url": url}} if url else {}))

    return make


async def rows(url: str, like: str = "%") -> dict[str, str]:
    """memory_files' rows (path → content), straight from PostgreSQL."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        found = await conn.fetch("SELECT path, content FROM memory_files WHERE path LIKE $1", like)
    finally:
        await conn.close()
    return {r["path"]: r["content"] for r in found}


def under(scope_id: str) -> str:
    return f"memory/scopes/{scope_hash(scope_id)}/%"


@pytest.mark.postgres
async def test_memory_written_through_one_home_is_what_a_halo_on_another_home_tells_the_model_and_finds(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    url = shared_postgres
    a_settings = home_settings("home-a", url)
    a_settings.paths.soul.write_text("# SOUL\n\nYou are Juniper, the Sharmas' assistant.\n")
    a = await serve_halo(a_settings)
    await a.halo.start_background()
    status, body = await a.chat(VET, token=MOM)
    assert status == 200
    await a.halo.memory.share(PARENTS, "Grandma visits in December", by="Wags", when=datetime.now(UTC))
    await a.halo.gateway.drain()

    async def recorded_in_postgres() -> bool:  # the write-behind's own timer, nothing flushed by hand
        dm, parents = await rows(url, under(DM)), await rows(url, under(PARENTS))
        memory = dm.get(f"memory/scopes/{scope_hash(DM)}/MEMORY.md", "")
        daily = [text for path, text in dm.items() if "/daily/" in path]
        return "Okafor" in memory and any("Okafor" in text for text in daily) and "Grandma" in str(parents)

    await eventually(recorded_in_postgres, what="A's fact, daily note and shared fact in memory_files")
    assert "SOUL.md" in await rows(url, "SOUL.md"), "the first process seeds the family's own files"

    assert a.halo.cluster is not None
    await a.halo.cluster.stop()  # A stops serving, as on a clean stop: its scope leases go back and B takes DM

    b_settings = home_settings("home-b", url)
    assert not b_settings.paths.memory_file(DM).exists()
    b = await serve_halo(b_settings)
    await b.halo.start_background()
    fake_llm.reply("Dr. Okafor, on Oak Road.")
    status, body = await b.chat("who is the puppy's vet?", token=MOM)
    assert status == 200 and body["reply"] == "Dr. Okafor, on Oak Road."
    prompt = fake_llm.last_prompt_text()
    assert "Okafor" in prompt, "B's model is told the fact A's home wrote"
    assert "You are Juniper" in prompt, "and the persona A's home had"
    assert "Grandma" not in prompt, "another scope's memory never reaches this one"

    assert b.halo.memory.files.store.names(scope_folder(DM) + "daily/"), "B holds the daily note too"
    for home in (a.halo.paths.home, b.halo.paths.home):
        assert list(local_files(home)) == [], "no home keeps a copy of the memory"
    hits = await b.halo.semantic.search([DM], "vet puppy Okafor")
    assert any(h.source == "MEMORY.md" and "Okafor" in h.text for h in hits), "B's own index was built on take"
    assert all("Okafor" not in h.text for h in await b.halo.semantic.search([PARENTS], "vet puppy Okafor"))


@pytest.mark.postgres
async def test_an_admin_distillation_is_in_postgresql_when_it_is_acknowledged_and_a_purge_removes_the_rows(
    shared_postgres: str, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    url = shared_postgres
    running = await serve_halo(home_settings("home-a", url))
    await running.halo.start_background()
    record = running.halo.memory_store
    assert record is not None
    record.every = 3600  # the timer never fires in this test: only the acknowledgement's flush can
    await running.chat("remember the bins go out on Tuesday", token=MOM)
    await running.halo.gateway.drain()
    await running.halo.memory.share(PARENTS, "Grandma visits in December", by="Wags", when=datetime.now(UTC))
    documents = running.halo.documents
    assert documents is not None
    await asyncio.to_thread(
        documents.store.add,
        DM,
        name="trip.txt",
        text="Flights on the 3rd.",
        by="Mom",
        when=datetime.now(UTC),
        pages=None,
        size=19,
        mime="text/plain",
    )
    assert await rows(url, under(DM)) == {}, "nothing flushed yet"

    async with running.http.post(running.url(f"/sessions/{DM}/distill"), headers=OWNER_AUTH) as r:
        assert r.status == 200
    stored = await rows(url, under(DM))  # no waiting: acknowledged means stored
    assert "bins go out on Tuesday" in stored[f"memory/scopes/{scope_hash(DM)}/MEMORY.md"]
    document = f"memory/scopes/{scope_hash(DM)}/files/001-trip.txt.md"
    assert "Flights on the 3rd." in stored[document]

    async with running.http.delete(running.url(f"/scopes/{DM}/files/1"), headers=OWNER_AUTH) as r:
        assert r.status == 200
    assert document not in await rows(url, under(DM)), "a deleted document's row is gone when it answers"

    async with running.http.post(running.url(f"/sessions/{DM}/purge"), params={"confirm": DM}, headers=OWNER_AUTH) as r:
        assert r.status == 200
    assert await rows(url, under(DM)) == {}, "the purged scope's rows are gone when the purge answers"
    assert "Grandma" in str(await rows(url, under(PARENTS))), "other scopes keep theirs"


@pytest.mark.postgres
async def test_what_a_turn_wrote_to_memory_is_in_postgresql_when_its_reply_comes(
    shared_postgres: str, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    """No write-behind between "Remembered" and the store of record: a crash right after the
    reply loses nothing, whichever process takes the family next."""
    url = shared_postgres
    running = await serve_halo(home_settings("home-a", url))
    await running.halo.start_background()
    assert running.halo.memory_store is not None
    running.halo.memory_store.every = 3600  # the write-behind's timer never comes

    status, body = await running.chat("/remember the bins go out on Tuesday", token=MOM)
    assert status == 200 and body["reply"].startswith("Remembered: ")
    stored = await rows(url, under(DM))  # no waiting: the reply means stored
    assert "bins go out on Tuesday" in stored[f"memory/scopes/{scope_hash(DM)}/MEMORY.md"]

    status, body = await running.chat("/share Grandma visits in December", token=MOM)
    assert status == 200 and body["reply"] == "Shared with the parents: Grandma visits in December"
    assert "Grandma visits in December" in str(await rows(url, under(PARENTS)))


@pytest.mark.postgres
async def test_a_memory_request_its_process_crashed_before_distilling_is_distilled_by_the_next_taker(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    url = shared_postgres
    crashed = await serve_halo(home_settings("home-a", url))
    await crashed.halo.start_background()
    assert crashed.halo.memory_store is not None
    crashed.halo.memory_store.every = 3600  # its flush never comes: as if killed before it
    fake_llm.reply("Got it.")
    status, _ = await crashed.chat("my shoe size is 38", token=MOM)  # the model answers; distilled after
    assert status == 200
    await crashed.halo.gateway.drain()
    assert "38" in crashed.halo.memory.read(DM), "distilled in its own home"
    assert await rows(url, under(DM)) == {}, "and never written to PostgreSQL"

    taker = await serve_halo(home_settings("home-b", url))  # another home, another process
    await taker.halo.scope_takers.ensure(DM)  # what taking the family does for each scope
    await taker.halo.gateway.drain()
    assert "Mom's shoe size: 38" in taker.halo.memory.read(DM)
    assert taker.halo.memory_store is not None
    await taker.halo.memory_store.flush()
    assert "shoe size: 38" in (await rows(url, under(DM)))[f"memory/scopes/{scope_hash(DM)}/MEMORY.md"]
    assert not (taker.halo.paths.home / "memory" / ".unrecorded").exists()


@pytest.mark.postgres
async def test_a_home_with_memory_from_before_storage_url_keeps_it_and_shares_it(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    settings = home_settings("home-a", shared_postgres)
    memory = settings.paths.memory_file(DM)
    memory.parent.mkdir(parents=True)
    memory.write_text("# Facts\n- The piano lesson moved to Thursdays.\n")  # from its embedded days
    running = await serve_halo(settings)
    await running.halo.start_background()
    fake_llm.reply("Thursdays.")
    await running.chat("when is piano?", token=MOM)
    assert "piano lesson moved to Thursdays" in fake_llm.last_prompt_text()
    assert "Thursdays" in (await rows(shared_postgres, under(DM)))[f"memory/scopes/{scope_hash(DM)}/MEMORY.md"]
    assert not memory.exists(), "uploaded, the file goes: PostgreSQL is the one place it is kept"


async def test_the_embedded_default_keeps_memory_in_files_only(
    home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    running = await serve_halo(home_settings("home", None))
    await running.halo.start_background()
    store = running.halo.memory_store
    assert isinstance(store, DiskMemory) and running.halo.memory.files.store is store
    assert running.halo.scope_takers.takers == []
    await running.chat(VET, token=MOM)
    await running.halo.gateway.drain()
    assert "Okafor" in running.halo.memory.read(DM)
    with sqlite3.connect(running.halo.paths.halo_db) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "memory_files" not in tables


@pytest.mark.postgres
async def test_a_home_from_before_sees_its_copies_go_and_a_differing_file_left_unread(
    shared_postgres: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A home an earlier halo kept a per-process mirror in: the copies equal to the rows go, with
    the mirror's manifests; a file that differs (edited by hand) stays where it is, unread, and
    the log names it. Nothing is uploaded from a home that served this database: a row missing
    there was deleted on purpose."""
    home = tmp_path / "home"
    db = HaloDB(tmp_path / "halo.db", shared_postgres)
    folder = scope_folder(DM)
    try:
        await MemoryRows(db).write_many([MemoryFile.of(memory_md(DM), "- rows\n"), MemoryFile.of("SOUL.md", "soul\n")])
        for relative, text in [
            ("SOUL.md", "soul\n"),  # as the rows have it
            (memory_md(DM), "- edited by hand\n"),
            (folder + "daily/2026-01-01.md", "purged elsewhere\n"),
            (JOINED, mirror_identity(db)),
            ("memory/.synced.json", "{}"),
            (folder + ".synced.json", "{}"),
        ]:
            (home / relative).parent.mkdir(parents=True, exist_ok=True)
            (home / relative).write_text(text)
        memory = RowMemory(MemoryRows(db), home)
        with caplog.at_level("WARNING"):
            await memory.join()
        await memory.load(folder)
        assert not (home / "SOUL.md").exists() and not (home / "memory/.synced.json").exists()
        assert not (home / folder / ".synced.json").exists()
        assert (home / memory_md(DM)).read_text() == "- edited by hand\n", "left where it was"
        assert memory.text(memory_md(DM)) == "- rows\n", "and not read: the rows are the memory"
        assert memory_md(DM) in caplog.text
        assert set(await MemoryRows(db).hashes()) == {"SOUL.md", memory_md(DM)}, "nothing uploaded"
        await memory.close()
    finally:
        await db.close()


@pytest.mark.postgres
async def test_a_process_that_lost_its_family_writes_no_memory_and_forgets_what_it_held(
    shared_postgres: str, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    """A writes a fact; B takes the family: A's next flush is refused by the fence, dropped, and
    A no longer holds what it held."""
    url = shared_postgres
    a = await serve_halo(home_settings("home-a", url))
    await a.halo.start_background()
    await a.halo.start_adapters()
    assert a.halo.cluster is not None and isinstance(a.halo.memory_store, RowMemory)
    store = a.halo.memory_store
    store.every = 3600
    await a.halo.take_scope(DM)
    where = memory_md(DM)
    await asyncio.to_thread(store.update, where, lambda text: text + "- from A\n")
    await store.flush()
    assert "from A" in (await rows(url, under(DM)))[where]

    b = await serve_halo(home_settings("home-b", url))
    await b.halo.start_background()
    assert b.halo.cluster is not None
    await a.halo.cluster.stop()  # A lets go (as when its lease lapses); its epoch is old from now on
    await b.halo.start_adapters()
    await eventually(b.halo.db.holds_family, what="B holding the family")
    await asyncio.to_thread(store.update, where, lambda text: text + "- stale A\n")
    with pytest.raises(Fenced):
        await store.flush()
    assert "stale A" not in (await rows(url, under(DM)))[where], "the stale process wrote nothing"
    assert not store.holds(where), "and what it held is forgotten"


@pytest.mark.postgres
async def test_two_halo_serve_processes_share_memory_and_a_kill_9_loses_none_of_it(tmp_path: Path) -> None:
    """Real processes: `halo serve` on home A is asked to remember a fact and is killed with
    SIGKILL as soon as it has answered; A never comes back. `halo serve` on home B takes the
    family, and B's model is told the fact."""
    from tests.storage_support import database_url, drop_database, new_database
    from tests.test_serve_cli import OWNER, halo_cmd, post_json, wait_healthy

    name = await new_database(migrated=True)
    url = database_url(name)
    fake = FakeOpenAI(default_reply="Noted.").start_in_thread()
    procs: list[subprocess.Popen[str]] = []

    async def serve(home: Path) -> str:
        write_home(home, llm_yaml(fake))
        port = free_port()
        env = {**os.environ, "HALO_STORAGE__URL": url}
        proc = halo_cmd("serve", home=home, port=port, env=env)
        procs.append(proc)
        await asyncio.to_thread(wait_healthy, port, proc)
        return f"http://127.0.0.1:{port}"

    try:
        a = await serve(tmp_path / "home-a")
        said = await asyncio.to_thread(post_json, f"{a}/api/chat", {"text": "remember the bins go out on Tuesday"})
        assert said["reply"] == "Noted."  # the model answered; the fact is distilled after the reply
        procs[0].kill()  # SIGKILL at once: whatever it had not written to PostgreSQL yet is gone with it
        await asyncio.to_thread(procs[0].wait, 30)

        b = await serve(tmp_path / "home-b")
        await asyncio.to_thread(post_json, f"{b}/api/chat", {"text": "/new"})  # the history no longer says it
        fake.reply("On Tuesday.")
        answer = await asyncio.to_thread(post_json, f"{b}/api/chat", {"text": "when do the bins go out?"})
        assert answer["reply"] == "On Tuesday."
        assert "bins go out on Tuesday" in fake.last_prompt_text()
        async with aiohttp.ClientSession() as http, http.get(f"{b}/status", headers=OWNER) as r:
            assert (await r.json())["storage"]["backend"] == "postgresql"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
            await asyncio.to_thread(proc.communicate, None, 120)
        fake.stop()
        await drop_database(name)


@pytest.mark.postgres
async def test_the_rows_api_a_migration_uses_writes_many_lists_all_and_keeps_families_apart(
    shared_postgres: str, tmp_path: Path
) -> None:
    ours, theirs = (
        HaloDB(tmp_path / "a.db", shared_postgres),
        HaloDB(tmp_path / "b.db", shared_postgres, family_id="other"),
    )
    try:
        files = [
            MemoryFile.of("SOUL.md", "# SOUL\nwith a NUL \x00 from a hand edit\n"),
            MemoryFile.of(f"memory/scopes/{scope_hash(DM)}/MEMORY.md", "- a fact\n"),
        ]
        assert await MemoryRows(ours).write_many(files) == 2
        await MemoryRows(theirs).write_many([MemoryFile.of("SOUL.md", "theirs\n")])
        listed = await MemoryRows(ours).all_files()
        assert [f.path for f in listed] == sorted(f.path for f in files)
        assert "\ufffd" in listed[0].content and "\x00" not in listed[0].content  # PostgreSQL's text holds no NUL
        assert all(f.sha256 == MemoryFile.of(f.path, f.content).sha256 for f in listed)
        assert [f.content for f in await MemoryRows(theirs).all_files()] == ["theirs\n"]
    finally:
        await ours.close()
        await theirs.close()


@pytest.mark.postgres
async def test_a_fact_shared_into_a_scope_before_its_first_take_here_is_not_rolled_back(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    """The parents group has had no message on this process when a parent shares a fact into it;
    its first message then takes the scope from PostgreSQL, which must not bring back the copy
    from before the share (found by test_memory_isolation on PostgreSQL)."""
    running = await serve_halo(home_settings("home", shared_postgres))
    await running.halo.start_background()
    await running.halo.memory.share(PARENTS, "Grandma visits in December", by="Wags", when=datetime.now(UTC))
    await running.halo.take_scope(PARENTS)  # what the group's first message does before its turn

    assert "Grandma visits in December" in running.halo.memory.read(PARENTS)
    assert "Grandma" in str(await rows(shared_postgres, under(PARENTS)))


async def job_rows(url: str, scope_id: str) -> dict[str, int]:
    """memory_jobs' watermarks of a scope (job → offset), straight from PostgreSQL."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        found = await conn.fetch('SELECT job, "offset" FROM memory_jobs WHERE scope_id = $1', scope_id)
    finally:
        await conn.close()
    return {r["job"]: r["offset"] for r in found}


def local_jobs(halo_db: Path) -> list[str]:
    with sqlite3.connect(halo_db) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_jobs'").fetchall():
            return []
        return [row[0] for row in db.execute("SELECT job FROM memory_jobs")]


@pytest.mark.postgres
async def test_distillations_progress_is_stored_with_its_memory_and_the_next_holder_resumes_there(
    shared_postgres: str, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    url = shared_postgres
    a = await serve_halo(home_settings("home-a", url))
    await a.halo.start_background()
    record = a.halo.memory_store
    assert record is not None
    record.every = 3600  # only the acknowledgement's flush writes
    await a.chat("remember the bins go out on Tuesday", token=MOM)
    await a.halo.gateway.drain()
    assert await job_rows(url, DM) == {}, "nothing flushed yet: neither the fact nor its watermark"

    async with a.http.post(a.url(f"/sessions/{DM}/distill"), headers=OWNER_AUTH) as r:
        assert r.status == 200
    end = a.halo.transcripts.size(DM)
    assert await job_rows(url, DM) == {"distill": end}, "the watermark is the transcript's end, in PostgreSQL"
    assert "bins go out on Tuesday" in (await rows(url, under(DM)))[f"memory/scopes/{scope_hash(DM)}/MEMORY.md"]
    assert local_jobs(a.halo.paths.halo_db) == [], "nor is it kept in this home's halo.db"

    assert a.halo.cluster is not None
    await a.halo.cluster.stop()
    b = await serve_halo(home_settings("home-b", url))
    await b.halo.start_background()
    await b.halo.take_scope(DM)
    resumed = b.halo.memory.state.get(DM, "distill")
    assert resumed.offset == end, "the next holder resumes where the last one stopped"
    assert b.halo.transcripts.size(DM) == end, "it holds the same bytes: the watermark means the same line"

    async with b.http.post(b.url(f"/sessions/{DM}/purge"), params={"confirm": DM}, headers=OWNER_AUTH) as r:
        assert r.status == 200
    assert await job_rows(url, DM) == {}, "a purge removes the scope's progress with its memory"


@pytest.mark.postgres
async def test_a_scope_purged_through_another_process_leaves_no_copy_in_this_home(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    """B served Mom's chat, then A purged it: when B serves the family again, its copy of the
    transcript and memory goes, not set aside, and its model is never told what was said."""
    url = shared_postgres
    b_first = await serve_halo(home_settings("home-b", url))
    await b_first.halo.start_background()
    await b_first.chat("remember the locker code is 4721", token=MOM)
    await b_first.halo.gateway.drain()
    assert b_first.halo.memory_store is not None
    await b_first.halo.memory_durable()
    assert b_first.halo.cluster is not None
    await b_first.halo.cluster.stop()
    b_home = b_first.halo.paths.home
    assert "4721" in transcript_text(b_first.halo, DM)

    a = await serve_halo(home_settings("home-a", url))
    await a.halo.start_background()
    async with a.http.post(a.url(f"/sessions/{DM}/purge"), params={"confirm": DM}, headers=OWNER_AUTH) as r:
        assert r.status == 200
    assert a.halo.cluster is not None
    await a.halo.cluster.stop()
    assert await rows(url, under(DM)) == {}, "the purge took the scope's memory rows"

    b_again = await serve_halo(home_settings("home-b", url))  # B's next start, in the same home
    await b_again.halo.start_background()
    await b_again.halo.start_adapters()  # the family lease: B serves, and takes every scope

    def b_has_no_copy() -> bool:
        return "4721" not in transcript_text(b_again.halo, DM) and "4721" not in b_again.halo.memory.read(DM)

    await eventually(b_has_no_copy, what="B's copy of the purged chat, transcript and memory, gone")
    assert not any("4721" in p.read_text(errors="replace") for p in b_home.rglob("*.jsonl*")), "nothing set aside"
    fake_llm.reply("I don't know that one.")
    status, _ = await b_again.chat("what is the locker code?", token=MOM)
    assert status == 200 and "4721" not in fake_llm.last_prompt_text()


@pytest.mark.postgres
async def test_a_homes_own_transcript_from_before_storage_url_is_recorded_and_the_model_keeps_its_history(
    shared_postgres: str, fake_llm: FakeOpenAI, home_settings: Callable[..., Settings], serve_halo: Any
) -> None:
    """storage.url set on a home with a conversation, never migrated: its lines go to PostgreSQL as
    they are (as its memory does), its file goes, and the model is still told them."""
    embedded = await serve_halo(home_settings("home-a", None))
    await embedded.chat("the bike lock is 1234", token=MOM)
    await embedded.halo.gateway.drain()
    transcripts = embedded.halo.paths.transcripts

    moved = await serve_halo(home_settings("home-a", shared_postgres))
    await moved.halo.start_background()
    await moved.halo.start_adapters()  # the family lease: it serves, and takes every scope
    fake_llm.reply("1234.")
    status, body = await moved.chat("what is the bike lock?", token=MOM)
    assert status == 200 and body["reply"] == "1234."
    assert "the bike lock is 1234" in fake_llm.last_prompt_text(), "the conversation so far reaches the model"
    conn = await asyncpg.connect(shared_postgres.replace("+asyncpg", ""))
    try:
        recorded = [r["line"] for r in await conn.fetch("SELECT line FROM transcript_lines ORDER BY seq")]
    finally:
        await conn.close()
    said = [n for n, text in enumerate(recorded) if "the bike lock is 1234" in text]
    asked = [n for n, text in enumerate(recorded) if "what is the bike lock?" in text]
    assert said and asked and said[0] < asked[0], "the home's lines, then the next turn's, in PostgreSQL"
    assert not list(transcripts.glob("*.jsonl*")), "recorded: no transcript file stays, nor one set aside"


@pytest.mark.postgres
async def test_halo_distill_beside_a_running_serve_distils_through_it(tmp_path: Path) -> None:
    """`halo distill` in a terminal while `halo serve` runs the family on PostgreSQL: the serving
    process holds the memory, so it distils (a distillation beside it would be written over), and
    what it learned reaches its next prompt and the rows."""
    from tests.storage_support import database_url, drop_database, new_database
    from tests.test_serve_cli import halo_cmd, post_json, wait_healthy

    name = await new_database(migrated=True)
    url = database_url(name)
    fake = FakeOpenAI(default_reply="Noted.").start_in_thread()
    home = tmp_path / "home"
    write_home(home, llm_yaml(fake) + "memory: {distillation_every_n_items: 1000}\n")  # only when asked
    port = free_port()
    env = {**os.environ, "HALO_STORAGE__URL": url}
    serve = halo_cmd("serve", home=home, port=port, env=env)
    try:
        await asyncio.to_thread(wait_healthy, port, serve)
        base = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(post_json, f"{base}/api/chat", {"text": "our wifi network is called Juniper5"})
        distill = halo_cmd("distill", "web:wags", home=home, port=port, env=env)
        out, err = await asyncio.to_thread(distill.communicate, None, 120)
        assert distill.returncode == 0, err
        assert "distilled web:wags (by the running halo): 2 new transcript items" in out
        where = memory_md("web:wags")
        assert "Juniper5" in str(await rows(url, f"{scope_folder('web:wags')}%")), "in the rows when it answered"
        await asyncio.to_thread(post_json, f"{base}/api/chat", {"text": "what is the wifi called?"})

        async def daily_row() -> str:  # once the serving process wrote the day's file again
            found = [t for p, t in (await rows(url, f"{scope_folder('web:wags')}daily/%")).items()]
            return found[0] if found and "what is the wifi called" in found[0] else ""

        day = await eventually(daily_row, what="the next turn's log line in the day's row")
        note = [line for line in day.splitlines() if "Juniper5" in line and "[user]" not in line]
        assert note, "the distilled note is still there: the serving process wrote onto it, not over it"
        assert where not in {f.path for f in local_files(home)}, "and no file of it in the home"
    finally:
        serve.terminate()
        await asyncio.to_thread(serve.communicate, None, 120)
        fake.stop()
        await drop_database(name)
