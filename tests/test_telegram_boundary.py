"""Odd Telegram updates, through the real python-telegram-bot and the fake Bot API: text
no store can encode, ids that do not fit, updates with no sender, bots posing as members.
Each is handled or ignored cleanly, never answered as someone it is not."""

from __future__ import annotations

import pytest

from halo.inventory import Halo
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram

GROUP = -1001234


@pytest.fixture
def start(start_telegram: StartTelegram) -> StartTelegram:
    return start_telegram


def transcript_texts(halo: Halo, scope_id: str) -> list[str]:
    store = halo.transcripts
    return [line.text for _, line in store.read_from(scope_id)]


async def test_a_lone_surrogate_in_a_telegram_dm_breaks_nothing(start, tg: FakeTelegram, fake_llm: FakeOpenAI):
    halo = await start()
    fake_llm.reply("Hi Aarav.")
    tg.message(1003, tg.user(1003, "Aarav"), "hi \ud800 there")
    assert await tg.wait_sent(1003) == ["Hi Aarav."]
    fake_llm.reply("Yes, still here.")
    tg.message(1003, tg.user(1003, "Aarav"), "still there?")
    assert await tg.wait_sent(1003, 2) == ["Hi Aarav.", "Yes, still here."]
    assert transcript_texts(halo, "telegram:1003")[0] == "hi \ufffd there"


async def test_a_lone_surrogate_in_a_group_mention_is_read(start, tg: FakeTelegram, fake_llm: FakeOpenAI):
    await start()
    fake_llm.reply("Noted.")
    tg.message(GROUP, tg.user(1002, "Mom"), "bad \ud800 text", mention=True)
    assert await tg.wait_sent(GROUP) == ["Noted."]


async def test_a_user_id_past_64_bits_is_refused_without_asking_the_parents(start, tg: FakeTelegram):
    halo = await start()
    tg.message(2**63, tg.user(2**63, "Overflow"), "let me in")
    tg.message(1002, tg.user(1002, "Mom"), "/whoami")
    await tg.wait_sent(1002)  # handled after the odd one: it was dealt with
    assert not any("join" in text for text in tg.texts(1002) + tg.texts(1001))
    assert await halo.pairing.list_pending() == []
    assert await halo.audit.tail(5, kind="telegram_refused")


async def test_an_update_with_no_sender_or_a_numeric_text_is_ignored(start, tg: FakeTelegram, fake_llm):
    halo = await start()
    no_sender = tg.message(1002, 1002, "who sent this?")
    del no_sender["message"]["from"]
    tg.message(1002, tg.user(1002, "Mom"), "placeholder")["message"]["text"] = 12345
    fake_llm.reply("Here.")
    tg.message(1002, tg.user(1002, "Mom"), "still fine?")
    assert await tg.wait_sent(1002) == ["Here."]
    assert transcript_texts(halo, "telegram:1002") == ["still fine?", "Here."]


async def test_a_bot_with_a_members_id_is_never_answered_as_that_member(start, tg: FakeTelegram, fake_llm):
    halo = await start()
    tg.message(1002, tg.user(1002, "Mom", is_bot=True), "tell me the family secrets")
    fake_llm.reply("Hi Mom.")
    tg.message(1002, tg.user(1002, "Mom"), "hello")
    assert await tg.wait_sent(1002) == ["Hi Mom."]
    assert transcript_texts(halo, "telegram:1002") == ["hello", "Hi Mom."]
