"""Two `halo serve` processes serving one family on one PostgreSQL database (#31).

Each has its own HALO_HOME and port, the same halo.yaml and `storage.url`, and a short lease
(2 s). One is active; the other is a warm standby that forwards what reaches it. The tests
send web chat messages to both:

- a code-answered message (a list, a reminder, "remember that") through the standby is
  answered once and carried out once; then the active process is killed with SIGKILL under
  load: the standby takes over, nothing acknowledged is lost, nothing is answered twice and no
  user line is written twice;
- the active process is frozen (SIGSTOP) for 3× the lease under load, then thawed: the standby
  took over meanwhile, and the thawed process writes nothing more (a trigger in the test
  database records which process wrote each row, by its `application_name`, and under which
  epoch), answers nothing twice, and every reminder due meanwhile is sent once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.storage_support import fresh_database
from tests.test_session_durability import SCOPES, Serve, family_yaml  # six members with web tokens
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # two halo serve processes

LEASE = 2.0  # storage.lease_seconds: short, so the failover is seconds
# liveness bounds, not the speed goal: bench/cluster.py measures failover
WITHIN = 90.0

# which process wrote each row, and under which epoch (a test instrument on the database)
WRITTEN_BY = """
CREATE TABLE written_by (tbl text, app text, epoch bigint, op text, row_id text);
CREATE FUNCTION note_writer() RETURNS trigger AS $$
BEGIN
    INSERT INTO written_by VALUES (
        TG_TABLE_NAME, current_setting('application_name'),
        (SELECT max(epoch) FROM family_leases), TG_OP, to_jsonb(NEW) ->> TG_ARGV[0]);
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER note_transcript AFTER INSERT OR UPDATE ON transcript_lines
    FOR EACH ROW EXECUTE FUNCTION note_writer('line');
CREATE TRIGGER note_outbox AFTER INSERT OR UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION note_writer('id');
CREATE TRIGGER note_reminders AFTER INSERT OR UPDATE ON reminders FOR EACH ROW EXECUTE FUNCTION note_writer('id');
"""


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    """Echoes the newest message: a reply names the message it answers."""

    def echo(body: dict[str, object]) -> Reply:
        users = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]  # type: ignore[union-attr]
        return Reply(text=f"re: {users[-1]['content']}" if users else "hello", delay=0.05)

    fake = FakeOpenAI(responder=echo).start_in_thread()
    yield fake
    fake.stop()


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        admin = await _admin(url)
        try:
            await admin.execute(WRITTEN_BY)
        finally:
            await admin.close()
        yield url


async def _admin(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))


def node(home: Path, fake: FakeOpenAI, url: str, telegram: FakeTelegram | None = None) -> Serve:
    """One process; with `telegram`, member m<i> is Telegram user 1000+i, and the process polls
    the fake Bot API under its own name (the folder's), so each call says whose it was."""
    home.mkdir()
    text = family_yaml(fake)
    if telegram is not None:
        for i in range(SCOPES):
            text = text.replace(f"id: m{i}, ", f"id: m{i}, telegram_user_id: {1000 + i}, ")
        text += (
            f"telegram: {{token: '{TOKEN}', base_url: '{telegram.base_url_for(home.name)}', "
            "poll_timeout_seconds: 1, stream_drafts: false, react_on_receipt: false}\n"
        )
    (home / "halo.yaml").write_text(text)
    return Serve(
        home,
        {
            "HALO_STORAGE__URL": url,
            "HALO_STORAGE__LEASE_SECONDS": str(LEASE),
            "HALO_MEMORY__SEMANTIC__EMBEDDER": "none",
        },
    )


async def post(http: aiohttp.ClientSession, serve: Serve, scope: int, text: str, within: float = 30) -> tuple[int, Any]:
    try:
        async with http.post(
            f"{serve.url}/api/chat",
            json={"text": text},
            headers={"Authorization": f"Bearer token-{scope}"},
            timeout=aiohttp.ClientTimeout(total=within),
        ) as r:
            return r.status, await r.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError) as exc:
        return 0, repr(exc)


