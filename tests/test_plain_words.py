"""Reminders and lists in plain words, done in code at L0 (issue 25: "anything a deterministic
handler owns"). Real parts: halo built from halo.yaml with routing on, the reminder and list
stores in halo.db, the stand-in model for what the words leave unclear. The assertions are on
the reply the member got, what /reminders and /list show afterwards, and the model calls made
(none, or one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import read_memory
from tests.test_routing import ROUTED_FAMILY, build, envelope, routed_yaml, transcript_marks

MOM_DM = "telegram:1002"


@pytest.fixture
async def halo(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Halo]:
    running = build(home, fake_llm)
    yield running
    await running.close()


async def say(halo: Halo, member: str, text: str) -> str:
    reply = await halo.gateway.handle(envelope(halo, member, text))
    await halo.gateway.drain()
    assert reply.text is not None
    return reply.text


@pytest.mark.parametrize(
    ("text", "whom", "what"),
    [
        ("remind me to buy milk at 5pm", "you", "buy milk"),
        ("Can you remind Wags about the dentist tomorrow at 9?", "Wags", "the dentist"),
        ("please remind me at 7:30 tomorrow to pack the football kit", "you", "pack the football kit"),
        ("halo, remind parents to pay the window cleaner on friday 18:00", "the parents", "pay the window cleaner"),
        ("remind me to stretch in 20 minutes", "you", "stretch"),
    ],
)
async def test_a_reminder_with_a_clear_time_is_set_without_a_model(
    halo: Halo, fake_llm: FakeOpenAI, text: str, whom: str, what: str
) -> None:
    answer = await say(halo, "mom", text)
    assert answer.startswith(f"OK, I'll remind {whom} ") and answer.endswith(f": {what}")
    assert fake_llm.model_requests == []
    assert transcript_marks(halo, MOM_DM)[-1][1:] == ("L0", "a reminder, set in code from plain words")
    if whom == "you":
        assert what in await say(halo, "mom", "/reminders")


@pytest.mark.parametrize(
    "text",
    [
        "remind me to call grandma at 3",  # 3 am or 3 pm?
        "remind me to put the bins out at 8",  # morning or evening?
        "remind me on Friday to pay the window cleaner",  # a day, no time
        "can you remind us both about the parents evening on Wednesday?",  # who is "us"?
        "remind me to call Mom at 5pm about the dentist",  # the time is not at the end
        "add a reminder for the car MOT next month",
    ],
)
async def test_what_the_words_leave_unclear_goes_to_the_model(halo: Halo, fake_llm: FakeOpenAI, text: str) -> None:
    fake_llm.reply("What time should I remind you?")
    assert await say(halo, "mom", text) == "What time should I remind you?"
    assert await say(halo, "mom", "/reminders") == "No reminders. Set one with /remind <when> <text>."


async def test_the_policy_still_decides_who_may_be_reminded(halo: Halo, fake_llm: FakeOpenAI) -> None:
    answer = await say(halo, "tara", "remind Mom to buy sweets at 5pm")  # a young child
    assert answer.startswith("Sorry, you can't set reminders for Mom")
    assert await say(halo, "mom", "/reminders") == "No reminders. Set one with /remind <when> <text>."


async def test_a_list_is_kept_and_shown_in_plain_words(halo: Halo, fake_llm: FakeOpenAI) -> None:
    assert await say(halo, "mom", "add eggs, milk and bread to the shopping list") == (
        "Added to shopping list: eggs, milk, bread."
    )
    assert await say(halo, "mom", "Could you add a charger to my list please?") == "Added to list: a charger."
    shown = await say(halo, "mom", "what's on the shopping list?")
    assert all(item in shown for item in ("eggs", "milk", "bread")) and "charger" not in shown
    assert "a charger" in await say(halo, "mom", "/list")
    assert fake_llm.model_requests == []
    assert [mark[1] for mark in transcript_marks(halo, MOM_DM)] == ["L0", "L0", "L0", "L0"]

    fake_llm.reply("This weekend: football on Saturday.")
    assert await say(halo, "mom", "what's on our list for the weekend?") == "This weekend: football on Saturday."


async def test_list_shows_the_list_in_use(halo: Halo) -> None:
    """After "add eggs and bread to the shopping list", /list showed "The list is empty. Other
    lists here: shopping." (issue 32): it shows the only list, or the one last used."""
    await say(halo, "mom", "add eggs and bread to the shopping list")
    assert await say(halo, "mom", "/list") == "The shopping list:\n1. eggs\n2. bread"
    await say(halo, "mom", "/list school add glue")
    assert (await say(halo, "mom", "/list")).startswith("The school list:\n1. glue")
    assert (
        await say(halo, "mom", "/list shopping") == "The shopping list:\n1. eggs\n2. bread\nOther lists here: school."
    )


async def test_with_routing_off_the_model_answers_as_before(home: Path, fake_llm: FakeOpenAI) -> None:
    family = ROUTED_FAMILY.replace("family: {name: Sharma}\n", "").replace(
        "routing: {enabled: true}", "routing: {enabled: false}"
    )
    write_home(home, routed_yaml(fake_llm), family=family)
    halo = build_halo(load_settings(home))
    try:
        fake_llm.reply("I'll add those.")
        assert await say(halo, "mom", "add eggs to the shopping list") == "I'll add those."
        assert [r.json["model"] for r in fake_llm.scripted_requests] == ["main-model"]
    finally:
        await halo.close()


async def test_remember_that_is_kept_as_the_command_keeps_it(halo: Halo, fake_llm: FakeOpenAI) -> None:
    answer = await say(halo, "mom", "please remember that Tara is allergic to peanuts")
    assert answer.startswith("Remembered: ") and "Tara is allergic to peanuts" in answer
    assert fake_llm.model_requests == []
    assert transcript_marks(halo, MOM_DM)[-1][1:] == ("L0", "a fact, kept in code from plain words")
    assert "Tara is allergic to peanuts" in await read_memory(halo, halo.paths.memory_file(MOM_DM))

    for text in ("remember when we went to the beach?", "remember to buy milk"):  # a question, a reminder
        fake_llm.reply("Tell me more.")
        assert await say(halo, "mom", text) == "Tell me more."
    assert len(fake_llm.scripted_requests) == 2


async def test_a_long_message_is_read_as_far_as_a_time_phrase_can_reach(halo: Halo, fake_llm: FakeOpenAI) -> None:
    """Only the last few words are tried as the time: a long message costs no more than a short one."""
    errands = " and ".join(f"pick up parcel {n} on the way" for n in range(200))
    answer = await say(halo, "mom", f"remind me to {errands} at 5pm")
    assert answer.startswith("That reminder is too long")  # read whole, and refused as /remind refuses it
    fake_llm.reply("Which time?")
    assert await say(halo, "mom", f"remind me to {errands} on the way") == "Which time?"  # no time: the model's
