"""`/list …`: the scope's lists, answered in code."""

from __future__ import annotations

from halo.commands.builtin import Command
from halo.core.turn import Turn
from halo.lists.service import Lists


def list_commands(lists: Lists) -> list[Command]:
    async def list_command(turn: Turn, args: str) -> str:
        return await lists.command(turn, args)

    return [
        Command(
            "list", "This chat's lists: show, add, done, clear", list_command, usage="[name] [add a, b|done N|clear]"
        )
    ]
