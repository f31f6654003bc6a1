"""Prompt caching: the start of every request in a scope stays byte-identical from turn to turn
(persona, memory, tool schemas), and what changes (the time, recall) comes after it, so a
provider's prefix cache reuses it. The stand-in simulates that cache and halo records it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.usage.store import UsageStore
from tests.fakes.llm_server import FakeOpenAI


def mom_says(halo: Any, text: str, ts: datetime) -> Envelope:
    family = halo.family
    mom = family.member("mom")
    return Envelope("telegram", resolve_scope(family, "telegram:1002"), Speaker("1002", member=mom), text, ts=ts)


async def test_two_turns_share_the_request_up_to_what_changes(halo: Any, fake_llm: FakeOpenAI) -> None:
    fake_llm.prefix_cache = True
    first = datetime(2025, 3, 3, 8, 15, tzinfo=UTC)
    await halo.gateway.handle(mom_says(halo, "When is soccer practice?", first))
    await halo.gateway.handle(mom_says(halo, "And swimming?", first + timedelta(minutes=47)))
    await halo.gateway.drain()

    one, two = (r.json for r in fake_llm.scripted_requests[-2:])
    system_one, system_two = one["messages"][0]["content"], two["messages"][0]["content"]
    assert system_one != system_two  # the time moved on ...
    stable_one, _, now_one = system_one.partition("## Now\n")
    stable_two, _, now_two = system_two.partition("## Now\n")
    assert stable_one == stable_two and "## Persona" in stable_one  # ... only after the stable part
    assert now_one.startswith("Monday 2025-03-03") and now_one != now_two
    assert json.dumps(one["tools"]) == json.dumps(two["tools"])  # the tool schemas, byte for byte

    # the stand-in's prefix cache saw the shared start; halo recorded it as cached input
    rows = await UsageStore(halo.db).totals("2000-01-01", "2999-12-31", "purpose")
    replies = [row for row in rows if row.key == "reply"]
    assert replies and sum(row.cached_tokens for row in replies) > 0
