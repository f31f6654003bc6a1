"""Per-scope sessions: budgeted history, compaction, write-behind, and the PostgreSQL URL."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
from agents import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from halo.pipeline.compaction import compact_if_needed
from halo.pipeline.sessions import SUMMARY_PREFIX, SessionStore, estimate_tokens, fit_to_budget
from tests.fakes.llm_server import FakeOpenAI


def turn(i: int, words: int = 40) -> list[dict]:
    return [
        {"role": "user", "content": f"question {i} " + "word " * words},
        {"role": "assistant", "content": f"answer {i} " + "word " * words},
    ]


def test_fit_to_budget_keeps_newest_whole_turns():
    items = [item for i in range(10) for item in turn(i)]
    kept = fit_to_budget(items, 200)
    assert kept and kept[-1] == items[-1]
    assert kept[0]["role"] == "user"  # starts on a turn boundary
    assert sum(estimate_tokens(i) for i in kept) <= 200


def test_fit_to_budget_never_orphans_a_tool_output():
    items = [
        {"role": "user", "content": "x " * 300},
        {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "y " * 30},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    kept = fit_to_budget(items, 60)
    assert kept == [{"role": "user", "content": "next"}]


async def test_history_is_budgeted_but_stored_in_full(tmp_path: Path):
    store = SessionStore(None, tmp_path / "s.db", history_budget=300)
    session = store.get("web:mom")
    for i in range(10):
        await session.add_items(turn(i))
    await store.flush()
    handed = await session.get_items()
    assert sum(estimate_tokens(i) for i in handed) <= 300
    assert session.over_budget
    assert len(await store.all_items("web:mom")) == 20
    await store.close()


async def test_write_behind_survives_a_restart(tmp_path: Path):
    store = SessionStore(None, tmp_path / "s.db", 4000)
    await store.get("web:mom").add_items(turn(1))
    await store.close()  # flushes
    again = SessionStore(None, tmp_path / "s.db", 4000)
    assert len(await again.all_items("web:mom")) == 2
    assert await again.item_counts() == {"web:mom": 2}
    await again.close()


async def test_compaction_summarises_older_items_with_the_model(tmp_path: Path, fake_llm: FakeOpenAI):
    store = SessionStore(None, tmp_path / "s.db", history_budget=300)
    session = store.get("web:mom")
    for i in range(10):
        await session.add_items(turn(i))
    await session.get_items()  # the runner's load notices the overflow
    fake_llm.reply("Mom asked ten questions about words.")
    client = AsyncOpenAI(base_url=fake_llm.base_url, api_key="k", max_retries=0)
    model = OpenAIChatCompletionsModel(model="m", openai_client=client)

    assert await compact_if_needed(store, "web:mom", model, tracing=False)

    items = await store.all_items("web:mom")
    assert items[0]["role"] == "system" and items[0]["content"].startswith(SUMMARY_PREFIX)
    assert "ten questions" in items[0]["content"]
    assert items[-1] == turn(9)[1]
    assert "question 0" in fake_llm.last_prompt_text()  # the older part was what got summarised
    await store.close()
    await client.close()


async def test_compaction_without_a_model_drops_oldest(tmp_path: Path):
    store = SessionStore(None, tmp_path / "s.db", history_budget=300)
    session = store.get("web:mom")
    for i in range(10):
        await session.add_items(turn(i))
    await session.get_items()
    assert await compact_if_needed(store, "web:mom", None, tracing=False)
    items = await store.all_items("web:mom")
    assert all(i["role"] != "system" for i in items)
    assert items[-1] == turn(9)[1] and "question 0" not in str(items)
    await store.close()


def _postgres_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.postgres
@pytest.mark.skipif(not _postgres_up(), reason="PostgreSQL is not running on 127.0.0.1:5432")
async def test_sessions_on_postgresql_through_the_same_config(tmp_path: Path):
    scope = f"web:pg-{uuid.uuid4().hex[:8]}"
    store = SessionStore("postgresql+asyncpg://postgres@127.0.0.1:5432/test", tmp_path / "unused.db", 4000)
    await store.get(scope).add_items(turn(1))
    await store.close()
    again = SessionStore("postgresql+asyncpg://postgres@127.0.0.1:5432/test", tmp_path / "unused.db", 4000)
    assert len(await again.all_items(scope)) == 2
    await again.clear(scope)
    assert await again.all_items(scope) == []
    await again.close()
