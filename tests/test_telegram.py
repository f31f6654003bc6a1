"""Telegram end to end: the real python-telegram-bot polls a fake Bot API, the real gateway
and policy decide, the real Agents SDK asks a fake model. Each scenario checks what went
to Telegram, what went to the model, and what is on disk."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_settings
from halo.family.pairing import CODE_ALPHABET, CODE_LENGTH
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import FAMILY_YAML, OWNER_AUTH, free_port, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.telegram_support import StartTelegram, adapter_of, telegram_yaml, tiny_backoff
from tests.waiting import eventually

GROUP = -1001234
CODE = re.compile(rf"\b[{CODE_ALPHABET}]{{{CODE_LENGTH}}}\b")


def outbox(halo: Halo) -> dict[str, int]:
    """halo's outbox counts (pending, sent, failed), as /status shows them."""
    return halo.delivery.counts


async def handled(halo: Halo, update: dict[str, Any]) -> None:
    """The update was processed: its replies, if any, are queued (atomically with this mark)."""
    store = adapter_of(halo).store
    await eventually(lambda: store.seen(update["update_id"]))


def transcript(halo: Halo, scope_id: str) -> list[tuple[str, str]]:
    store = halo.transcripts
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


@pytest.fixture
def start(start_telegram: StartTelegram) -> StartTelegram:
    """Start halo with the Telegram adapter pointed at the fake, and wait until it polls."""
    return start_telegram


async def test_a_parents_dm_round_trip(start, tg: FakeTelegram, fake_llm: FakeOpenAI):
    halo = await start()
    fake_llm.reply("Practice is at **5pm** — bring <water> & snacks.")

    tg.message(1002, tg.user(1002, "Mom"), "When is soccer practice?")
    [sent] = await tg.wait_sent(1002)

    assert sent == "Practice is at <b>5pm</b> — bring &lt;water&gt; &amp; snacks."
    assert tg.sent(1002)[0]["parse_mode"] == "HTML"
    [typing] = tg.calls_to("sendChatAction")
    assert typing.params == {"chat_id": 1002, "action": "typing"} and typing.at < tg.calls_to("sendMessage")[0].at
    prompt = fake_llm.last_prompt_text()
    assert "When is soccer practice?" in prompt and "Mom" in prompt
    assert transcript(halo, "telegram:1002") == [
        ("user", "When is soccer practice?"),
        ("assistant", "Practice is at **5pm** — bring <water> & snacks."),
    ]
    menu = {c["command"] for c in tg.calls_to("setMyCommands")[0].params["commands"]}
    assert {"help", "whoami", "new", "approve", "deny", "resume"} <= menu
    status = halo.adapter_status()["telegram"]
    assert status["connected"] and status["bot"] == "@halo_family_bot"
    await eventually(lambda: _async(outbox(halo) == {"pending": 0, "sent": 1, "failed": 0}))


async def test_a_childs_dm_round_trip_and_neither_sees_the_other(start, tg, fake_llm):
    halo = await start()
    fake_llm.reply("Lovely, I'll keep it secret.")
    tg.message(1002, 1002, "Aarav's surprise party is at the lake house.")
    await tg.wait_sent(1002)
    fake_llm.reply("Maybe a board game night?")
    tg.message(1003, tg.user(1003, "Aarav"), "What are we doing this weekend? Also I broke the vase.")
    assert await tg.wait_sent(1003) == ["Maybe a board game night?"]
    child_prompt = fake_llm.last_prompt_text()
    assert "Aarav" in child_prompt and "lake house" not in child_prompt

    tg.message(1002, 1002, "Anything new?")
    await tg.wait_sent(1002, 2)
    parent_prompt = fake_llm.last_prompt_text()
    assert "lake house" in parent_prompt and "vase" not in parent_prompt
    assert transcript(halo, "telegram:1003")[0][1].endswith("I broke the vase.")
    assert all("vase" not in text for _, text in transcript(halo, "telegram:1002"))


