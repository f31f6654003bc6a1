"""Transcripts and the audit log with PostgreSQL as the store of record: each line committed there,
in one statement, and held in memory by the process; no transcript file is written. A process
that takes a scope reads what it lacks from PostgreSQL; a home's files from before are recorded
or removed. Real PostgreSQL databases, real files."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from config.loader import load_settings
from config.settings import Settings
from halo.storage import HaloDB
from halo.storage.audit_rows import AuditRows
from halo.storage.db import POOL_SIZE, unreachable
from halo.storage.transcript_rows import TranscriptRows
from halo.storage.transcript_rows import metadata as transcript_tables
from tests.conftest import OWNER_TOKEN, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.storage_support import fresh_database
from tests.waiting import eventually
from transcripts import AuditLog, TranscriptLine, TranscriptStore
from transcripts.audit import AuditEvent
from transcripts.lines import Message
from transcripts.recorded import RecordedTranscripts
from transcripts.records import RecordedLine, SeqTaken
from transcripts.session import TranscriptSessions
from transcripts.store import scope_ids_in

SCOPE = "telegram:1001"
OTHER = "telegram:-1002"


def line(text: str, scope_id: str = SCOPE) -> TranscriptLine:
    return Message(uuid.uuid4().hex, datetime.now(UTC), scope_id, text, speaker="wags")


async def rows(url: str, query: str, *args: Any) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return [dict(r) for r in await conn.fetch(query, *args)]
    finally:
        await conn.close()


def file_texts(store: TranscriptStore, scope_id: str = SCOPE) -> list[str]:
    return [recorded.text for _, recorded in store.read_from(scope_id)]


@pytest.fixture
async def postgres() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


@pytest.fixture
async def db(postgres: str, tmp_path: Path) -> AsyncIterator[HaloDB]:
    db = HaloDB(tmp_path / "unused.db", postgres, family_id="sharma")
    yield db
    await db.close()


def store_at(home: Path, db: HaloDB, *, from_record_only: bool = False) -> RecordedTranscripts:
    return RecordedTranscripts(TranscriptRows(db), home / "transcripts", from_record_only=from_record_only)


def held_bytes(store: TranscriptStore, scope_id: str = SCOPE) -> bytes:
    return b"".join(raw + b"\n" for _, raw in reversed(list(store.raw_reversed(scope_id))))


def home_transcripts(home: Path) -> list[Path]:
    return sorted((home / "transcripts").glob("*.jsonl*"))


# --- the store on PostgreSQL ------------------------------------------------------------------


@pytest.mark.postgres
async def test_a_turns_lines_are_one_insert_held_as_the_rows_hold_them_and_no_file_is_written(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    store = store_at(tmp_path / "home", db)
    await store.append(line("first"))  # the first use of the scope here reads what PostgreSQL has
    statements: list[str] = []
    db.watch(statements.append)

    await store.append_many([line("When is soccer practice?"), line("At 5pm."), line("Thanks")])

    print(f"statements for one turn's append of 3 lines on PostgreSQL: {len(statements)}")
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO transcript_lines"), statements
    got = await rows(
        postgres, "SELECT family_id, seq, line FROM transcript_lines WHERE scope_id = $1 ORDER BY seq", SCOPE
    )
    assert [(r["family_id"], r["seq"]) for r in got] == [("sharma", n) for n in range(4)]
    assert [json.loads(r["line"])["text"] for r in got] == ["first", "When is soccer practice?", "At 5pm.", "Thanks"]
    assert held_bytes(store).decode("utf-8").splitlines() == [r["line"] for r in got]  # the record's very bytes
    lengths = [len(r["line"].encode("utf-8")) + 1 for r in got]  # offsets: where each line would start in a file
    assert [offset for offset, _ in store.read_from(SCOPE)] == [sum(lengths[:n]) for n in range(4)]
    assert store.size(SCOPE) == len(held_bytes(store)) and store.count(SCOPE) == 4
    assert not (tmp_path / "home").exists() or home_transcripts(tmp_path / "home") == []


@pytest.mark.postgres
async def test_concurrent_turns_in_two_scopes_are_numbered_in_order_per_scope(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    store = store_at(tmp_path / "home", db)
    await asyncio.gather(
        *(
            store.append_many([line(f"{scope} {n}", scope), line(f"{scope} {n}b", scope)])
            for n in range(15)
            for scope in (SCOPE, OTHER)
        )
    )
    for scope in (SCOPE, OTHER):
        got = await rows(postgres, "SELECT seq, line FROM transcript_lines WHERE scope_id = $1 ORDER BY seq", scope)
        assert [r["seq"] for r in got] == list(range(30))
        assert [json.loads(r["line"])["text"] for r in got] == file_texts(store, scope)
        assert file_texts(store, scope) == [t for n in range(15) for t in (f"{scope} {n}", f"{scope} {n}b")]


@pytest.mark.postgres
async def test_a_line_postgresql_refuses_raises_and_never_reaches_the_file(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    store = store_at(tmp_path / "home", db)
    await store.append(line("before"))
    conn = await asyncpg.connect(postgres.replace("+asyncpg", ""))
    await conn.execute("ALTER TABLE transcript_lines ADD CONSTRAINT refuse CHECK (line NOT LIKE '%refused%')")
    await conn.close()

    with pytest.raises(Exception, match="refuse"):
        await store.append_many([line("this is refused"), line("and its neighbour")])

    assert file_texts(store) == ["before"]
    await store.append(line("after"))  # the next line takes the number the refused ones did not
    got = await rows(postgres, "SELECT seq, line FROM transcript_lines ORDER BY seq")
    assert [(r["seq"], json.loads(r["line"])["text"]) for r in got] == [(0, "before"), (1, "after")]
    assert file_texts(store) == ["before", "after"]


@pytest.mark.postgres
async def test_a_new_process_holds_the_record_once_it_takes_the_scope_and_tells_the_session(
    db: HaloDB, tmp_path: Path
) -> None:
    writer = store_at(tmp_path / "a", db)
    await writer.append_many([line(f"message {n}") for n in range(5)])

    reader = store_at(tmp_path / "b", db)  # a new process, on a home of its own
    sessions = TranscriptSessions(reader, 10_000)
    assert not reader.exists(SCOPE) and await sessions.all_items(SCOPE) == []  # nothing held before a take
    await reader.ready(SCOPE)
    assert [item["content"] for item in await sessions.all_items(SCOPE)] == [f"message {n}" for n in range(5)]
    assert held_bytes(reader) == held_bytes(writer)  # the same bytes: an offset means the same line to both

    await writer.append_many([line("message 5"), line("message 6")])  # the other process went on
    await reader.take(SCOPE)  # taking the family over: only what it lacks is read
    assert [item["content"] for item in await sessions.all_items(SCOPE)] == [f"message {n}" for n in range(7)]
    await reader.append(line("message 7"))
    assert file_texts(reader) == [f"message {n}" for n in range(8)]
    assert home_transcripts(tmp_path / "b") == []


@pytest.mark.postgres
async def test_two_homes_writing_one_scope_each_catch_up_with_the_other(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    first, second = store_at(tmp_path / "a", db), store_at(tmp_path / "b", db)
    await first.append(line("one"))
    await second.append(line("two"))  # its first use of the scope brings "one" along
    await first.append(line("three"))  # "two" took the number it expected: it catches up, then goes after
    await second.ready(SCOPE)  # taken already: nothing read
    await second.take(SCOPE)
    got = await rows(postgres, "SELECT seq, line FROM transcript_lines ORDER BY seq")
    assert [(r["seq"], json.loads(r["line"])["text"]) for r in got] == [(0, "one"), (1, "two"), (2, "three")]
    assert file_texts(first) == file_texts(second) == ["one", "two", "three"]


@pytest.mark.postgres
async def test_a_copy_of_a_scope_purged_through_another_home_goes_when_the_scope_is_taken_again(
    db: HaloDB, tmp_path: Path
) -> None:
    """Purged through one home, the scope's lines stay in another home's copy: when that home
    takes the scope again the record wins, its session forgets them, and no copy stays."""
    first, second = store_at(tmp_path / "a", db), store_at(tmp_path / "b", db)
    await first.append_many([line("a secret"), line("another")])
    await second.ready(SCOPE)
    sessions = TranscriptSessions(second, 10_000)
    assert len(await sessions.all_items(SCOPE)) == 2
    assert await first.purge(SCOPE)

    await second.take(SCOPE)
    assert file_texts(second) == [] and await sessions.all_items(SCOPE) == []
    home_files = [p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()]
    assert not any(b"a secret" in data for data in home_files), "nothing of the purged chat stays, nor set aside"
    await second.append(line("after the purge"))
    assert await TranscriptRows(db).count(SCOPE) == 1
    assert file_texts(second) == ["after the purge"]


@pytest.mark.postgres
async def test_a_copy_of_a_scope_purged_and_written_again_keeps_none_of_the_purged_lines(
    db: HaloDB, tmp_path: Path
) -> None:
    """The record grew past the copy after a purge: counting lines alone would keep the purged
    ones and append the new record's tail after them."""
    first, second = store_at(tmp_path / "a", db), store_at(tmp_path / "b", db)
    await first.append_many([line("the locker code is 4721"), line("noted")])
    await second.ready(SCOPE)
    assert await first.purge(SCOPE)
    await first.append_many([line("new one"), line("new two"), line("new three")])

    await second.take(SCOPE)
    assert file_texts(second) == ["new one", "new two", "new three"]
    assert "4721" not in str(await TranscriptSessions(second, 10_000).all_items(SCOPE))