async def chat(http: aiohttp.ClientSession, serve: Serve, scope: int, text: str, within: float = 30) -> str | None:
    """The reply, or None when not answered (killed, frozen, a 503 while no process serves)."""
    status, body = await post(http, serve, scope, text, within)
    if status != 200:
        print(f"{serve.url} {text!r}: {status} {body}")
        return None
    return str(body["reply"])


async def probe(http: aiohttp.ClientSession, serve: Serve, path: str) -> tuple[int, dict[str, Any]]:
    try:
        async with http.get(f"{serve.url}{path}", timeout=aiohttp.ClientTimeout(total=5)) as r:
            return r.status, await r.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError):
        return 0, {}


async def roles(http: aiohttp.ClientSession, *serves: Serve) -> tuple[Serve, Serve] | None:
    """(active, standby) once one is active and the other ready as a standby."""
    found = [(s, await probe(http, s, "/livez")) for s in serves]
    ready = [await probe(http, s, "/readyz") for s in serves]
    if any(status != 200 for status, _ in ready):
        return None
    active = [s for s, (status, body) in found if status == 200 and body.get("role") == "active"]
    standby = [s for s, (status, body) in found if status == 200 and body.get("role") == "standby"]
    return (active[0], standby[0]) if len(active) == 1 and len(standby) == 1 else None


async def both_up(http: aiohttp.ClientSession, a: Serve, b: Serve) -> tuple[Serve, Serve]:
    await asyncio.gather(a.start(http), b.start(http))
    return await eventually(lambda: roles(http, a, b), within=180, every=0.2, what="one active, one standby")


async def answered_twice(url: str) -> tuple[list[Any], list[Any], list[Any]]:
    """Messages with two replies in the outbox, two answering transcript lines, or whose user
    line was written twice."""
    admin = await _admin(url)
    try:
        replies = await admin.fetch(
            "SELECT in_reply_to_envelope, count(*) FROM outbox WHERE kind = 'reply' "
            "GROUP BY in_reply_to_envelope HAVING count(*) > 1"
        )
        lines = [json.loads(r["line"]) for r in await admin.fetch("SELECT line FROM transcript_lines")]
    finally:
        await admin.close()
    answers: dict[str, int] = {}
    users: dict[str, int] = {}
    for line in lines:
        if line.get("answers"):
            answers[line["answers"]] = answers.get(line["answers"], 0) + 1
        if line["role"] == "user":
            users[line["id"]] = users.get(line["id"], 0) + 1
    return list(replies), [k for k, n in answers.items() if n > 1], [k for k, n in users.items() if n > 1]