async def test_a_stranger_pairs_through_a_parent(start, tg, fake_llm, home: Path):
    halo = await start()
    kiran = tg.user(5555, "Kiran", username="kiran_s")

    tg.message(5555, kiran, "hi! who are you?")
    [reply] = await tg.wait_sent(5555)
    code = CODE.search(reply).group()
    for parent in (1001, 1002):
        [notice] = await tg.wait_sent(parent)
        assert notice.startswith("Someone (Kiran, @kiran_s, telegram id 5555) asks to join")
        assert f"/approve {code} child Kiran" in notice and f"/deny {code}" in notice
    again = [tg.message(5555, kiran, f"hello? {n}") for n in range(2)]
    await handled(halo, again[-1])
    assert tg.texts(5555) == [reply]  # one reply, however often they write
    assert fake_llm.model_requests == []
    assert transcript(halo, "telegram:5555") == []

    child = tg.message(1003, 1003, f"/approve {code} child Kiran")
    [refusal] = await tg.wait_sent(1003)
    assert "only parents can approve" in refusal
    assert "telegram_user_id: 5555" not in (home / "halo.yaml").read_text() and not (home / "halo.yaml.bak").exists()
    await handled(halo, child)

    before = (home / "halo.yaml").read_text()
    tg.message(1002, 1002, f"/approve {code} child Kiran adolescent")
    approved = (await tg.wait_sent(1002, 2))[-1]
    assert approved.startswith("Approved: Kiran (child, adolescent, id kiran)")
    yaml = (home / "halo.yaml").read_text()
    assert "# the Sharmas — edited by hand" in yaml and "telegram_user_id: 5555" in yaml
    assert (home / "halo.yaml.bak").read_text() == before
    assert (await tg.wait_sent(5555, 2))[-1].startswith("Welcome, Kiran!")

    fake_llm.reply("Hi Kiran, nice to meet you!")
    tg.message(5555, kiran, "hello again")
    assert (await tg.wait_sent(5555, 3))[-1] == "Hi Kiran, nice to meet you!"
    assert "hello again" in fake_llm.last_prompt_text() and "hi! who are you?" not in fake_llm.all_prompt_text()
    events = {e["kind"]: e for e in await halo.audit.tail(50) if e["kind"].startswith("pairing")}
    assert events["pairing_requested"]["platform_user_id"] == "5555"
    assert (events["pairing_approved"]["by"], events["pairing_approved"]["member_id"]) == ("mom", "kiran")


async def test_the_parents_group_answers_mentions_keeps_chatter_and_stops_for_a_child(start, tg, fake_llm):
    halo = await start()
    mom, wags, aarav = tg.user(1002, "Mom"), tg.user(1001, "Wags"), tg.user(1003, "Aarav")

    chatter = tg.message(GROUP, wags, "We're out of milk again.")
    await handled(halo, chatter)
    assert tg.sent(GROUP) == [] and fake_llm.model_requests == []
    fake_llm.reply("Milk, and maybe bread.")
    asked = tg.message(GROUP, mom, "what do we need from the shop?", mention=True)
    [answer] = await tg.wait_sent(GROUP)
    assert answer == "Milk, and maybe bread."
    assert tg.sent(GROUP)[0]["reply_parameters"]["message_id"] == asked["message"]["message_id"]
    prompt = fake_llm.last_prompt_text()
    assert "[Wags] We're out of milk again." in prompt and "[Mom] @halo_family_bot what do we need" in prompt
    assert [role for role, _ in transcript(halo, f"telegram:{GROUP}")] == ["user", "user", "assistant"]

    tg.message(GROUP, aarav, "hi everyone!")
    for parent in (1001, 1002):
        [notice] = await tg.wait_sent(parent)
        assert "stopped using the parents group: Aarav (child) wrote there" in notice
    assert (await halo.audit.tail(5, kind="group_suspended"))[0]["speaker"] == "aarav"
    requests = len(fake_llm.model_requests)
    ignored = tg.message(GROUP, mom, "hello?", mention=True)
    await handled(halo, ignored)
    assert len(tg.sent(GROUP)) == 1 and len(fake_llm.model_requests) == requests

    tg.message(GROUP, mom, "/resume")
    assert "Aarav (child) is still in the group" in (await tg.wait_sent(GROUP, 2))[-1]
    assert tg.calls_to("getChatMember")[-1].params == {"chat_id": GROUP, "user_id": 1003}
    tg.leave(GROUP, aarav)
    tg.message(GROUP, mom, "/resume")
    assert (await tg.wait_sent(GROUP, 3))[-1] == "Resumed: I'm back in the parents group."
    fake_llm.reply("Back again.")
    tg.message(GROUP, mom, "still there?", mention=True)
    assert (await tg.wait_sent(GROUP, 4))[-1] == "Back again."


