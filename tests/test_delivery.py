"""halo's one outbox: durable before the first attempt, retried with backoff, in order per
scope, a permanent refusal recorded, and what was pending delivered once after a restart.

The adapter is the real Telegram adapter (python-telegram-bot) against the fake Bot API,
which can be told to answer 429 or 403; the outbox is a real halo.db file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.telegram import TelegramAdapter
from config.loader import load_settings
from halo.inventory import Halo
from halo.outbound.outbox import Row
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import telegram_yaml
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

MOM = "telegram:1002"
DAD = "telegram:1001"


def tiny_backoff(halo: Halo) -> Halo:
    """Retries in milliseconds (the platform's retry_after is capped too): no test waits on the clock."""
    halo.delivery.base_delay = 0.01
    halo.delivery.max_delay = 0.05
    return halo


async def sent_rows(halo: Halo, scope_id: str) -> list[Row]:
    """The scope's outbox rows once none is pending any more (else an empty list)."""
    rows = await halo.delivery.store.rows(scope_id=scope_id)
    return [] if not rows or any(r.state == "pending" for r in rows) else rows


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def started(home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram) -> AsyncIterator[list[Halo]]:
    running: list[Halo] = []
    yield running
    for halo in running:
        await halo.close()


async def start(home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram, running: list[Halo]) -> Halo:
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url))
    halo = tiny_backoff(build_halo(load_settings(home)))
    running.append(halo)
    await halo.start()
    adapter = next(a for a in halo.adapters if isinstance(a, TelegramAdapter))
    await eventually(lambda: adapter.status()["connected"], what="Telegram connected")
    return halo