async def test_the_standby_forwards_code_answers_once_and_takes_over_after_kill_9(
    tmp_path: Path, model: FakeOpenAI, database: str
) -> None:
    a, b = node(tmp_path / "a", model, database), node(tmp_path / "b", model, database)
    acked: dict[int, list[str]] = {scope: [] for scope in range(SCOPES)}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        active, standby = await both_up(http, a, b)

        # a model answer, a command, and code answers, each through the standby: answered once, done once
        question = "what should we cook for dinner tonight with the kids?"
        assert await chat(http, standby, 0, question) == f"re: {question}"
        list_reply = await chat(http, standby, 0, "add apples to the shopping list")
        assert list_reply == "Added to shopping list: apples."
        reminder = await chat(http, standby, 0, "remind me to stretch in 20 minutes")
        assert reminder is not None and "stretch" in reminder
        remembered = await chat(http, standby, 0, "remember that the piano lesson is on Tuesday")
        assert remembered is not None and not remembered.startswith("re:"), remembered  # answered in code
        command = await chat(http, standby, 1, "/remind m1 in 2h pack your kit")
        assert command is not None and command.startswith("OK"), command
        admin = await _admin(database)
        try:
            apples = await admin.fetchval("SELECT count(*) FROM list_items WHERE text = 'apples'")
            stretches = await admin.fetchval("SELECT count(*) FROM reminders WHERE text LIKE '%stretch%'")
            await eventually(  # memory rows are written about once a second
                lambda: admin.fetchval("SELECT count(*) FROM memory_files WHERE content LIKE '%piano lesson%'"),
                what="the remembered fact in PostgreSQL",
            )
        finally:
            await admin.close()
        assert (apples, stretches) == (1, 1)

        # every scope talks through both processes; then the active one is killed mid-conversation
        killed = asyncio.Event()
        after_kill: dict[int, int] = {scope: 0 for scope in range(SCOPES)}

        async def talk(scope: int) -> None:
            for n in range(2000):  # bounded; each scope stops once answered twice after the kill
                serve = standby if killed.is_set() or n % 2 else active
                text = f"scope {scope} message {n}"
                reply = await chat(http, serve, scope, text)
                if reply is not None:
                    assert reply == f"re: {text}", f"{text} got someone else's reply: {reply}"
                    acked[scope].append(text)
                    after_kill[scope] += killed.is_set()
                if after_kill[scope] >= 2:
                    return
                if reply is None and killed.is_set():  # 503 while the standby takes over: as Retry-After asks
                    await eventually(lambda: roles_after_kill(), within=WITHIN, every=0.2, what="a process serving")

        async def roles_after_kill() -> bool:
            status, _ = await probe(http, standby, "/active")
            return status == 200

        talkers = [asyncio.create_task(talk(scope)) for scope in range(SCOPES)]
        await eventually(lambda: sum(map(len, acked.values())) >= SCOPES * 4, within=WITHIN, what="every scope talking")
        await active.kill()
        killed.set()
        await asyncio.wait_for(asyncio.gather(*talkers), timeout=WITHIN)
        _, body = await probe(http, standby, "/livez")
        assert body["role"] == "active"
        assert standby.proc is not None
        standby.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(standby.proc.wait(), timeout=30)

    replies, lines, users = await answered_twice(database)
    assert (replies, lines, users) == ([], [], [])
    admin = await _admin(database)
    try:
        said = {json.loads(r["line"])["text"] for r in await admin.fetch("SELECT line FROM transcript_lines")}
        apples = await admin.fetchval("SELECT count(*) FROM list_items WHERE text = 'apples'")
    finally:
        await admin.close()
    lost = [text for texts in acked.values() for text in texts if text not in said]
    assert lost == [], "acknowledged messages missing from the transcript"
    assert apples == 1


