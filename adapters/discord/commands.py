"""halo's commands as Discord application commands: "/" shows them with typed options, and
the project and task options autocomplete from the channel's own task list.

Each slash command becomes the text command it stands for (`/task add ContextForge: …`) and
goes through `Inbound.receive` like a typed one: the same path, the same policy checks; the
typed text commands keep working. The interaction is answered from halo's outbox (the
adapter's `send` finds the interaction waiting for that reply), ephemerally when the answer
is only for the asker (/tasks, /status, /remind) and in the channel otherwise (/task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import discord
from discord import app_commands

Run = Callable[[discord.Interaction, str, bool], Awaitable[None]]  # (interaction, text command, ephemeral)
Suggest = Callable[[discord.Interaction, Literal["project", "task"], str], Awaitable[Sequence[tuple[str, str]]]]

EPHEMERAL = True  # the answer is for the asker alone
IN_CHANNEL = False  # the answer is the team's (a task's status message)


def command_tree(client: discord.Client, run: Run, suggest: Suggest) -> app_commands.CommandTree[discord.Client]:
    """The tree of halo's slash commands; `run` hands a command's text to halo, `suggest`
    finds autocomplete choices."""
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)

    async def projects(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [
            app_commands.Choice(name=shown, value=value)
            for shown, value in await suggest(interaction, "project", current)
        ]

    async def open_tasks(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[int]]:
        found = await suggest(interaction, "task", current)
        return [app_commands.Choice(name=shown, value=int(value)) for shown, value in found if value.isdigit()]

    task = app_commands.Group(name="task", description="Add or update a task in this work channel")

    @task.command(name="add", description="Add a task to a project")
    @app_commands.describe(project="the project it belongs to", title="what is to be done")
    @app_commands.autocomplete(project=projects)
    async def task_add(interaction: discord.Interaction, project: str, title: str) -> None:
        await run(interaction, f"/task add {project}: {title}", IN_CHANNEL)

    @task.command(name="start", description="Start working on a task")
    @app_commands.describe(task="an open task")
    @app_commands.autocomplete(task=open_tasks)
    async def task_start(interaction: discord.Interaction, task: int) -> None:
        await run(interaction, f"/task start {task}", IN_CHANNEL)

    @task.command(name="note", description="Add a note to a task")
    @app_commands.describe(task="an open task", text="the note")
    @app_commands.autocomplete(task=open_tasks)
    async def task_note(interaction: discord.Interaction, task: int, text: str) -> None:
        await run(interaction, f"/task note {task} {text}", IN_CHANNEL)

    @task.command(name="block", description="Mark a task blocked, and say why")
    @app_commands.describe(task="an open task", why="what it waits for")
    @app_commands.autocomplete(task=open_tasks)
    async def task_block(interaction: discord.Interaction, task: int, why: str) -> None:
        await run(interaction, f"/task block {task} {why}", IN_CHANNEL)

    @task.command(name="done", description="Mark a task done")
    @app_commands.describe(task="an open task", note="how it ended (optional)")
    @app_commands.autocomplete(task=open_tasks)
    async def task_done(interaction: discord.Interaction, task: int, note: str | None = None) -> None:
        await run(interaction, f"/task done {task} {note or ''}".strip(), IN_CHANNEL)

    tree.add_command(task)

    @tree.command(name="tasks", description="The open tasks, of one project or all")
    @app_commands.describe(project="only this project")
    @app_commands.autocomplete(project=projects)
    async def tasks(interaction: discord.Interaction, project: str | None = None) -> None:
        await run(interaction, f"/tasks {project or ''}".strip(), EPHEMERAL)

    @tree.command(name="remind", description="Remind you or someone at a time")
    @app_commands.describe(
        when="in 20m · at 18:30 · tomorrow 7:30 · every weekday 7:30",
        text="what to say",
        who="me (the default), parents, or a name",
    )
    async def remind(interaction: discord.Interaction, when: str, text: str, who: str = "me") -> None:
        await run(interaction, f"/remind {who} {when} {text}", EPHEMERAL)

    @tree.command(name="status", description="How the work is going")
    async def status(interaction: discord.Interaction) -> None:
        await run(interaction, "status", EPHEMERAL)

    return tree
