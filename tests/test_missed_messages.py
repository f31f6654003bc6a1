"""A message a crash left unanswered is answered once after the restart, or, when it is old,
gets one short apology; never twice, however often halo starts again.

The kill -9 test runs `halo serve` as a process against the Telegram and model stand-ins and
kills it while the model is holding the turn. The other tests write the transcript a crash
leaves behind (the person's line, no reply line) and start halo in-process on it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from halo.inventory import Halo
from halo.pipeline.missed import SORRY, CatchUp
from tests.audit_support import home_audit_events
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import telegram_yaml
from tests.test_delivery import start
from tests.test_session_durability import Serve
from tests.transcript_support import recorded_tail, transcript_store
from tests.waiting import eventually
from transcripts.lines import Message, Received

pytestmark = [  # halo.db on SQLite, then on PostgreSQL; halo serve as a process
    pytest.mark.usefixtures("on_both_stores"),
    pytest.mark.slow,
]

MOM = 1002
WAGS = 1001


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def started() -> AsyncIterator[list[Halo]]:
    running: list[Halo] = []
    yield running
    for halo in running:
        await halo.close()


async def leave_unanswered(
    home: Path,
    chat_id: int,
    speaker: str,
    text: str,
    age: timedelta,
    message_id: int | None = None,
    heard: bool = False,
) -> str:
    """The transcript a crash mid-turn leaves: the person's line, fsync'd, and nothing after it."""
    line_id = uuid.uuid4().hex
    async with transcript_store(home) as store:
        await store.append(
            Message(
                id=line_id,
                ts=datetime.now(UTC) - age,
                scope_id=f"telegram:{chat_id}",
                text=text,
                speaker=speaker,
                platform="telegram",
                message_id=str(message_id) if message_id is not None else None,
                received=Received(heard=heard),
                model_input=f"(voice note) {text}" if heard else None,
            )
        )
    return line_id


async def caught_up(halo: Halo) -> tuple[list[str], list[str]]:
    assert halo.catch_up is not None and halo.catch_up.task is not None
    done = await asyncio.wait_for(halo.catch_up.task, timeout=60)
    assert isinstance(done, CatchUp)
    return done.answered, done.apologised


async def test_a_recent_unanswered_message_is_answered_once_with_the_message_sent_to_the_model_once(
    home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram, started: list[Halo]
) -> None:
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url))
    await leave_unanswered(home, MOM, "mom", "What time is swimming on Saturday?", timedelta(minutes=2), heard=True)
    fake_llm.reply("Swimming is at 10:00.")

    halo = await start(home, fake_llm, tg, started)
    assert await caught_up(halo) == ([f"telegram:{MOM}"], [])
    assert await tg.wait_sent(MOM) == ["Swimming is at 10:00."]
    request = fake_llm.model_requests[-1]
    asked = [m for m in request.json["messages"] if m["role"] == "user"]
    # once, and still marked as the voice note it was
    assert [m["content"] for m in asked].count("(voice note) What time is swimming on Saturday?") == 1
    assert not any(m["content"] == "What time is swimming on Saturday?" for m in asked)

    await halo.close()
    started.remove(halo)
    again = await start(home, fake_llm, tg, started)  # a second start: the message is closed now
    assert await caught_up(again) == ([], [])
    assert tg.texts(MOM) == ["Swimming is at 10:00."]
    assert len(fake_llm.model_requests) == 1


async def test_an_old_unanswered_message_gets_one_apology_and_a_kept_group_message_none(
    home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram, started: list[Halo]
) -> None:
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url))
    await leave_unanswered(home, MOM, "mom", "Can you remind me about the dentist?", timedelta(hours=3))
    await leave_unanswered(home, WAGS, "wags", "Ancient history", timedelta(days=3))  # past the window
    async with transcript_store(home) as store:
        await store.append(  # a group message halo only kept (not addressed to it): never answered
            Message(
                id=uuid.uuid4().hex,
                ts=datetime.now(UTC) - timedelta(minutes=1),
                scope_id="telegram:-1001234",
                text="[Wags] see you at six",
                speaker="wags",
                platform="telegram",
                unaddressed=True,
            )
        )

    halo = await start(home, fake_llm, tg, started)
    assert await caught_up(halo) == ([], [f"telegram:{MOM}"])
    assert await tg.wait_sent(MOM) == [SORRY]
    assert tg.texts(WAGS) == [] and tg.texts(-1001234) == []
    assert fake_llm.model_requests == []  # an apology costs no tokens

    await halo.close()
    started.remove(halo)
    again = await start(home, fake_llm, tg, started)
    assert await caught_up(again) == ([], [])
    assert tg.texts(MOM) == [SORRY]


async def test_kill_9_mid_turn_then_the_restart_answers_the_telegram_message_exactly_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hold = asyncio.Event()  # never set: the first run is killed while the model holds its answer

    async def catch_ups(count: int) -> list[dict[str, Any]] | None:  # one event per start
        found = await home_audit_events(home, "missed_messages_caught_up")
        return found if len(found) == count else None

    async with FakeOpenAI() as llm, FakeTelegram() as tg, aiohttp.ClientSession() as http:
        llm.held(hold, "this answer is never sent")
        llm.reply("Dinner is pasta.")
        write_home(home, llm_yaml(llm) + telegram_yaml(tg.base_url) + "memory: {distillation_enabled: false}\n")
        serve = Serve(home)
        await serve.start(http)
        tg.message(MOM, MOM, "What's for dinner?")
        await eventually(lambda: len(llm.model_requests) == 1, within=60, what="the turn to reach the model")
        await eventually(lambda: catch_ups(1), within=60, every=0.2, what="the first start's catch-up")
        await serve.kill()
        assert tg.texts(MOM) == []

        await serve.start(http)
        assert await tg.wait_sent(MOM, within=60) == ["Dinner is pasta."]
        await eventually(lambda: catch_ups(2), within=60, every=0.2, what="the second start's catch-up")
        await serve.kill()

        await serve.start(http)  # and again: nothing is open any more
        caught = await eventually(lambda: catch_ups(3), within=60, every=0.2, what="the third start's catch-up")
        await serve.kill()
        assert tg.texts(MOM) == ["Dinner is pasta."]
        assert len(llm.model_requests) == 2  # the killed turn's, and the one answer
        # answered by the catch-up, or by Telegram sending the unconfirmed update again: once either way
        assert caught[2]["answered"] == 0
        lines = await recorded_tail(home, f"telegram:{MOM}")
        assert [line.text for line in lines if line.role == "user"] == ["What's for dinner?"]
        assert [line.text for line in lines if line.role == "assistant"] == ["Dinner is pasta."]


async def test_a_message_telegram_sends_again_after_the_crash_is_answered_once_and_recorded_once(
    home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram, started: list[Halo]
) -> None:
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url))
    update = tg.message(MOM, MOM, "Is the car booked for its service?")  # never confirmed: sent again
    await leave_unanswered(
        home,
        MOM,
        "mom",
        "Is the car booked for its service?",
        timedelta(minutes=1),
        message_id=update["message"]["message_id"],
    )
    fake_llm.reply("Yes, Thursday at 9.")

    halo = await start(home, fake_llm, tg, started)
    await caught_up(halo)
    assert await tg.wait_sent(MOM) == ["Yes, Thursday at 9."]
    await halo.gateway.drain()
    assert tg.texts(MOM) == ["Yes, Thursday at 9."]
    assert len(fake_llm.model_requests) == 1
    lines = await recorded_tail(home, f"telegram:{MOM}")
    assert [line.text for line in lines if line.role == "user"] == ["Is the car booked for its service?"]