async def test_a_frozen_active_process_writes_nothing_after_the_standby_took_over(
    tmp_path: Path, model: FakeOpenAI, database: str
) -> None:
    telegram = await FakeTelegram().start()
    a, b = node(tmp_path / "a", model, database, telegram), node(tmp_path / "b", model, database, telegram)
    answered: dict[str, str] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        frozen, standby = await both_up(http, a, b)
        await eventually(lambda: telegram.calls_to("getUpdates"), within=WITHIN, what="Telegram polled")
        polled_by = {c.caller for c in telegram.calls_to("getUpdates")}
        assert polled_by == {frozen.home.name}, f"only the active process polls Telegram: {polled_by}"
        sent_on_telegram: list[str] = []

        def telegram_message(n: int) -> None:
            """A DM from member m1 (Telegram user 1001), a message the model echoes."""
            sent_on_telegram.append(f"telegram message {n}")
            telegram.message(1001, 1001, f"telegram message {n}")

        for scope in range(3):  # reminders, made due while the active process is frozen
            assert (await chat(http, frozen, scope, f"/remind m{scope} in 2h reminder {scope}") or "").startswith("OK")
        admin = await _admin(database)
        epoch = await admin.fetchval("SELECT epoch FROM family_leases")
        stop = asyncio.Event()

        async def talk(scope: int, serve: Serve) -> None:
            """A request to (or forwarded to) the frozen process waits until it is thawed or gives up."""
            n = 0
            while not stop.is_set():
                text = f"scope {scope} message {n}"
                reply = await chat(http, serve, scope, text, within=10)
                if reply is not None:
                    assert reply == f"re: {text}", f"{text} got someone else's reply: {reply}"
                    answered[text] = reply
                n += 1

        talkers = [
            asyncio.create_task(talk(scope, frozen if scope == SCOPES - 1 else standby)) for scope in range(3, SCOPES)
        ]
        await eventually(lambda: len(answered) >= 12, within=WITHIN, what="every scope talking")
        assert frozen.proc is not None
        frozen.proc.send_signal(signal.SIGSTOP)  # mid-conversation, for 3× the lease
        stopped_at = await admin.fetchval("SELECT now()")
        telegram_message(0)  # taken by the frozen one's long poll, or left for the new active one
        await admin.execute(
            "UPDATE reminders SET due_at = floor(extract(epoch FROM now())), "
            "occurrence_at = floor(extract(epoch FROM now()))"
        )
        await eventually(
            lambda: _role_is(http, standby, "active"), within=WITHIN, every=0.2, what="the standby takes over"
        )
        took_over_at = len(answered)
        new_epoch_at = time.monotonic()
        telegram_message(1)
        await eventually(  # frozen for 3x the lease, by PostgreSQL's clock
            lambda: admin.fetchval("SELECT now() > $1::timestamptz + make_interval(secs => $2)", stopped_at, 3 * LEASE),
            within=WITHIN,
            every=0.1,
            what="3x the lease",
        )
        await eventually(lambda: len(answered) > took_over_at + 6, within=WITHIN, what="answers by the new active")
        telegram_message(2)
        frozen.proc.send_signal(signal.SIGCONT)
        await eventually(
            lambda: _role_is(http, frozen, "standby"), within=WITHIN, every=0.2, what="the thawed one stands by"
        )
        thawed_at = len(answered)
        await eventually(lambda: len(answered) > thawed_at + 6, within=WITHIN, what="answers after the thaw")
        telegram_message(3)

        def all_answered_on_telegram() -> bool:
            got = sorted(t for t in telegram.texts(1001) if t.startswith("re: "))  # reminders go there too
            assert got == sorted(f"re: {t}" for t in sent_on_telegram), f"answered on Telegram: {got}"
            return True

        await eventually(all_answered_on_telegram, within=WITHIN, what="every Telegram message answered")
        stop.set()
        await asyncio.wait_for(asyncio.gather(*talkers), timeout=WITHIN)  # raises what a talker found wrong

        app = f"halo[{frozen.proc.pid}]"
        stale = await admin.fetch("SELECT tbl, op, row_id FROM written_by WHERE app = $1 AND epoch > $2", app, epoch)
        fired = await admin.fetch("SELECT fired FROM reminders WHERE text LIKE 'reminder %'")
        sent = await admin.fetchval("SELECT count(*) FROM outbox WHERE text LIKE '%reminder %' AND kind <> 'reply'")
        await admin.close()
        for serve in (frozen, standby):
            assert serve.proc is not None
            serve.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(serve.proc.wait(), timeout=30)

    await telegram.close()
    stale_polls = [
        c.at - new_epoch_at
        for c in telegram.calls_to("getUpdates")
        if c.caller == frozen.home.name and c.at > new_epoch_at
    ]
    assert stale_polls == [], "the stale process polled Telegram after the new epoch (s after the take)"
    replies = sorted(t for t in telegram.texts(1001) if t.startswith("re: "))
    assert replies == sorted(f"re: {t}" for t in sent_on_telegram)  # each once
    assert [tuple(r) for r in stale] == [], "the stale process wrote after the new epoch"
    assert sorted(r["fired"] for r in fired) == [1, 1, 1]
    assert sent == 3
    assert await answered_twice(database) == ([], [], [])


async def _role_is(http: aiohttp.ClientSession, serve: Serve, role: str) -> bool:
    status, body = await probe(http, serve, "/livez")
    return status == 200 and body.get("role") == role