async def test_someone_unknown_joining_the_parents_group_stops_it(start, tg):
    halo = await start()
    tg.join(GROUP, tg.user(7777, "Guest", username="guest"), by=1001)
    [notice] = await tg.wait_sent(1002)
    assert "someone I don't know (Guest, @guest, id 7777) joined it" in notice
    assert await halo.groups.suspended_scopes() == [f"telegram:{GROUP}"]


async def test_respond_to_all_answers_every_parent_message(start, tg, fake_llm):
    await start(
        family=FAMILY_YAML.replace(
            "parents_group: {telegram_chat_id: -1001234}",
            "parents_group: {telegram_chat_id: -1001234, respond_to_all: true}",
        )
    )
    fake_llm.reply("Noted.")
    tg.message(GROUP, 1001, "dentist on friday")
    assert await tg.wait_sent(GROUP) == ["Noted."]


async def test_an_unconfigured_group_gets_one_notice_then_silence(start, tg, fake_llm):
    halo = await start()
    other = -100555
    tg.join(other, tg.user(999, "halo", is_bot=True), by=1001)
    [notice] = await tg.wait_sent(other)
    assert "parents_group.telegram_chat_id" in notice and str(other) in notice
    later = [tg.message(other, 1001, "hello halo", mention=True), tg.message(other, 1002, "/help")]
    await handled(halo, later[-1])
    assert tg.texts(other) == [notice] and fake_llm.model_requests == []
    [row] = await halo.delivery.store.rows(scope_id=f"telegram:{other}")  # the one way to send
    assert (row.message.kind, row.state, row.message.text) == ("notice", "sent", notice)
    denied = await halo.audit.tail(10, kind="policy")
    assert any(e["resource"] == f"telegram:{other}" and e["policy_ids"] == ["group-untrusted"] for e in denied)


async def test_a_restart_does_not_answer_the_same_update_again(start, tg, fake_llm):
    halo = await start()
    fake_llm.reply("Got it: milk.")
    first = tg.message(1002, 1002, "remember the milk")
    await tg.wait_sent(1002)
    await halo.close()

    tg.redeliver(first)  # Telegram sends it again: the confirmation was lost in the crash
    again = await start()
    fake_llm.reply("Second answer.")
    second = tg.message(1002, 1002, "and eggs")
    await tg.wait_sent(1002, 2)
    await handled(again, first)
    await handled(again, second)
    assert tg.texts(1002) == ["Got it: milk.", "Second answer."]
    assert len(fake_llm.model_requests) == 2
    assert [t for r, t in transcript(again, "telegram:1002") if r == "user"] == ["remember the milk", "and eggs"]
    await eventually(  # the adapter marks an update processed once halo has taken it, maybe just after the reply
        lambda: adapter_of(again).status()["last_update_id"] > first["update_id"], what="the update marked processed"
    )


