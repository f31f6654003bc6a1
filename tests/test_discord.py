"""Discord end to end: the real discord.py client talks to a stand-in Discord (REST and
gateway), the real gateway, policy and task list decide, the real Agents SDK asks a fake
model. Each scenario checks what was posted to Discord, what the model was sent, and what
is in halo.db."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from adapters.discord import DiscordAdapter
from config.loader import load_settings
from halo.app import Halo, build_halo
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.discord_server import TOKEN, FakeDiscord
from tests.fakes.llm_server import FakeOpenAI
from tests.waiting import eventually

WORK = 3001
OTHER = 3002
PRIYA = 2001


def discord_yaml(fake: FakeDiscord) -> str:
    return (
        "discord:\n"
        f"  token: {TOKEN!r}\n"
        f"  api_base_url: {fake.api_base_url!r}\n"
        f"  gateway_url: {fake.gateway_url!r}\n"
    )


def adapter_of(halo: Halo) -> DiscordAdapter:
    return next(a for a in halo.adapters if isinstance(a, DiscordAdapter))


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(channels=(WORK, OTHER)) as fake:
        yield fake


@pytest.fixture
async def start(home: Path, fake_llm: FakeOpenAI, dc: FakeDiscord) -> AsyncIterator[Callable[..., Awaitable[Halo]]]:
    """Start halo with the Discord adapter pointed at the fake; wait until it is READY."""
    running: list[Halo] = []

    async def start_halo(*, model: bool = True, extra_yaml: str = "", family: str = FAMILY_YAML) -> Halo:
        write_home(home, (llm_yaml(fake_llm) if model else "") + discord_yaml(dc) + extra_yaml, family=family)
        halo = build_halo(load_settings(home))
        running.append(halo)
        await halo.start_background()
        await halo.start_adapters()
        adapter = adapter_of(halo)
        await eventually(lambda: adapter.status()["connected"], what="discord READY")
        return halo

    async def stop_all() -> None:
        for halo in running:
            await halo.close()
        running.clear()

    start_halo.stop_all = stop_all  # type: ignore[attr-defined]
    yield start_halo
    await stop_all()


async def test_a_pm_asks_how_halo_is_doing_without_a_model(start, dc: FakeDiscord, fake_llm: FakeOpenAI):
    await start(model=False)
    priya = dc.person(PRIYA, "Priya")

    await dc.say(WORK, priya, "/task add ContextForge: Write the migration guide")
    [added] = await dc.wait_sent(WORK, 1)
    assert added == "Added task #1: Write the migration guide (ContextForge)."
    await dc.say(WORK, priya, "/task start 1")
    await dc.say(WORK, priya, "/task note 1 drafted the first two sections")
    await dc.wait_sent(WORK, 3)

    await dc.say(WORK, priya, "how are you doing?", mention_bot=True)
    answer = (await dc.wait_sent(WORK, 4))[-1]

    assert "busy" in answer.lower()
    assert "#1 Write the migration guide (ContextForge)" in answer
    assert "drafted the first two sections" in answer
    assert fake_llm.model_requests == []
