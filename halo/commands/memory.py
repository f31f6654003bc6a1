"""/remember, /forget, /memory and /share: deterministic, no model call (see halo.commands.memory_actions)."""

from __future__ import annotations

from halo.commands.builtin import Command
from halo.commands.memory_actions import MemoryActions


def memory_commands(actions: MemoryActions) -> list[Command]:
    return [
        Command("remember", "Keep a fact in this chat's memory", actions.remember, usage="<fact>"),
        Command("forget", "Remove matching facts from this chat's memory", actions.forget, usage="<words>"),
        Command("memory", "Show what I remember in this chat", actions.show, usage="[page]"),
        Command(
            "share", "Share something from your private chat with the parents group", actions.share, usage="<text>"
        ),
    ]
