"""Prompt caching: every request in a scope starts with the same bytes, turn after turn —
instructions (persona, memory), tool schemas, then the history — and what changes (the time,
recall) comes in a note just before the member's message. A provider's prefix cache then
reuses the whole conversation so far; the stand-in simulates that cache and halo records it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from tests.fakes.llm_server import FakeOpenAI, count_tokens


def mom_says(halo: Any, text: str, ts: datetime) -> Envelope:
    family = halo.family
    mom = family.member("mom")
    return Envelope("telegram", resolve_scope(family, "telegram:1002"), Speaker("1002", member=mom), text, ts=ts)


async def test_two_turns_share_the_request_up_to_what_changes(halo: Any, fake_llm: FakeOpenAI) -> None:
    fake_llm.prefix_cache = True
    first = datetime(2025, 3, 3, 8, 15, tzinfo=UTC)
    await halo.gateway.handle(mom_says(halo, "When is soccer practice?", first))
    await halo.gateway.handle(mom_says(halo, "And swimming?", first + timedelta(minutes=47)))
    await halo.gateway.handle(mom_says(halo, "And chess club?", first + timedelta(minutes=63)))
    await halo.gateway.drain()

    one, two, three = (r.json for r in fake_llm.scripted_requests[-3:])
    assert one["messages"][0] == two["messages"][0] and "## Persona" in one["messages"][0]["content"]
    assert "## Now" not in one["messages"][0]["content"]  # the time is not in the instructions ...
    *_, note_one, asked_one = one["messages"]
    *_, note_two, asked_two = two["messages"]
    assert (note_one["role"], note_two["role"]) == ("user", "user")
    assert "## Now\nMonday 2025-03-03 08:15" in note_one["content"]  # ... but in a note before the message
    assert "## Now\nMonday 2025-03-03 09:02" in note_two["content"]
    assert asked_one["content"].endswith("When is soccer practice?") and asked_two["content"].endswith("And swimming?")
    # the second request repeats the first one's start up to the note: the note is never history
    assert two["messages"][: len(one["messages"]) - 2] == one["messages"][:-2]
    assert two["messages"][len(one["messages"]) - 2] == asked_one
    assert json.dumps(one["tools"]) == json.dumps(two["tools"])  # the tool schemas, byte for byte

    # each request repeats the one before it up to that one's note (the whole conversation so
    # far): the stand-in's prefix cache reused it, and halo recorded it as cached input
    rows = await halo.usage.store.totals("2000-01-01", "2999-12-31", "purpose")
    [reply] = [row for row in rows if row.key == "reply"]
    before_note = [
        count_tokens(fake_llm.prompt_text(request).split(note["content"])[0])
        for request, note in zip(fake_llm.scripted_requests[-3:-1], (note_one, note_two), strict=True)
    ]
    assert three["messages"][: len(two["messages"]) - 2] == two["messages"][:-2]
    assert before_note[1] > before_note[0] + count_tokens("When is soccer practice?")  # the history is cached too
    assert reply.cached_tokens == sum(before_note)