@pytest.mark.postgres
async def test_a_homes_own_lines_from_before_the_record_are_recorded_as_they_are(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    embedded = TranscriptStore(home / "transcripts")  # the home's embedded days
    await embedded.append_many([line("the bike lock is 1234"), line("noted")])
    embedded.close()
    before = embedded.path(SCOPE).read_bytes()

    moved = store_at(home, db)  # the same home, now with storage.url, never migrated
    await moved.append(line("and the shed?"))

    got = await rows(postgres, "SELECT seq, line FROM transcript_lines WHERE scope_id = $1 ORDER BY seq", SCOPE)
    assert [r["seq"] for r in got] == [0, 1, 2]
    assert "\n".join(r["line"] for r in got) + "\n" == held_bytes(moved).decode("utf-8")
    assert "\n".join(r["line"] for r in got[:2]) + "\n" == before.decode("utf-8"), "recorded byte for byte"
    assert home_transcripts(home) == [], "recorded, the file goes: PostgreSQL is the only store"
    other = store_at(tmp_path / "other", db)  # and another home is told the history
    await other.take(SCOPE)
    assert file_texts(other) == ["the bike lock is 1234", "noted", "and the shed?"]


@pytest.mark.postgres
async def test_a_homes_own_lines_beside_another_history_of_the_scope_are_left_as_they_are_and_not_read(
    db: HaloDB, tmp_path: Path
) -> None:
    await store_at(tmp_path / "a", db).append(line("theirs"))
    home = tmp_path / "b"
    embedded = TranscriptStore(home / "transcripts")
    await embedded.append_many([line("mine"), line("mine too")])
    embedded.close()
    before = {p.name: p.read_bytes() for p in home_transcripts(home)}

    moved = store_at(home, db)
    await moved.take(SCOPE)
    assert file_texts(moved) == ["theirs"], "the record wins"
    assert {p.name: p.read_bytes() for p in home_transcripts(home)} == before, "the file is left as it was"
    assert moved.scope_ids() == [SCOPE]


@pytest.mark.postgres
@pytest.mark.parametrize("served", [False, True], ids=["copy-by-its-lines", "home-served-this-database"])
async def test_a_copy_an_older_halo_kept_in_the_home_is_removed_at_the_first_take(
    db: HaloDB, tmp_path: Path, served: bool
) -> None:
    """An older halo kept a copy of the record in each home. Found to be a copy (its last line is
    the record's), or in a home that has served this database (then a file that is not a copy is
    what a purge elsewhere left), it goes, and the record is what is read."""
    await store_at(tmp_path / "a", db).append_many([line("the locker code is 4721"), line("noted")])
    home = tmp_path / "b"
    old_copy = TranscriptStore(home / "transcripts")
    await old_copy.append_many(
        [line("the locker code is 4721"), line("noted")] if not served else [line("a purged secret")]
    )
    old_copy.close()
    if not served:  # the copy's lines as the record has them, byte for byte
        recorded = await TranscriptRows(db).read_from(SCOPE)
        old_copy.path(SCOPE).write_text("".join(r.json + "\n" for r in recorded), encoding="utf-8")

    moved = store_at(home, db, from_record_only=served)
    assert list(scope_ids_in(home / "transcripts")) == [SCOPE]  # what the family's take takes
    await moved.take(SCOPE)
    assert file_texts(moved) == ["the locker code is 4721", "noted"]
    assert home_transcripts(home) == []


@pytest.mark.postgres
async def test_a_turns_insert_on_a_connection_the_server_ended_says_so_and_the_next_takes_a_new_one(
    db: HaloDB, postgres: str
) -> None:
    """`HaloDB.send` (asyncpg without SQLAlchemy's execution layer) fails as SQLAlchemy would: a
    `DBAPIError` that says the connection was dropped, which halo reads as the database being
    unreachable, and the dead connection is not handed out again."""
    rows_api = TranscriptRows(db)
    await rows_api.append(SCOPE, [RecordedLine(0, datetime.now(UTC), line("before").to_json())])
    admin = await asyncpg.connect(postgres.replace("+asyncpg", ""))
    try:
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert ended == 1  # the pool's one connection
        with pytest.raises(DBAPIError) as refused:
            await rows_api.append(SCOPE, [RecordedLine(1, datetime.now(UTC), line("lost").to_json())])
        assert refused.value.connection_invalidated and unreachable(refused.value)
        await rows_api.append(SCOPE, [RecordedLine(1, datetime.now(UTC), line("after").to_json())])
        got = await rows(postgres, "SELECT seq, line FROM transcript_lines ORDER BY seq")
        assert [(r["seq"], json.loads(r["line"])["text"]) for r in got] == [(0, "before"), (1, "after")]
    finally:
        await admin.close()


@pytest.mark.postgres
async def test_a_statement_cancelled_midway_stops_in_the_database_and_its_connection_serves_on(
    db: HaloDB, postgres: str
) -> None:
    await db.send(transcript_tables, "SELECT 1")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(db.send(transcript_tables, "SELECT pg_sleep(30)"), 0.5)

    async def stopped() -> bool:
        query = "SELECT state FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'"
        return [r["state"] for r in await rows(postgres, query)] == ["idle"]

    await eventually(stopped, what="the cancelled statement stopped, its connection kept")
    assert await asyncio.wait_for(db.send(transcript_tables, "SELECT 2"), 10) == "SELECT 1"


@pytest.mark.postgres
async def test_connections_opened_past_the_pool_at_a_peak_are_closed_after(db: HaloDB, postgres: str) -> None:
    """`send` gives its connection back in a greenlet: a full pool closes one it has no room for."""
    await asyncio.gather(*(db.send(transcript_tables, "SELECT pg_sleep(0.3)") for _ in range(POOL_SIZE + 5)))

    async def only_the_pool_left() -> bool:
        query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        return len(await rows(postgres, query)) == POOL_SIZE

    await eventually(only_the_pool_left, what="the 5 past the pool closed")


@pytest.mark.postgres
async def test_watch_sees_the_statements_sent_both_ways_until_unwatched(db: HaloDB) -> None:
    await db.prepare()  # the migrations' statements before
    seen: list[str] = []
    unwatch = db.watch(seen.append)
    await TranscriptRows(db).append(SCOPE, [RecordedLine(0, datetime.now(UTC), line("x").to_json())])  # send
    assert await TranscriptRows(db).count(SCOPE) == 1  # SQLAlchemy
    unwatch()
    await TranscriptRows(db).count(SCOPE)
    assert [s.split()[0] for s in seen] == ["INSERT", "SELECT"], seen


@pytest.mark.postgres
async def test_the_rows_api_for_moving_a_family_reads_and_writes_whole_scopes(db: HaloDB) -> None:
    rows_api = TranscriptRows(db)
    lines = [RecordedLine(n, datetime.now(UTC), line(f"m{n}", OTHER).to_json()) for n in range(4500)]
    await rows_api.append(OTHER, lines)  # more than one statement holds: chunked, in one transaction
    await rows_api.append(SCOPE, [RecordedLine(0, datetime.now(UTC), line("x").to_json())])
    assert await rows_api.scope_ids() == [OTHER, SCOPE]
    assert await rows_api.count() == 4501 and await rows_api.count(OTHER) == 4500
    assert [r.json for r in await rows_api.read_from(OTHER)] == [r.json for r in lines]
    clash = [RecordedLine(n, datetime.now(UTC), line(f"late {n}", SCOPE).to_json()) for n in range(1, 4501)]
    clash[-1] = RecordedLine(0, clash[-1].ts, clash[-1].json)  # its last line's number is taken
    with pytest.raises(SeqTaken):
        await rows_api.append(SCOPE, clash)
    assert await rows_api.count(SCOPE) == 1  # none of the bulk: one transaction
    assert await rows_api.purge(OTHER) == 4500
    assert await rows_api.scope_ids() == [SCOPE]


# --- halo end to end, on both stores ----------------------------------------------------------


async def test_a_conversation_is_recorded_and_a_purge_deletes_it_everywhere(
    on_both_stores: str | None, fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Soccer practice is at 5pm.")
    assert (await running.chat("When is soccer practice?"))[1]["reply"] == "Soccer practice is at 5pm."
    transcripts = running.halo.transcripts
    said = [t for t in file_texts(transcripts, "web:wags") if t]
    assert said[-2:] == ["When is soccer practice?", "Soccer practice is at 5pm."]
    if on_both_stores:
        recorded = await rows(
            on_both_stores, "SELECT line FROM transcript_lines WHERE scope_id = 'web:wags' ORDER BY seq"
        )
        assert [json.loads(r["line"])["text"] for r in recorded] == file_texts(transcripts, "web:wags")

    async with running.http.post(
        running.url("/sessions/web:wags/purge?confirm=web:wags"), headers={"Authorization": f"Bearer {OWNER_TOKEN}"}
    ) as r:
        assert r.status == 200 and (await r.json())["purged"]["transcript"] is True
    assert file_texts(transcripts, "web:wags") == []
    if on_both_stores:
        assert await rows(on_both_stores, "SELECT seq FROM transcript_lines WHERE scope_id = 'web:wags'") == []
    async with running.http.get(
        running.url("/events/tail?lines=5"), headers={"Authorization": f"Bearer {OWNER_TOKEN}"}
    ) as r:
        assert r.status == 200
        assert [e["kind"] for e in await r.json()][-1] == "admin_purge"
    if on_both_stores:
        kinds = await rows(on_both_stores, "SELECT kind FROM audit_events WHERE kind = 'admin_purge'")
        assert kinds == [{"kind": "admin_purge"}]  # the route read it back through PostgreSQL


# --- two homes on one PostgreSQL ---------------------------------------------------------------


@pytest.mark.postgres
async def test_a_home_that_never_saw_the_scope_answers_with_its_history_from_postgresql(
    postgres: str, fake_llm: FakeOpenAI, tmp_path: Path, serve_halo: Any
) -> None:
    def settings(name: str) -> Settings:
        home = write_home(tmp_path / name, llm_yaml(fake_llm))
        return load_settings(home, storage={"url": postgres})

    first = await serve_halo(settings("home-a"))
    fake_llm.reply("Nice to meet Miso!")
    assert (await first.chat("Our cat is called Miso."))[1]["reply"] == "Nice to meet Miso!"

    second = await serve_halo(settings("home-b"))
    assert not second.halo.transcripts.exists("web:wags")
    fake_llm.reply("Your cat is called Miso.")
    assert (await second.chat("What is our cat called?"))[1]["reply"] == "Your cat is called Miso."
    prompt = fake_llm.last_prompt_text()
    assert "Our cat is called Miso." in prompt and "Nice to meet Miso!" in prompt
    assert file_texts(second.halo.transcripts, "web:wags")[-4:] == [
        "Our cat is called Miso.",
        "Nice to meet Miso!",
        "What is our cat called?",
        "Your cat is called Miso.",
    ]


# --- the audit log ------------------------------------------------------------------------------


@pytest.mark.postgres
async def test_audit_events_reach_postgresql_without_secrets_and_every_process_reads_them(
    db: HaloDB, postgres: str, tmp_path: Path
) -> None:
    first = AuditLog(record=AuditRows(db))
    second = AuditLog(record=AuditRows(db))
    first.write("pairing_approved", scope_id=SCOPE, by="wags", bot_token="123:SECRET", nested={"api_key": "sk-x"})
    await asyncio.to_thread(first.write, "admin_clear", scope_id=OTHER, actor="mom")  # from a thread, too

    async def both_in_postgresql() -> bool:
        return len(await rows(postgres, "SELECT kind FROM audit_events")) == 2

    await eventually(both_in_postgresql, what="the events written behind to PostgreSQL")  # no flush: the timer
    stored = await rows(postgres, "SELECT family_id, kind, scope_id, event FROM audit_events ORDER BY id")
    assert [(r["family_id"], r["kind"], r["scope_id"]) for r in stored] == [
        ("sharma", "pairing_approved", SCOPE),
        ("sharma", "admin_clear", OTHER),
    ]
    assert "SECRET" not in repr(stored) and "sk-x" not in repr(stored)
    assert json.loads(stored[0]["event"])["nested"] == {}

    second.write("admin_purge", scope_id=SCOPE, actor="wags")
    seen = await second.tail(10)  # its own waiting event included
    assert [e["kind"] for e in seen] == ["pairing_approved", "admin_clear", "admin_purge"]
    assert [e["kind"] for e in await first.tail(10, scope_id=SCOPE)] == ["pairing_approved", "admin_purge"]
    assert [e["actor"] for e in await first.tail(1, match=lambda e: e.get("actor") == "mom")] == ["mom"]
    await first.close()
    await second.close()


@pytest.mark.postgres
async def test_closing_writes_the_audit_events_still_waiting(db: HaloDB, postgres: str, tmp_path: Path) -> None:
    audit = AuditLog(record=AuditRows(db, every=3600))
    audit.write("admin_clear", scope_id=SCOPE, actor="mom")
    await audit.close()
    assert [r["kind"] for r in await rows(postgres, "SELECT kind FROM audit_events")] == ["admin_clear"]


@pytest.mark.postgres
async def test_a_turn_on_postgresql_records_its_lines_in_two_inserts_and_prints_its_statements(
    postgres: str, fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Any
) -> None:
    """The message's line (acknowledged before the model runs) and the reply's: one INSERT each."""
    running = await serve_halo(settings_for(llm_yaml(fake_llm), storage={"url": postgres}))
    fake_llm.reply("Hello!")
    assert (await running.chat("Hi"))[1]["reply"] == "Hello!"  # the scope taken, the tables known
    statements: list[str] = []
    running.halo.db.watch(statements.append)

    fake_llm.reply("Soccer practice is at 5pm.")
    assert (await running.chat("When is soccer practice?"))[1]["reply"] == "Soccer practice is at 5pm."

    transcript_inserts = [s for s in statements if s.startswith("INSERT INTO transcript_lines")]
    print(
        f"one web chat turn on PostgreSQL: {len(statements)} statements, "
        f"{len(transcript_inserts)} of them transcript INSERTs: {[s.split()[0:3] for s in statements]}"
    )
    assert len(transcript_inserts) == 2


@pytest.mark.postgres
async def test_the_audit_rows_api_for_moving_a_family_writes_and_reads_every_event(db: HaloDB) -> None:
    rows_api = AuditRows(db)
    events = [
        AuditEvent(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n // 60), "policy", SCOPE, json.dumps({"n": n}))
        for n in range(5200)
    ]
    await rows_api.insert(events)
    assert await rows_api.read_all() == events
    assert [e["n"] for e in await rows_api.tail(2, kind="policy")] == [5198, 5199]


# --- two `halo serve` processes, one killed ----------------------------------------------------


@pytest.mark.slow  # starts a process
@pytest.mark.postgres
async def test_after_a_kill_9_a_process_with_an_empty_home_answers_with_every_acknowledged_message(
    postgres: str, tmp_path: Path
) -> None:
    from tests.test_session_durability import Serve, chat, family_yaml

    fake = FakeOpenAI(responder=lambda body: Reply(text="noted")).start_in_thread()
    try:
        homes = [tmp_path / "home-a", tmp_path / "home-b"]
        for home in homes:
            home.mkdir()
            (home / "halo.yaml").write_text(family_yaml(fake))
        # a short lease: the killed process's scope is free for the second seconds after the kill
        env = {"HALO_STORAGE__URL": postgres, "HALO_STORAGE__LEASE_SECONDS": "2"}
        first, second = (Serve(home, env) for home in homes)
        said = [f"message {n} to remember" for n in range(3)]
        # generous: a first turn in a new process takes the scope; on a busy machine that is slow, not wrong
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
            await first.start(http)
            for text in said:
                assert await chat(http, first.url, 0, text)
            await first.kill()  # SIGKILL: its home is gone with it, for all the other process knows

            await second.start(http)
            assert await chat(http, second.url, 0, "what did I tell you?")
            await second.kill()
    finally:
        fake.stop()

    asked = next(  # the reply's request: the last to carry it (a routing triage call may come first)
        r.json["messages"] for r in reversed(fake.model_requests) if "what did I tell you?" in json.dumps(r.json)
    )
    members_said = [m["content"] for m in asked if m["role"] == "user" and not m["content"].startswith("(halo's")]
    assert members_said == [*said, "what did I tell you?"]
    recorded = await rows(postgres, "SELECT line FROM transcript_lines WHERE scope_id = 'web:m0' ORDER BY seq")
    assert any("message 2 to remember" in r["line"] for r in recorded)
    assert home_transcripts(homes[0]) == home_transcripts(homes[1]) == [], "PostgreSQL holds them; no home does"
