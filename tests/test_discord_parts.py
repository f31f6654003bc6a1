"""The Discord adapter's and the task list's parts on their own: splitting, the digest
schedule and text, the task store's rules, and the stand-in Discord's fidelity to what
discord.py expects of the real one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time

import aiohttp
import discord
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.discord.adapter import point_at
from adapters.discord.split import open_fence, split_message
from config.schedule import parse_schedule
from config.settings import DiscordSettings
from halo.storage import HaloDB
from halo.work.digest import digest_text
from halo.work.tasks import TaskError, TaskStore
from tests.fakes.discord_server import API, BOT_ID, TOKEN, FakeDiscord
from tests.waiting import eventually

# --- splitting ---------------------------------------------------------------------------

prose = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="`\r"), min_size=1, max_size=30), max_size=400)
code_lines = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="`\r\n"), max_size=120), max_size=60)


@st.composite
def replies(draw: st.DrawFn) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            pieces.append(" ".join(draw(prose)))
        else:
            language = draw(st.sampled_from(["", "python", "sh"]))
            pieces.append(f"```{language}\n" + "\n".join(draw(code_lines)) + "\n```")
    return "\n\n".join(pieces)


@settings(max_examples=150, deadline=None)
@given(text=replies(), limit=st.sampled_from([200, 700, 2000]))
def test_split_parts_fit_keep_every_word_and_close_every_code_block(text: str, limit: int):
    parts = split_message(text, limit)

    assert all(0 < len(p) <= limit for p in parts)
    assert all(open_fence(p) is None for p in parts), "each part closes the code it opens"
    unfenced = [p.replace("```python", "").replace("```sh", "").replace("```", "") for p in parts]
    original = text.replace("```python", "").replace("```sh", "").replace("```", "")
    assert " ".join(unfenced).split() == original.split(), "no word lost, cut or added"


def test_a_short_reply_is_one_part_and_a_long_word_is_cut_only_when_it_must_be():
    assert split_message("hello there") == ["hello there"]
    assert split_message("a" * 25, 10) == ["a" * 6, "a" * 6, "a" * 6, "a" * 7]


# --- digest ------------------------------------------------------------------------------


def test_digest_schedules_are_read_the_way_a_family_writes_them():
    assert parse_schedule("mon-fri 17:00").days == "mon-fri"
    assert parse_schedule("daily 09:30").at == time(9, 30)
    assert parse_schedule("Mon,Wed 8:05").days == "mon,wed"
    for bad in ("someday", "mon-fri 25:00", "funday 10:00", "17:00"):
        with pytest.raises(ValueError):
            parse_schedule(bad)


async def test_the_digest_lists_the_days_changes_per_task(halo_db: HaloDB):
    clock = [datetime(2026, 11, 23, 9, 0, tzinfo=UTC).timestamp()]
    store = TaskStore(halo_db, clock=lambda: clock[0])
    await store.add("ContextForge", "Write the guide", scope_id="discord:3001", by="priya")
    await store.add("Halo", "Ship Discord", scope_id="discord:3001", by="wags")
    clock[0] += 3600
    await store.start(1, by="priya")
    await store.note(1, "two sections drafted", by="priya")
    await store.block(2, "waiting for the token", by="wags")
    await store.add("Elsewhere", "Not a work channel's", scope_id="discord:9999", by="wags")

    since = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
    text = digest_text(await store.changes_since(since, scope_ids=["discord:3001"]), since)

    assert text == (
        "Work digest for Mon 23 Nov:\n"
        "- #1 Write the guide (ContextForge) — added; started; note: two sections drafted [now doing]\n"
        "- #2 Ship Discord (Halo) — added; blocked: waiting for the token [now blocked]"
    )
    assert digest_text([], since) is None


# --- tasks -------------------------------------------------------------------------------


async def test_task_changes_that_make_no_sense_are_refused_with_the_reason(halo_db: HaloDB):
    store = TaskStore(halo_db)
    task = await store.add("  Context   Forge ", " Write\nthe guide ", scope_id="discord:3001", by="priya")
    assert (task.number, task.project, task.title, task.status) == (1, "Context Forge", "Write the guide", "todo")

    with pytest.raises(TaskError, match="no task 7"):
        await store.start(7, by="priya")
    with pytest.raises(TaskError, match="empty"):
        await store.add("Halo", "   ", scope_id="discord:3001", by="priya")
    with pytest.raises(TaskError, match="too long"):
        await store.note(1, "x" * 5000, by="priya")
    await store.done(1, by="priya")
    with pytest.raises(TaskError, match="done already"):
        await store.done(1, by="priya")
    assert [n.event for n in (await store.get(1)).notes] == ["created", "done"]


# --- the stand-in Discord ------------------------------------------------------------------


async def test_the_fake_answers_rest_with_exactly_application_json_and_checks_the_token():
    async with FakeDiscord() as fake, aiohttp.ClientSession() as http:
        async with http.get(fake.api_base_url + "/users/@me", headers={"Authorization": f"Bot {TOKEN}"}) as ok:
            assert ok.headers["Content-Type"] == "application/json"
            assert (await ok.json())["id"] == str(BOT_ID)
        async with http.get(fake.api_base_url + "/users/@me", headers={"Authorization": "Bot wrong"}) as refused:
            assert refused.status == 401 and refused.headers["Content-Type"] == "application/json"
        async with http.get(fake.api_base_url + "/gateway/bot") as gateway:
            assert (await gateway.json())["url"] == fake.gateway_url


async def test_real_discord_py_connects_receives_sends_types_and_resumes():
    async with FakeDiscord(channels=(3001,)) as fake:
        point_at(DiscordSettings(api_base_url=fake.api_base_url, gateway_url=fake.gateway_url))
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.message_content = intents.dm_messages = True
        client = discord.Client(intents=intents)
        received: list[discord.Message] = []

        @client.event
        async def on_message(message: discord.Message) -> None:
            received.append(message)
            if message.author.id != BOT_ID:
                async with message.channel.typing():
                    await message.reply(f"echo: {message.content}")

        await client.login(TOKEN)
        runner = __import__("asyncio").create_task(client.connect())
        try:
            await eventually(client.is_ready, what="READY and GUILD_CREATE")
            assert [c.id for c in client.guilds[0].text_channels] == [3001]
            assert fake.intents == intents.value

            person = fake.person(2001, "Priya")
            first = await fake.say(3001, person, "hello")
            await fake.wait_sent(3001, 1)
            await fake.reconnect()
            await fake.dm(person, "a secret")
            await eventually(lambda: len(received) == 2, what="the DM after the resume")

            assert fake.texts(3001) == ["echo: hello"]
            assert int(fake.sent(3001)[0]["message_reference"]["message_id"]) == first
            assert fake.typing(3001), "typing was shown"
            assert received[1].guild is None and received[1].content == "a secret"
            assert (fake.identifies, fake.resumes) == (1, 1)
            assert json.dumps(fake.calls[0].body) == "null" and fake.calls[0].path == f"{API}/users/@me"
        finally:
            await client.close()
            runner.cancel()