async def test_429_then_success_delivers_the_reply_once(start, tg, fake_llm):
    await start()
    tg.fail("sendMessage", 429, retry_after=1)
    fake_llm.reply("Here you go.")
    tg.message(1001, 1001, "hi")
    assert await tg.wait_sent(1001) == ["Here you go."]
    refused, accepted = tg.calls_to("sendMessage")
    assert (refused.ok, accepted.ok) == (False, True)  # that the wait honours retry_after: test_delivery.py


async def test_a_long_reply_is_split_on_paragraphs(start, tg, fake_llm):
    halo = await start()
    paragraphs = [f"Paragraph {n}: " + "word " * 400 for n in range(5)]
    long_reply = "\n\n".join(p.strip() for p in paragraphs)
    fake_llm.reply(long_reply)
    tg.message(1002, 1002, "tell me everything")
    pieces = await tg.wait_sent(1002, 3)
    assert all(len(p) <= 4096 for p in pieces)
    assert "\n\n".join(pieces) == long_reply  # cut only between paragraphs, nothing lost
    assert transcript(halo, "telegram:1002")[-1] == ("assistant", long_reply)


async def test_a_reply_that_cannot_be_sent_is_kept_and_retried(start, tg, fake_llm):
    halo = await start()
    adapter = adapter_of(halo)
    tg.unreachable.add("sendMessage")
    fake_llm.reply("Saved for later.")
    update = tg.message(1001, 1001, "are you there?")
    await handled(halo, update)
    await eventually(lambda: _async(outbox(halo)["pending"] == 1))
    assert "NetworkError" in adapter.status()["last_error"]
    assert "sendMessage" in [c.method for c in tg.calls if not c.ok]

    tg.unreachable.clear()
    assert await tg.wait_sent(1001) == ["Saved for later."]
    await eventually(lambda: _async(outbox(halo)["pending"] == 0))
    assert len(tg.sent(1001)) == 1


async def test_when_telegram_answers_again_what_waits_goes_at_once_not_at_its_next_retry(start, tg, fake_llm):
    halo = await start()
    adapter = adapter_of(halo)
    delivery = halo.delivery
    delivery.base_delay = delivery.max_delay = 3600  # the next retry would be an hour away
    tg.unreachable.update({"sendMessage", "getUpdates"})  # Telegram is down
    await delivery.send("telegram:1001", "Sent while Telegram was down.")
    await eventually(lambda: _async(not adapter.status()["connected"]), what="the outage to be seen")
    [row] = await delivery.store.rows(scope_id="telegram:1001")
    assert row.state == "pending" and row.attempts == 1

    tg.unreachable.clear()  # back: the next long poll succeeds, and the outbox is nudged
    assert await tg.wait_sent(1001) == ["Sent while Telegram was down."]


async def _async(value: Any) -> Any:
    return value


async def test_what_telegram_refuses_is_kept_as_failed_and_audited(start, tg, fake_llm):
    halo = await start()
    tg.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    tg.message(1004, 1004, "hi")
    await eventually(lambda: _async(outbox(halo)["failed"] == 1))
    [event] = await halo.audit.tail(5, kind="telegram_delivery_failed")
    assert event["chat_id"] == 1004 and "blocked" in event["error"]


async def test_formatting_telegram_refuses_is_sent_as_plain_text(start, tg, fake_llm):
    await start()
    tg.fail("sendMessage", 400, "Bad Request: can't parse entities: unsupported start tag")
    fake_llm.reply("**Bold** and <angle> brackets")
    tg.message(1001, 1001, "format me")
    await tg.wait_sent(1001)
    assert tg.sent(1001)[0] == {"chat_id": 1001, "text": "**Bold** and <angle> brackets"}


