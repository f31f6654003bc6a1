"""Cheap first, in what a request carries: nothing the model is sent twice, and no more than the
level needs. The model still sees what it needs — these tests read the prompts it was sent.

- A message that needed no model (thanks, "ok" in a group) stays in the transcript but not in
  the model's history.
- A day's notes leave out what the history sent with them already holds.
- An L1 reply (small talk) gets the last few history items and no tool schemas; L2 gets the
  whole history and every tool the policy offers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from memory.when import day_of, hhmm
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import write_memory
from tests.test_routing import build

MORNING = datetime(2025, 3, 3, 8, 15, tzinfo=UTC)


@pytest.fixture
async def halo(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Halo]:
    running = build(home, fake_llm)
    yield running
    await running.close()


def says(halo: Halo, chat: str, text: str, ts: datetime) -> Envelope:
    mom = halo.family.member("mom")
    return Envelope("telegram", resolve_scope(halo.family, chat), Speaker("1002", member=mom), text, ts=ts)


def history_of(request_json: dict[str, object]) -> list[str]:
    """The text of each history message a chat request carried (not the instructions, the note or the message)."""
    messages = request_json["messages"]
    assert isinstance(messages, list)
    return [json.dumps(m.get("content")) for m in messages[1:-2]]


async def test_an_acknowledgement_in_a_group_stays_in_the_transcript_not_in_the_models_history(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    group = "telegram:-1001234"
    await halo.gateway.handle(says(halo, group, "Who is picking Aarav up from swimming?", MORNING))
    thanks = await halo.gateway.handle(says(halo, group, "ok thanks 👍", MORNING + timedelta(minutes=1)))
    assert thanks.kind == "silent"
    await halo.gateway.handle(says(halo, group, "And from chess on Thursday?", MORNING + timedelta(minutes=2)))
    await halo.gateway.drain()

    asked = fake_llm.scripted_requests[-1].json
    history = history_of(asked)
    assert any("Who is picking Aarav up from swimming?" in item for item in history)  # what it needs
    assert not any("ok thanks" in item for item in history)  # what it does not
    assert "And from chess on Thursday?" in json.dumps(asked["messages"][-1])
    lines = [(line.role, line.text) for line in halo.transcripts.tail(group, 10)]
    assert ("user", "ok thanks 👍") in lines  # the transcript keeps it: the audit is whole


async def test_the_days_notes_leave_out_what_the_history_carries_and_keep_what_fell_out_of_it(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    dm = "telegram:1002"
    daily_file = halo.paths.daily_file(dm, day_of(MORNING))
    earlier = f"- [{hhmm(MORNING - timedelta(hours=2))}] Mom: the plumber comes at noon"
    await write_memory(halo, daily_file, f"# Notes\n\n## Notes\n\n{earlier}\n")
    await halo.gateway.handle(says(halo, dm, "/new", MORNING - timedelta(minutes=30)))  # the earlier talk ends
    await halo.gateway.handle(says(halo, dm, "Soccer practice moved to Tuesday at 5", MORNING))
    await halo.gateway.drain()
    # the day's notes now hold this morning's turn too, as distillation writes them
    noted = f"- [{hhmm(MORNING)}] Mom: Soccer practice moved to Tuesday at 5"
    await write_memory(halo, daily_file, f"# Notes\n\n## Notes\n\n{earlier}\n{noted}\n")

    await halo.gateway.handle(says(halo, dm, "When is soccer practice?", MORNING + timedelta(minutes=40)))
    await halo.gateway.drain()
    asked = fake_llm.scripted_requests[-1].json
    instructions = asked["messages"][0]["content"]
    assert earlier in instructions  # before the session: only the notes hold it
    assert noted not in instructions  # in the history, whole: not said twice
    assert any("Soccer practice moved to Tuesday at 5" in item for item in history_of(asked))

    # a new session: the history no longer holds the morning, so the notes bring it back
    await halo.gateway.handle(says(halo, dm, "/new", MORNING + timedelta(minutes=50)))
    await halo.gateway.handle(says(halo, dm, "When is soccer practice again?", MORNING + timedelta(minutes=55)))
    await halo.gateway.drain()
    again = fake_llm.scripted_requests[-1].json
    assert earlier in again["messages"][0]["content"] and noted in again["messages"][0]["content"]
    assert history_of(again) == []


async def test_small_talk_gets_a_short_history_and_no_tools_and_l2_gets_everything(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    dm = "telegram:1002"
    first = "Aarav has a dentist appointment on Friday at 4"
    await halo.gateway.handle(says(halo, dm, first, MORNING))
    for minute in range(1, 7):  # six more turns: twelve more history items
        await halo.gateway.handle(
            says(halo, dm, f"Note number {minute} about the week", MORNING + timedelta(minutes=minute))
        )
    await halo.gateway.handle(says(halo, dm, "tell me a joke", MORNING + timedelta(minutes=8)))
    await halo.gateway.handle(says(halo, dm, "what does Aarav have on Friday?", MORNING + timedelta(minutes=9)))
    await halo.gateway.drain()

    *_, small, l2 = fake_llm.scripted_requests
    assert (small.json["model"], l2.json["model"]) == ("cheap-model", "main-model")
    assert "tools" not in small.json and l2.json["tools"]  # L1: no schemas; L2: what the policy offers
    assert len(history_of(small.json)) == 8  # routing.l1_history_items
    assert not any(first in item for item in history_of(small.json))
    assert "tell me a joke" in json.dumps(small.json["messages"][-1])
    # L2 sees the whole conversation, the small talk too
    assert any(first in item for item in history_of(l2.json))
    assert any("tell me a joke" in item for item in history_of(l2.json))
    assert len(history_of(l2.json)) == 16
