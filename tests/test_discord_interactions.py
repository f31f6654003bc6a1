"""Discord as people use it (issue 35): slash commands with typed options and autocomplete
for projects and open tasks, registered in the configured guild; buttons on a task's status
message (start · block · done); a join request's buttons in a parent's DM. Through the real
discord.py against the Discord stand-in (REST, gateway, interactions)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import FAMILY_YAML, write_home
from tests.fakes.discord_server import GUILD_ID, FakeDiscord
from tests.test_discord import adapter_of, discord_yaml
from tests.waiting import eventually

WORK, OTHER = 3001, 3002
PRIYA, MOM, WAGS = 2001, 2002, 2003
FAMILY = FAMILY_YAML.replace("telegram_user_id: 1002,", "telegram_user_id: 1002, discord_user_id: 2002,").replace(
    "telegram_user_id: 1001,", "telegram_user_id: 1001, discord_user_id: 2003,"
)


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(channels=(WORK, OTHER)) as fake:
        yield fake


@pytest.fixture
async def start(home: Path, dc: FakeDiscord) -> AsyncIterator[Callable[[], Awaitable[Halo]]]:
    running: list[Halo] = []

    async def start_halo() -> Halo:
        write_home(home, discord_yaml(dc), family=FAMILY)  # no model: every answer here is halo's own
        halo = build_halo(load_settings(home))
        running.append(halo)
        await halo.start_background()
        await halo.start_adapters()
        adapter = adapter_of(halo)
        await eventually(lambda: adapter.commands_registered() == {GUILD_ID}, what="slash commands registered")
        return halo

    yield start_halo
    for halo in running:
        await halo.close()


def sub(name: str, **options: object) -> dict[str, object]:
    """A subcommand with its options, as Discord sends them."""
    return {"type": 1, "name": name, "options": [option(k, v) for k, v in options.items()]}


def option(name: str, value: object, focused: bool = False) -> dict[str, object]:
    kind = 4 if isinstance(value, int) else 3
    found: dict[str, object] = {"type": kind, "name": name, "value": value}
    if focused:
        found["focused"] = True
    return found


async def test_the_slash_commands_are_registered_with_typed_options(start, dc: FakeDiscord) -> None:
    await start()
    commands = {c["name"]: c for c in dc.guild_commands[GUILD_ID]}
    assert {"task", "tasks", "remind", "status"} <= set(commands)
    verbs = {o["name"]: o for o in commands["task"]["options"]}
    assert set(verbs) == {"add", "start", "note", "block", "done"}
    add = {o["name"]: o for o in verbs["add"]["options"]}
    assert add["project"]["autocomplete"] is True and add["project"]["type"] == 3 and add["title"]["required"]
    start_task = {o["name"]: o for o in verbs["start"]["options"]}
    assert start_task["task"]["type"] == 4 and start_task["task"]["autocomplete"] is True


async def test_task_add_by_slash_command_answers_in_the_channel_with_status_buttons(start, dc: FakeDiscord) -> None:
    halo = await start()
    priya = dc.person(PRIYA, "Priya")

    asked = await dc.slash(WORK, priya, "task", [sub("add", project="ContextForge", title="Write the migration guide")])

    answer = await dc.wait_answer(asked)
    assert answer["content"] == "Added task #1: Write the migration guide (ContextForge)."
    assert not answer["flags"] & 64  # the team sees it
    assert dc.callbacks[asked][0]["type"] == 5  # deferred at once: halo may take a while
    assert dc.buttons(answer) == ["Start", "Block", "Done"]
    [task] = await halo.tasks.list()
    assert (task.project, task.title, task.status) == ("ContextForge", "Write the migration guide", "todo")

    # the typed command still works, beside the slash command
    await dc.say(WORK, priya, "/task add ContextForge: Review the docs")
    assert (await dc.wait_sent(WORK))[-1] == "Added task #2: Review the docs (ContextForge)."

    # the status buttons do what /task start and /task done do
    pressed = await dc.click(priya, answer, "Start")
    assert (await dc.wait_answer(pressed))["content"] == "Start ✓"
    assert "Started #1: Write the migration guide." in await dc.wait_sent(WORK, 2)
    await eventually(lambda: dc.buttons(answer) == [], what="the pressed message's buttons removed")
    started = next(m for m in dc.sent(WORK) if m["content"] == "Started #1: Write the migration guide.")
    assert [b["label"] for row in started["components"] for b in row["components"]] == ["Block", "Done"]
    done = await dc.click(priya, started, "Done")
    await dc.wait_answer(done)
    assert "Done: #1 Write the migration guide." in await dc.wait_sent(WORK, 3)
    assert [(t.number, t.status) for t in await halo.tasks.list()] == [(1, "done"), (2, "todo")]

    again = await dc.click(priya, started, "Block")  # pressed before the buttons went: nothing changes
    assert (await dc.wait_answer(again))["content"] == "Already decided."
    assert [(t.number, t.status) for t in await halo.tasks.list()] == [(1, "done"), (2, "todo")]


async def test_autocomplete_offers_the_channels_projects_and_open_tasks(start, dc: FakeDiscord) -> None:
    await start()
    priya = dc.person(PRIYA, "Priya")
    for line in ("ContextForge: Write the guide", "ContextForge: Fix the build", "Atlas: Plan the launch"):
        await dc.say(WORK, priya, f"/task add {line}")
    await dc.wait_sent(WORK, 3)
    await dc.say(WORK, priya, "/task done 2")
    await dc.wait_sent(WORK, 4)

    projects = await dc.autocomplete(
        WORK, priya, "task", [{"type": 1, "name": "add", "options": [option("project", "con", focused=True)]}]
    )
    assert [c["value"] for c in projects] == ["ContextForge"]
    tasks = await dc.autocomplete(
        WORK, priya, "task", [{"type": 1, "name": "done", "options": [option("task", "", focused=True)]}]
    )
    assert [(c["name"], c["value"]) for c in tasks] == [
        ("#1 Write the guide (ContextForge)", 1),
        ("#3 Plan the launch (Atlas)", 3),
    ]
    elsewhere = await dc.autocomplete(OTHER, priya, "tasks", [option("project", "", focused=True)])
    assert elsewhere == []  # another channel's tasks are not offered


async def test_tasks_status_and_remind_answer_only_the_asker(start, dc: FakeDiscord) -> None:
    await start()
    priya = dc.person(PRIYA, "Priya")
    await dc.say(WORK, priya, "/task add ContextForge: Write the guide")
    await dc.wait_sent(WORK)

    listing = await dc.wait_answer(await dc.slash(WORK, priya, "tasks", []))
    assert listing["content"] == "#1 [todo] Write the guide (ContextForge, priya)" and listing["flags"] & 64
    status = await dc.wait_answer(await dc.slash(WORK, priya, "status", []))
    assert "Write the guide" in status["content"] and status["flags"] & 64
    reminded = await dc.wait_answer(
        await dc.slash(WORK, priya, "remind", [option("when", "in 20m"), option("text", "stand-up")])
    )
    assert reminded["content"].startswith("OK, I'll remind you ") and reminded["flags"] & 64
    assert len(dc.sent(WORK)) == 1  # nothing of these in the channel


async def test_a_join_request_is_decided_with_a_button_in_a_parents_discord_dm(
    start, dc: FakeDiscord, home: Path
) -> None:
    await start()
    stranger = dc.person(4444, "Kiran")
    mom = dc.person(MOM, "Mom")
    await dc.dm(stranger, "hi there")
    await dc.wait_sent(dc.dm_channel(4444))
    [notice] = [m for m in await _sent(dc, dc.dm_channel(MOM)) if m.get("components")]
    assert dc.buttons(notice) == ["Parent", "Child (young)", "Child (adolescent)", "Colleague", "Deny"]
    [to_wags] = [m for m in await _sent(dc, dc.dm_channel(WAGS)) if m.get("components")]

    refused = await dc.click(dc.person(PRIYA, "Priya"), notice, "Parent")  # a colleague's press
    assert (await dc.wait_answer(refused))["content"] == "Sorry, this decision is not yours to make."
    pressed = await dc.click(mom, notice, "Colleague")
    assert (await dc.wait_answer(pressed))["content"] == "Colleague ✓"
    texts = await dc.wait_sent(dc.dm_channel(MOM), 2)
    assert texts[-1].startswith("Approved: Kiran (colleague")
    assert "discord_user_id: 4444" in (home / "halo.yaml").read_text()
    await eventually(lambda: dc.buttons(notice) == [], what="the pressed copy's buttons removed")
    await eventually(lambda: dc.buttons(to_wags) == [], what="and the other parent's copy's")


async def _sent(dc: FakeDiscord, channel: int) -> list[dict[str, object]]:
    await dc.wait_sent(channel)
    return dc.sent(channel)
