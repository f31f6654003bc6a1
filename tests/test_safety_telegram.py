"""Child safety over Telegram end to end: the real python-telegram-bot polls the fake Bot API,
the real gateway, guardrails and policy decide, and parents hear about it in their own DMs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from halo.inventory import Halo
from tests.conftest import llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.safety_support import SAFETY_FAMILY, SafetyScript, alerts, transcript
from tests.telegram_support import StartTelegram

FAMILY_GROUP = -1005
FAMILY = SAFETY_FAMILY + f"family_group: {{telegram_chat_id: {FAMILY_GROUP}}}\n"
PARENTS = {1001: "wags", 1002: "mom"}


@pytest.fixture
async def model() -> AsyncIterator[tuple[FakeOpenAI, SafetyScript]]:
    script = SafetyScript(reply="Owls eat mice and insects.")
    async with FakeOpenAI(responder=script) as fake:
        yield fake, script


@pytest.fixture
def start(start_telegram: StartTelegram, model: tuple[FakeOpenAI, SafetyScript]) -> Callable[..., Awaitable[Halo]]:
    """halo on the Telegram stand-in, with the safety script as its model and this family."""
    return lambda family=FAMILY: start_telegram(llm=llm_yaml(model[0]), family=family)


async def test_a_young_childs_cry_for_help_reaches_every_parent_without_her_words(start, tg, model):
    fake, script = model
    halo = await start()
    words = "I want to hurt myself, nobody listens"

    tg.message(1004, tg.user(1004, "Tara"), words)
    [reply] = await tg.wait_sent(1004)
    assert "Thank you for telling me" in reply and "Wags or Mom" in reply and "emergency" in reply

    for parent_id, parent in PARENTS.items():
        [dm] = await tg.wait_sent(parent_id)
        assert "Tara" in dm and "self-harm" in dm and "high" in dm
        assert "hurt myself" not in dm and "nobody listens" not in dm
        assert "inbox" in dm  # where a parent reads her words: inside halo, audited
        # the DM is in the parent's Telegram transcript as an event; the words only in the web inbox
        events = [text for role, text in transcript(halo, f"telegram:{parent_id}") if role == "event"]
        assert events == [dm]
        assert all("hurt myself" not in text for _, text in transcript(halo, f"telegram:{parent_id}"))
        [inbox] = await alerts(halo, parent)
        assert f'"{words}"' in inbox
    assert tg.sent(1003) == []  # her brother is not told
    assert fake.model_requests == [] and script.answered == []  # the floor decided: no model at all
    assert transcript(halo, "telegram:1004")[-1] == ("assistant", reply)
    delivered = await halo.audit.tail(10, kind="notification_delivered")
    assert sorted(e["scope_id"] for e in delivered) == ["telegram:1001", "telegram:1002", "web:mom", "web:wags"]


async def test_an_adolescent_without_visibility_parents_get_the_category_only(start, tg, model):
    script = model[1]
    script.verdicts["bring a friend along"] = ("high", "strangers", None)
    script.summary = "A man Aarav met in a game wants to meet him."
    halo = await start()
    words = "this guy from the game says I can come to his place, I shouldn't bring a friend along"

    tg.message(1003, tg.user(1003, "Aarav"), words)
    [reply] = await tg.wait_sent(1003)
    assert "Thank you for telling me" in reply and "adult you trust" in reply
    assert script.answered == []  # the classifier tripped the input guardrail before the model ran

    for parent_id, parent in PARENTS.items():
        [dm] = await tg.wait_sent(parent_id)
        assert "Aarav" in dm and "contact with a stranger" in dm
        assert "private under their visibility setting" in dm
        for fragment in ("game", "his place", "friend", "met in a game"):
            assert fragment not in dm
        [inbox] = await alerts(halo, parent)
        assert "his place" not in inbox and "met in a game" not in inbox


async def test_a_childs_reply_over_telegram_keeps_to_her_profile(start, tg, model):
    script = model[1]
    script.reply = "Owls hunt at night. " * 80
    await start()
    tg.message(1004, tg.user(1004, "Tara"), "What do owls eat?")
    [reply] = await tg.wait_sent(1004)
    assert len(reply) <= 600 and reply.endswith("night.")
    assert [d for d, _ in script.classified] == ["input", "output"]
    assert tg.sent(1001) == [] and tg.sent(1002) == []


async def test_the_family_group_over_telegram(start, tg, model):
    script = model[1]
    halo = await start()
    tara = tg.user(1004, "Tara")

    tg.message(FAMILY_GROUP, tara, "I drew a horse today")  # not addressed
    tg.message(FAMILY_GROUP, tg.user(1002, "Mom"), "dinner at 7")
    tg.message(FAMILY_GROUP, tara, "what do owls eat?", mention=True)
    [answer] = await tg.wait_sent(FAMILY_GROUP)
    assert answer == "Owls eat mice and insects."
    assert script.answered[-1].endswith("what do owls eat?")

    # a child's unaddressed cry for help: nothing in the group, the parents told in their DMs
    tg.message(FAMILY_GROUP, tara, "I want to hurt myself")
    await tg.wait_sent(1001)
    await tg.wait_sent(1002)
    [dm] = tg.texts(1001)
    assert "in the family group" in dm and "hurt myself" not in dm
    assert tg.texts(FAMILY_GROUP) == [answer]
    assert "horse" not in "".join(tg.texts(FAMILY_GROUP))
    assert halo.adapter_status()["telegram"]["connected"]
