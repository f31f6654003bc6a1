"""Replies that stream (issue 35): in a Telegram DM the model's text streams into a draft
(sendMessageDraft), then the reply is sent once, as a message, through halo's outbox. A
child's reply is checked whole first, so no draft ever shows more of it than is sent. 👀 sits
on the message while halo works on it. Through the real python-telegram-bot, the real Agents
SDK and the stand-ins for Telegram and the model."""

from __future__ import annotations

import asyncio
import html
import itertools
import re

import pytest

from halo.inventory import Halo
from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram
from tests.waiting import eventually

MOM, TARA = 1002, 1004
LONG = " ".join(f"Sentence number {n} is about the football match on Saturday." for n in range(1, 31))


def visible(sent_html: str) -> str:
    return html.unescape(re.sub(r"</?\w+>", "", sent_html))


async def outbox_rows(halo: Halo, scope_id: str) -> list[str]:
    return [row.message.text for row in await halo.delivery.store.rows(scope_id=scope_id)]


async def test_a_dm_streams_into_a_growing_draft_then_one_message(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start_telegram()
    midway = asyncio.Event()
    text = "Practice is at **five**. " + "Bring water, boots and a snack for after. " * 6
    fake_llm.enqueue(Reply(text=text, midway=midway))

    update = tg.message(MOM, MOM, "When is practice?")
    await tg.wait_for(lambda: tg.drafts(MOM), what="a draft while the model writes")
    assert tg.sent(MOM) == []  # nothing sent as a message yet: the draft is a preview
    midway.set()
    [sent] = await tg.wait_sent(MOM)

    drafts = tg.drafts(MOM)
    assert len(drafts) >= 2 and drafts[-1] == sent
    assert len(visible(drafts[0])) < len(visible(sent))
    for shorter, longer in itertools.pairwise(drafts):  # each one grew
        assert len(visible(longer)) > len(visible(shorter))
    assert sent.startswith("Practice is at <b>five</b>.")
    last_draft = [c for c in tg.calls_to("sendMessageDraft") if c.ok][-1]
    assert last_draft.at <= tg.calls_to("sendMessage")[-1].at
    assert all(
        c.params["chat_id"] == MOM and c.params["draft_id"] == update["message"]["message_id"]
        for c in tg.calls_to("sendMessageDraft")
    )
    assert await outbox_rows(halo, f"telegram:{MOM}") == [text.strip()]  # the record: one row


async def test_a_young_childs_shortened_reply_is_never_shown_longer_in_a_draft(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start_telegram()
    fake_llm.reply(LONG)
    tg.message(TARA, TARA, "Tell me everything about the match")
    [sent] = await tg.wait_sent(TARA)
    assert len(visible(sent)) < len(LONG)  # the output check shortened it
    assert all(len(visible(d)) <= len(visible(sent)) for d in tg.drafts(TARA))
    assert tg.calls_to("sendMessageDraft") == []  # checked whole first: nothing streamed
    assert await outbox_rows(halo, f"telegram:{TARA}") == [visible(sent)]


async def test_a_refused_draft_falls_back_to_typing_and_the_reply_still_arrives(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    await start_telegram()
    tg.fail("sendMessageDraft", 400, "Bad Request: method is not available for this chat", times=100)
    fake_llm.reply("Practice is at five. Bring water.")
    tg.message(MOM, MOM, "When is practice?")
    assert await tg.wait_sent(MOM) == ["Practice is at five. Bring water."]
    assert tg.drafts(MOM) == [] and tg.calls_to("sendChatAction")


async def test_groups_keep_whole_messages(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    await start_telegram()
    fake_llm.reply("Yes, practice is at five.")
    tg.message(-1001234, MOM, "when is practice?", mention=True)
    assert await tg.wait_sent(-1001234) == ["Yes, practice is at five."]
    assert tg.calls_to("sendMessageDraft") == []
    assert tg.reactions == {}  # 👀 is for DMs


async def test_eyes_on_a_dm_while_halo_works_and_gone_once_it_replied(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    await start_telegram()
    hold = asyncio.Event()
    fake_llm.enqueue(Reply(text="Here you are.", hold=hold))
    update = tg.message(MOM, MOM, "Find me the recipe")
    key = (MOM, update["message"]["message_id"])
    await tg.wait_for(lambda: tg.reactions.get(key) == [{"type": "emoji", "emoji": "👀"}], what="👀 on the message")
    hold.set()
    await tg.wait_sent(MOM)
    await eventually(lambda: _async(tg.reactions.get(key) == []), what="👀 taken off")
    off = [c for c in tg.calls_to("setMessageReaction") if not c.params.get("reaction")][-1]
    assert off.at >= tg.calls_to("sendMessage")[-1].at


async def test_no_eyes_and_no_drafts_when_the_family_turns_them_off(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HALO_TELEGRAM__REACT_ON_RECEIPT", "false")
    monkeypatch.setenv("HALO_TELEGRAM__STREAM_DRAFTS", "false")
    await start_telegram()
    fake_llm.reply("Hi there, Mom.")
    tg.message(MOM, MOM, "hello")
    assert await tg.wait_sent(MOM) == ["Hi there, Mom."]
    assert tg.calls_to("setMessageReaction") == [] and tg.calls_to("sendMessageDraft") == []
    assert tg.calls_to("sendChatAction")  # typing, as before


async def _async(value: object) -> object:
    return value
