"""/remember, /forget, /memory and /share: deterministic, no model call (see halo.commands.memory_actions)."""

from __future__ import annotations

from halo.commands import memory_actions
from halo.commands.builtin import Command
from halo.pipeline.turn import Turn


async def remember_command(turn: Turn, args: str) -> str:
    return await memory_actions.remember(turn, args)


async def forget_command(turn: Turn, args: str) -> str:
    return await memory_actions.forget(turn, args)


async def memory_command(turn: Turn, args: str) -> str:
    return await memory_actions.show(turn, args)


async def share_command(turn: Turn, args: str) -> str:
    return await memory_actions.share(turn, args)


MEMORY_COMMANDS = (
    Command("remember", "Keep a fact in this chat's memory", remember_command, usage="<fact>"),
    Command("forget", "Remove matching facts from this chat's memory", forget_command, usage="<words>"),
    Command("memory", "Show what I remember in this chat", memory_command, usage="[page]"),
    Command("share", "Share something from your private chat with the parents group", share_command, usage="<text>"),
)