async def test_a_429_is_retried_and_the_message_arrives_once(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    tg.fail("sendMessage", 429, retry_after=30, times=2)

    message_id = await halo.delivery.send(MOM, "Dinner at 7")

    [row] = await eventually(lambda: sent_rows(halo, MOM), what="the message after two 429s")
    assert [m["text"] for m in tg.sent(1002)] == ["Dinner at 7"]
    assert row.message.id == message_id and row.attempts == 3
    assert len(tg.calls_to("sendMessage")) == 3


async def test_a_long_message_retried_midway_sends_each_piece_once(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    pieces = ["A" * 4000, "B" * 4000, "C" * 100]  # Telegram takes 4096 a message: three pieces
    tg.fail("sendMessage", 429, retry_after=1, after=1)  # the first piece goes, the second is refused once

    await halo.delivery.send(MOM, "\n".join(pieces))

    [row] = await eventually(lambda: sent_rows(halo, MOM), what="the long message after a 429")
    assert [m["text"] for m in tg.sent(1002)] == pieces
    assert row.attempts == 2 and len(tg.calls_to("sendMessage")) == 4


async def test_a_later_message_waits_while_an_earlier_one_is_retried(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    tg.fail("sendMessage", 429, retry_after=1, times=3)
    delivery = halo.delivery

    for text in ("first", "second", "third"):
        await delivery.send(MOM, text)
    await delivery.send(DAD, "to dad")  # another scope's message has its own turn (and its own 429)

    await eventually(lambda: sent_rows(halo, MOM), what="all three to mom")
    await eventually(lambda: sent_rows(halo, DAD), what="the one to dad")
    assert [m["text"] for m in tg.sent(1002)] == ["first", "second", "third"]
    assert [m["text"] for m in tg.sent(1001)] == ["to dad"]
    assert delivery.status() == await delivery.store.counts() == {"pending": 0, "sent": 4, "failed": 0}


async def test_a_blocked_bot_is_recorded_and_the_next_message_goes(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    tg.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    delivery = halo.delivery

    await delivery.send(MOM, "lost")
    await delivery.send(MOM, "next")

    await eventually(lambda: sent_rows(halo, MOM), what="the next message")
    assert [m["text"] for m in tg.sent(1002)] == ["next"]
    rows = await delivery.store.rows(scope_id=MOM)
    assert [(r.message.text, r.state) for r in rows] == [("lost", "failed"), ("next", "sent")]
    assert "blocked" in (rows[0].last_error or "")
    assert delivery.counts["failed"] == 1
    assert await halo.audit.tail(10, kind="delivery_failed")


async def test_a_message_without_a_running_adapter_waits_and_survives_a_restart(home, fake_llm, tg, started):
    tg.unreachable.add("sendMessage")  # Telegram drops every send: the message keeps being retried
    first = await start(home, fake_llm, tg, started)
    await first.delivery.send(MOM, "the pickup moved to 4pm")
    assert (await first.delivery.store.rows(scope_id=MOM))[0].state == "pending"
    await first.close()
    started.remove(first)

    tg.unreachable.clear()
    second = await start(home, fake_llm, tg, started)  # same HALO_HOME, same halo.db

    await eventually(lambda: sent_rows(second, MOM), what="the pending message after the restart")
    await second.delivery.drain()
    assert [m["text"] for m in tg.sent(1002)] == ["the pickup moved to 4pm"]


async def test_a_reply_goes_through_the_outbox(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    fake_llm.reply("Practice is at 5pm.")
    tg.fail("sendMessage", 429, retry_after=1)

    tg.message(1002, tg.user(1002, "Mom"), "When is practice?")

    [row] = await eventually(lambda: sent_rows(halo, MOM), what="the reply after a 429")
    assert [m["text"] for m in tg.sent(1002)] == ["Practice is at 5pm."]
    assert row.message.kind == "reply" and row.attempts == 2


class FrozenClock:
    """The outbox's clock, moved by the test: a retry is due exactly when the test says."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_retry_waits_as_long_as_telegram_asks_capped(home, fake_llm, tg, started):
    halo = await start(home, fake_llm, tg, started)
    delivery = halo.delivery
    delivery.clock = clock = FrozenClock()
    delivery.max_delay = 300.0
    tg.fail("sendMessage", 429, retry_after=40)

    await delivery.send(MOM, "after the flood")
    [row] = await delivery.store.rows(scope_id=MOM)
    assert row.state == "pending" and row.next_attempt_at == clock.now + timedelta(seconds=40)
    await delivery.drain()
    assert tg.sent(1002) == []  # not due yet: nothing was tried again

    clock.now += timedelta(seconds=40)
    delivery.register("telegram", delivery._adapters["telegram"])  # wakes the worker, as a new adapter would
    await eventually(lambda: tg.sent(1002), what="the retry once due")
    assert [m["text"] for m in tg.sent(1002)] == ["after the flood"]

    tg.fail("sendMessage", 429, retry_after=3600)
    await delivery.send(MOM, "capped")
    [_, capped] = await delivery.store.rows(scope_id=MOM)
    assert capped.next_attempt_at == clock.now + timedelta(seconds=300)  # never more than max_delay


async def test_the_web_chat_reply_and_the_web_inbox_come_through_the_outbox(settings_for, fake_llm, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Hello, Mom.")
    delivery = running.halo.delivery

    status, body = await running.chat("hi", token="mom-token")

    assert (status, body["reply"]) == (200, "Hello, Mom.")
    [reply] = await delivery.store.rows(scope_id="web:mom")
    assert (reply.message.kind, reply.state, reply.message.in_reply_to_envelope is not None) == ("reply", "sent", True)

    # something halo says on its own has no request to answer: it waits in the member's web inbox
    await delivery.send("web:mom", "The dentist moved to Friday.")
    headers = {"Authorization": "Bearer mom-token"}
    async with running.http.get(running.url("/api/chat/inbox"), headers=headers) as resp:
        inbox = await resp.json()
    assert resp.status == 200 and [m["text"] for m in inbox["messages"]] == ["The dentist moved to Friday."]
    assert (inbox["member"], inbox["name"]) == ("mom", "Mom")
    # the chat page polls with the last seq it has: only what is newer comes back
    seen = inbox["messages"][-1]["seq"]
    await delivery.send("web:mom", "Bring the blue folder.")
    async with running.http.get(running.url(f"/api/chat/inbox?after={seen}"), headers=headers) as resp:
        newer = await resp.json()
    assert [m["text"] for m in newer["messages"]] == ["Bring the blue folder."]
    async with running.http.get(running.url("/api/chat/inbox?after=-1"), headers=headers) as resp:
        assert resp.status == 400 and "after" in (await resp.json())["error"]
    async with running.http.get(running.url("/api/chat/inbox")) as resp:
        assert resp.status == 401  # no credential, no inbox


async def test_a_web_reply_someone_waits_for_is_handed_over_then_recorded_as_sent(settings_for, fake_llm, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    delivery = running.halo.delivery
    fake_llm.reply("First.")
    fake_llm.reply("Second.")

    answers = [await running.chat(text, token="mom-token") for text in ("hi", "and again")]

    assert [(status, body["reply"]) for status, body in answers] == [(200, "First."), (200, "Second.")]
    # each is written once, as sent, never pending; after the reply went (nobody waits for the record)
    await delivery.drain()
    rows = await delivery.store.rows(scope_id="web:mom")
    assert [(r.message.text, r.state, r.attempts) for r in rows] == [("First.", "sent", 1), ("Second.", "sent", 1)]
    assert delivery.status() == {"pending": 0, "sent": 2, "failed": 0}
    headers = {"Authorization": "Bearer mom-token"}
    async with running.http.get(running.url("/api/chat/inbox"), headers=headers) as resp:
        assert (await resp.json())["messages"] == []  # a reply someone waited for is not in the inbox
