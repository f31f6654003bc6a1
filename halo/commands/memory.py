"""/remember, /forget, /memory and /share: deterministic, no model call (see halo.commands.memory_actions)."""

from __future__ import annotations

from halo.commands import memory_actions
from halo.commands.builtin import commands
from halo.pipeline.turn import Turn


@commands.command("remember", "Keep a fact in this chat's memory", usage="<fact>")
async def remember_command(turn: Turn, args: str) -> str:
    return await memory_actions.remember(turn, args)


@commands.command("forget", "Remove matching facts from this chat's memory", usage="<words>")
async def forget_command(turn: Turn, args: str) -> str:
    return await memory_actions.forget(turn, args)


@commands.command("memory", "Show what I remember in this chat", usage="[page]")
async def memory_command(turn: Turn, args: str) -> str:
    return await memory_actions.show(turn, args)


@commands.command("share", "Share something from your private chat with the parents group", usage="<text>")
async def share_command(turn: Turn, args: str) -> str:
    return await memory_actions.share(turn, args)