async def test_each_chat_in_order_and_chats_concurrently(start, tg, fake_llm):
    await start()

    slow_one_may_answer = asyncio.Event()

    def answer(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        return Reply(text=f"re: {last}", hold=slow_one_may_answer if last == "slow one" else None)

    fake_llm.responder = answer
    tg.message(1001, 1001, "slow one")
    tg.message(1001, 1001, "quick follow-up")
    tg.message(1002, 1002, "meanwhile")
    # the other chat did not wait: its answer arrives while the slow one is still held
    assert await tg.wait_sent(1002) == ["re: meanwhile"]
    assert tg.texts(1001) == []
    slow_one_may_answer.set()
    await tg.wait_sent(1001, 2)
    assert tg.texts(1001) == ["re: slow one", "re: quick follow-up"]


async def test_unreachable_telegram_keeps_halo_running_and_status_says_so(
    home: Path,
    fake_llm: FakeOpenAI,
    serve_halo: Any,
):
    port = free_port()
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(f"http://127.0.0.1:{port}/bot"))
    running = await serve_halo(load_settings(home))
    tiny_backoff(running.halo)
    await running.halo.start_adapters()
    adapter = adapter_of(running.halo)
    await eventually(lambda: _async(adapter.health.last_error is not None))

    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
        telegram = (await resp.json())["adapters"]["telegram"]
    assert telegram["connected"] is False and "NetworkError" in telegram["last_error"]
    assert TOKEN not in str(telegram)
    status, body = await running.chat("still working?", token="mom-token")
    assert (status, body["reply"]) == (200, "Hello from the fake model")
    await running.halo.delivery.send("telegram:1001", "Queued while Telegram was away.")
    await eventually(lambda: _async(outbox(running.halo)["pending"] == 1))

    async with FakeTelegram(port=port) as tg:
        assert await tg.wait_sent(1001) == ["Queued while Telegram was away."]
        await eventually(lambda: _async(adapter.status()["connected"]))
        await running.halo.close()  # while the fake still answers: stopping does not wait out a retry


async def test_webhook_mode_takes_updates_only_with_the_secret(home: Path, fake_llm, tg, serve_halo):
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url, webhook_url="https://halo.example.org/tg/hook"))
    running = await serve_halo(load_settings(home))
    await running.halo.start_adapters()
    adapter = adapter_of(running.halo)
    await tg.wait_for(lambda: tg.webhook, what="setWebhook")
    assert tg.webhook["url"] == "https://halo.example.org/tg/hook"
    secret = tg.webhook["secret_token"]
    update = {"update_id": 41, "message": tg.message(1002, 1002, "via webhook")["message"]}

    async with running.http.post(
        running.url("/tg/hook"), json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
    ) as resp:
        assert resp.status == 403
    async with running.http.post(
        running.url("/tg/hook"), json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret}
    ) as resp:
        assert resp.status == 200
    assert await tg.wait_sent(1002) == ["Hello from the fake model"]
    assert tg.calls_to("getUpdates") == [] and adapter.status()["mode"] == "webhook"


async def test_the_bot_token_never_reaches_the_log(start, tg, fake_llm, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpx").setLevel(logging.DEBUG)  # even when someone turns httpx up
    try:
        halo = await start()
        tg.fail("sendMessage", 500, "Internal Server Error")
        tg.message(1002, 1002, "hi")
        await tg.wait_sent(1002)
        await halo.close()
    finally:
        logging.getLogger("httpx").setLevel(logging.WARNING)
    assert "getUpdates" in caplog.text or "sendMessage" in caplog.text  # logging did happen
    assert TOKEN not in caplog.text and TOKEN.split(":")[1] not in caplog.text


async def test_a_rejected_token_is_reported_without_the_token(home: Path, fake_llm, tg, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "987654321:AAHwrongTokenwrongTokenwrongToken12345"
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url).replace(TOKEN, wrong))
    halo = build_halo(load_settings(home))
    try:
        await halo.start_adapters()
        adapter = adapter_of(halo)
        await eventually(lambda: _async(adapter.health.last_error))
        assert "rejected the bot token" in adapter.status()["last_error"]
    finally:
        await halo.close()
    assert wrong not in caplog.text and wrong.split(":")[1] not in caplog.text
