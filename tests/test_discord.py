"""Discord end to end: the real discord.py client talks to a stand-in Discord (REST and
gateway), the real gateway, policy and task list decide, the real Agents SDK asks a fake
model. Each scenario checks what was posted to Discord, what the model was sent, and what
is in halo.db."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from adapters.discord import DiscordAdapter
from config.loader import load_settings
from halo.inventory import Halo
from halo.port import Outbound, SendFailed
from halo.runtime.app import build_halo
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.discord_server import TOKEN, FakeDiscord
from tests.fakes.llm_server import FakeOpenAI
from tests.waiting import eventually

WORK = 3001
OTHER = 3002
PRIYA = 2001


def discord_yaml(fake: FakeDiscord) -> str:
    return (
        f"discord:\n  token: {TOKEN!r}\n  api_base_url: {fake.api_base_url!r}\n  gateway_url: {fake.gateway_url!r}\n"
        "  guild_ready_seconds: 0.05\n"  # the stand-in sends its one server at once: no need to wait 2 s for more
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


MOM = 2002
STRANGER = 4444
FAMILY_WITH_MOM_ON_DISCORD = FAMILY_YAML.replace(
    "telegram_user_id: 1002,", "telegram_user_id: 1002, discord_user_id: 2002,"
)


async def test_status_with_a_model_is_worded_from_the_status_context_only(start, dc, fake_llm):
    halo = await start(family=FAMILY_WITH_MOM_ON_DISCORD)
    priya, mom = dc.person(PRIYA, "Priya"), dc.person(MOM, "Mom")
    fake_llm.reply("Noted, Mom.")
    await dc.dm(mom, "Aarav's dentist appointment is on Thursday at 4")
    await dc.wait_sent(dc.dm_channel(MOM), 1)
    commands = ("/task add ContextForge: Write the migration guide", "/task start 1", "/task add Halo: Ship Discord")
    for command in commands:
        await dc.say(WORK, priya, command)
    await dc.wait_sent(WORK, 3)
    fake_llm.reply("Busy: I'm writing the ContextForge migration guide (#1). Next up: Ship Discord.")
    asked = len(fake_llm.model_requests)

    await dc.say(WORK, priya, "what's the status of ContextForge?", mention_bot=True)
    answer = (await dc.wait_sent(WORK, 4))[-1]

    assert answer == "Busy: I'm writing the ContextForge migration guide (#1). Next up: Ship Discord."
    [request] = fake_llm.model_requests[asked:]
    sent = fake_llm.prompt_text(request)
    assert "Write the migration guide" in sent and "Busy: yes" in sent and "what's the status of ContextForge?" in sent
    assert "Ship Discord" not in sent, "the question named ContextForge: only its tasks are in the context"
    assert "dentist" not in sent and "Aarav" not in sent
    assert dc.typing(WORK), "typing is shown while the model words the answer"
    reply = dc.sent(WORK)[-1]
    assert int(reply["message_reference"]["message_id"]) == dc.last_message_id
    assert halo.adapter_status()["discord"]["connected"]


async def test_status_when_the_model_is_down_is_answered_by_rules(start, dc, fake_llm):
    await start()
    priya = dc.person(PRIYA, "Priya")
    await dc.say(WORK, priya, "/task add ContextForge: Release 1.2")
    await dc.say(WORK, priya, "/task block 1 waiting for the signing key")
    await dc.wait_sent(WORK, 2)
    fake_llm.error(500)
    fake_llm.error(500)

    await dc.say(WORK, priya, "what's blocked?", mention_bot=True)
    answer = (await dc.wait_sent(WORK, 3))[-1]

    assert answer.startswith("Blocked:")
    assert "#1 Release 1.2 (ContextForge)" in answer and "waiting for the signing key" in answer


async def test_tasks_survive_a_restart(start, dc, fake_llm):
    await start(model=False)
    priya = dc.person(PRIYA, "Priya")
    await dc.say(WORK, priya, "/task add ContextForge: Write the migration guide")
    await dc.say(WORK, priya, "/task add ContextForge: Cut release 1.2")
    await dc.say(WORK, priya, "/task done 1 published on the wiki")
    await dc.wait_sent(WORK, 3)
    await start.stop_all()

    await start(model=False)
    await dc.say(WORK, priya, "/tasks contextforge")
    listed = (await dc.wait_sent(WORK, 4))[-1]
    await dc.say(WORK, priya, "what are you working on?", mention_bot=True)
    status = (await dc.wait_sent(WORK, 5))[-1]

    assert listed == "#2 [todo] Cut release 1.2 (ContextForge, priya)"
    assert "not working on anything" in status and "Cut release 1.2" in status
    assert "Done recently:\n- #1 Write the migration guide (ContextForge)" in status


async def test_a_slow_turn_in_a_family_dm_does_not_delay_the_pms_status(start, dc, fake_llm):
    await start(family=FAMILY_WITH_MOM_ON_DISCORD)
    priya, mom = dc.person(PRIYA, "Priya"), dc.person(MOM, "Mom")
    await dc.say(WORK, priya, "/task add Halo: Ship Discord")
    await dc.say(WORK, priya, "/task start 1")
    await dc.wait_sent(WORK, 2)
    slow = asyncio.Event()
    fake_llm.held(slow, "Here is the long plan for the holidays.")
    await dc.dm(mom, "plan our holidays in detail please")
    await eventually(lambda: fake_llm.model_requests, what="the DM's model turn to be under way")
    fake_llm.reply("Busy: shipping Discord (#1).")

    await dc.say(WORK, priya, "are you busy?", mention_bot=True)
    answer = (await dc.wait_sent(WORK, 3))[-1]

    assert answer == "Busy: shipping Discord (#1)."
    assert not slow.is_set() and dc.texts(dc.dm_channel(MOM)) == [], "the DM turn is still running"
    slow.set()
    assert await dc.wait_sent(dc.dm_channel(MOM), 1) == ["Here is the long plan for the holidays."]


async def test_a_long_reply_is_split_without_breaking_words_or_code(start, dc, fake_llm):
    await start()
    priya = dc.person(PRIYA, "Priya")
    code = "```python\n" + "\n".join(f"print('line {i} of the example')" for i in range(90)) + "\n```"
    prose = " ".join(f"word{i}" for i in range(300))
    fake_llm.reply(f"{prose}\n\n{code}\n\nThat is all.")

    await dc.say(WORK, priya, "show me the example script", mention_bot=True)
    await eventually(lambda: "That is all." in (dc.texts(WORK) or [""])[-1], what="the last part")
    parts = dc.texts(WORK)

    assert len(parts) >= 3 and all(len(p) <= 2000 for p in parts)
    assert all(p.count("```") % 2 == 0 for p in parts), "every part closes the code it opens"
    words = " ".join(parts).replace("```python", " ").replace("```", " ").split()
    assert words == f"{prose}\n\n{code}\n\nThat is all.".replace("```python", " ").replace("```", " ").split()
    sent = dc.sent(WORK)
    assert "message_reference" in sent[0] and all("message_reference" not in m for m in sent[1:])


async def test_a_stranger_in_dm_gets_a_pairing_code_and_nothing_reaches_the_model(start, dc, fake_llm):
    await start()
    stranger = dc.person(STRANGER, "Kiran")

    await dc.dm(stranger, "hello, who are you?")
    [reply] = await dc.wait_sent(dc.dm_channel(STRANGER), 1)
    await dc.dm(stranger, "hello??")
    await dc.say(WORK, dc.person(PRIYA, "Priya"), "/tasks")
    await dc.wait_sent(WORK, 1)

    assert "Your code is" in reply
    assert dc.texts(dc.dm_channel(STRANGER)) == [reply], "one reply per request, then silence"
    assert fake_llm.model_requests == []


async def test_an_unconfigured_channel_gets_one_notice_and_then_silence(start, dc, fake_llm):
    halo = await start()
    priya = dc.person(PRIYA, "Priya")

    await dc.say(OTHER, priya, "just chatting here")
    await dc.say(OTHER, priya, "how are you doing?", mention_bot=True)
    [notice] = await dc.wait_sent(OTHER, 1)
    await dc.say(OTHER, priya, "hello?", mention_bot=True)
    await dc.say(WORK, priya, "/tasks")
    await dc.wait_sent(WORK, 1)

    assert str(OTHER) in notice and "work.discord_channel_ids" in notice
    assert dc.texts(OTHER) == [notice]
    assert fake_llm.model_requests == []
    [row] = await halo.delivery.store.rows(scope_id=f"discord:{OTHER}")  # the one way to send
    assert (row.message.kind, row.state, row.message.text) == ("notice", "sent", notice)
    assert str(dc.sent(OTHER)[0]["message_reference"]["message_id"]) == row.message.reply_to


async def test_bots_are_ignored_and_a_replayed_message_is_answered_once(start, dc, fake_llm):
    halo = await start(model=False)
    priya = dc.person(PRIYA, "Priya")
    robot = dc.person(5555, "Robot", bot=True)
    await dc.say(WORK, robot, "/task add Spam: by a bot")
    first = await dc.say(WORK, priya, "/task add Halo: Ship Discord")
    await dc.wait_sent(WORK, 1)

    await dc.redeliver(first)
    await dc.reconnect(replay_from_start=True)
    await dc.say(WORK, priya, "/tasks")
    listed = (await dc.wait_sent(WORK, 2))[-1]

    assert dc.texts(WORK) == ["Added task #1: Ship Discord (Halo).", "#1 [todo] Ship Discord (Halo, priya)"]
    assert listed == "#1 [todo] Ship Discord (Halo, priya)"
    assert dc.resumes == 1 and dc.identifies == 1
    assert [t.title for t in await halo.tasks.list()] == ["Ship Discord"]


async def test_a_refused_send_raises_send_failed_and_a_flaky_one_is_retried(start, dc, fake_llm):
    halo = await start(model=False)
    adapter = adapter_of(halo)
    dc.fail_sends(403)
    with pytest.raises(SendFailed) as refused:
        await adapter.send(Outbound("o1", f"discord:{WORK}", "hello"))
    assert refused.value.permanent
    dc.fail_sends(400, message="Bad Request", code=50035)
    with pytest.raises(SendFailed) as flaky:
        await adapter.send(Outbound("o2", f"discord:{WORK}", "hello"))
    assert not flaky.value.permanent
    await adapter.send(Outbound("o2", f"discord:{WORK}", "hello"))
    assert dc.texts(WORK) == ["hello"]


def offered_tools(request) -> set[str]:
    return {t["function"]["name"] for t in request.json.get("tools", [])}


async def test_a_parent_marks_a_task_done_through_the_agent_only_in_a_work_channel(start, dc, fake_llm):
    halo = await start(family=FAMILY_WITH_MOM_ON_DISCORD)
    mom = dc.person(MOM, "Mom")
    await dc.say(WORK, mom, "/task add ContextForge: Write the migration guide")
    await dc.wait_sent(WORK, 1)
    fake_llm.tool_call("update_task", {"number": 1, "action": "done", "text": "published"})
    fake_llm.reply("Marked #1 done.")

    await dc.say(WORK, mom, "mark the migration guide done", mention_bot=True)
    await dc.wait_sent(WORK, 2)
    work_request = fake_llm.chat_requests[-2]
    fake_llm.reply("Sure.")
    await dc.dm(mom, "what tools do you have?")
    await dc.wait_sent(dc.dm_channel(MOM), 1)
    dm_request = fake_llm.chat_requests[-1]

    assert {"list_tasks", "update_task"} <= offered_tools(work_request)
    assert not {"list_tasks", "update_task"} & offered_tools(dm_request)
    task = await halo.tasks.get(1)
    assert task.status == "done" and task.last_note is not None and task.last_note.text == "published"
    assert task.last_note.by == "mom"


async def test_the_digest_posts_the_days_changes_to_the_work_channel_without_the_model(start, dc, fake_llm):
    family = FAMILY_YAML.replace("family: {name: Sharma}", "family: {name: Sharma, timezone: Europe/London}")
    family = family.replace(
        "work: {discord_channel_ids: [3001]}", 'work: {discord_channel_ids: [3001], digest: "mon-fri 17:00"}'
    )
    halo = await start(family=family)
    priya = dc.person(PRIYA, "Priya")
    await dc.say(WORK, priya, "/task add Halo: Ship Discord")
    await dc.say(WORK, priya, "/task block 1 waiting for the bot token")
    await dc.wait_sent(WORK, 2)
    assert halo.digest is not None
    asked = len(fake_llm.model_requests)

    assert await halo.digest.post() == [f"discord:{WORK}"]
    posted = (await dc.wait_sent(WORK, 3))[-1]

    assert posted.startswith("Work digest for ")
    assert "#1 Ship Discord (Halo) — added; blocked: waiting for the bot token [now blocked]" in posted
    assert len(fake_llm.model_requests) == asked
    job = halo.digest._scheduler.get_job("work-digest")  # scheduled for the next weekday at 17:00 family time
    fire = job.next_run_time.astimezone(ZoneInfo("Europe/London"))
    assert (fire.hour, fire.minute) == (17, 0) and fire.weekday() < 5


@pytest.mark.slow  # starts a process
async def test_halo_serve_with_a_discord_token_answers_in_the_work_channel(home: Path, dc: FakeDiscord):
    import os
    import signal

    from tests.conftest import free_port
    from tests.test_serve_cli import halo_cmd

    write_home(home)
    os.environ.update(
        HALO_DISCORD__TOKEN=TOKEN, HALO_DISCORD__API_BASE_URL=dc.api_base_url, HALO_DISCORD__GATEWAY_URL=dc.gateway_url
    )
    try:
        proc = halo_cmd("serve", home=home, port=free_port())
    finally:
        for key in ("HALO_DISCORD__TOKEN", "HALO_DISCORD__API_BASE_URL", "HALO_DISCORD__GATEWAY_URL"):
            os.environ.pop(key)
    try:
        await eventually(lambda: dc.identifies == 1 or proc.poll() is not None, within=60, what="halo serve to connect")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        priya = dc.person(PRIYA, "Priya")
        await dc.say(WORK, priya, "/task add Halo: Ship Discord")
        await dc.say(WORK, priya, "/task start 1")
        await dc.say(WORK, priya, "how are you doing?", mention_bot=True)
        replies = await dc.wait_sent(WORK, 3)
        assert replies[0] == "Added task #1: Ship Discord (Halo)."
        assert "busy" in replies[2] and "#1 Ship Discord (Halo)" in replies[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        await eventually(lambda: proc.poll() is not None, within=30, what="halo serve to stop")
    assert proc.returncode == 0


async def test_in_a_work_channel_halo_answers_a_reply_to_itself_and_keeps_quiet_otherwise(start, dc, fake_llm):
    halo = await start(model=False)
    priya = dc.person(PRIYA, "Priya")
    await dc.say(WORK, priya, "/task add Halo: Ship Discord")
    await dc.wait_sent(WORK, 1)
    halos_message = dc.sent(WORK)[0]["id"]

    await dc.say(WORK, priya, "how are you doing? (said to a colleague, not to halo)")
    await dc.say(WORK, priya, "and what's blocked?", reply_to=halos_message)
    answer = (await dc.wait_sent(WORK, 2))[-1]
    await dc.say(WORK, priya, "/tasks")
    await dc.wait_sent(WORK, 3)

    assert answer == "Nothing is blocked."
    assert len(dc.texts(WORK)) == 3, "the unaddressed question got no answer"
    lines = [(line.role, line.text) for _, line in halo.transcripts.read_from(f"discord:{WORK}")]
    assert ("user", "how are you doing? (said to a colleague, not to halo)") in lines, "kept as the channel's context"
