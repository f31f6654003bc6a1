"""Shared lists: the family group's list is shared, a DM's is private, and neither `/list`
nor the model's list tools in the group ever see what a DM's list holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI, ToolCall
from tests.home_support import FAMILY_LONDON

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

GROUP = "telegram:-1005555"


@pytest.fixture
async def family_halo(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Halo]:
    write_home(home, llm_yaml(fake_llm), family=FAMILY_LONDON)
    halo = build_halo(load_settings(home))
    yield halo
    await halo.close()


async def say(halo: Halo, member_id: str, scope_id: str, text: str) -> str:
    family = halo.policy.family
    member = family.member(member_id)
    assert member is not None
    scope = resolve_scope(family, scope_id)
    envelope = Envelope("telegram", scope, Speaker(str(member.telegram_user_id), member=member), text)
    reply = await halo.gateway.handle(envelope)
    return str(reply.text)


async def test_the_family_groups_list_is_shared(family_halo: Halo, fake_llm: FakeOpenAI) -> None:
    assert await say(family_halo, "mom", GROUP, "/list add milk, eggs , bread") == "Added to list: milk, eggs, bread."
    shown = await say(family_halo, "aarav", GROUP, "/list")
    assert shown == "The list:\n1. milk\n2. eggs\n3. bread"
    assert await say(family_halo, "aarav", GROUP, "/list done 2") == "Done: eggs."
    assert await say(family_halo, "wags", GROUP, "/list done milk") == "Done: milk."
    assert "~milk~ (done)" in await say(family_halo, "mom", GROUP, "/list")
    assert await say(family_halo, "mom", GROUP, "/list clear") == "Removed 2 done items from the list."
    assert await say(family_halo, "mom", GROUP, "/list") == "The list:\n1. bread"
    await say(family_halo, "mom", GROUP, "/list groceries add apples")
    assert await say(family_halo, "aarav", GROUP, "/list groceries") == "The groceries list:\n1. apples"
    assert "Other lists here: groceries." in await say(family_halo, "aarav", GROUP, "/list list")
    # /list is the list in use: the one last added to (issue 32: it answered "The list is empty")
    assert await say(family_halo, "aarav", GROUP, "/list") == "The groceries list:\n1. apples"
    assert await say(family_halo, "aarav", GROUP, "/list done 9") == "There is no item 9 on the groceries list."
    assert await say(family_halo, "aarav", GROUP, "/list done 1") == "Done: apples."
    assert fake_llm.model_requests == []  # the command form never asks a model


async def test_a_dms_list_is_private(family_halo: Halo, fake_llm: FakeOpenAI) -> None:
    await say(family_halo, "aarav", "telegram:1003", "/list add surprise gift for mom")
    await say(family_halo, "mom", GROUP, "/list add milk")
    assert "surprise" not in await say(family_halo, "mom", GROUP, "/list")
    assert "surprise" not in await say(family_halo, "aarav", GROUP, "/list")
    assert await say(family_halo, "mom", "telegram:1002", "/list") == "The list is empty."
    assert "surprise gift" in await say(family_halo, "aarav", "telegram:1003", "/list")

    # the model in the group: its list tool reads the group's list, and no prompt carries the DM's
    fake_llm.tool_calls(ToolCall("show_list", {}))
    fake_llm.reply("The list has milk.")
    # (a plain "what's on our list?" is shown in code when routing is on: tests/test_plain_words.py)
    reply = await say(family_halo, "aarav", GROUP, "halo, what is on our list for the weekend?")
    assert reply == "The list has milk."
    prompts = fake_llm.all_prompt_text()
    assert "1. milk" in prompts  # the tool's answer reached the model
    assert "surprise" not in prompts


async def test_the_model_adds_and_checks_off(family_halo: Halo, fake_llm: FakeOpenAI) -> None:
    fake_llm.tool_calls(ToolCall("add_to_list", {"items": ["butter", "jam"], "name": "groceries"}))
    fake_llm.reply("Added.")
    await say(family_halo, "mom", "telegram:1002", "put butter and jam on the groceries list")
    fake_llm.tool_calls(ToolCall("check_off", {"item": "jam", "name": "groceries"}))
    fake_llm.reply("Ticked.")
    await say(family_halo, "mom", "telegram:1002", "got the jam")
    assert await say(family_halo, "mom", "telegram:1002", "/list groceries") == (
        "The groceries list:\n1. butter\n2. ~jam~ (done)"
    )


async def test_bad_input_loses_nothing(family_halo: Halo, tmp_path: Any) -> None:
    await say(family_halo, "mom", GROUP, "/list add milk")
    assert (await say(family_halo, "mom", GROUP, "/list add " + "x" * 300)).startswith("An item is at most")
    assert (await say(family_halo, "mom", GROUP, "/list done cheese")) == "'cheese' is not on the list."
    assert await say(family_halo, "mom", GROUP, "/list") == "The list:\n1. milk"
