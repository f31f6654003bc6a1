"""The agent's memory tools. Each asks the policy twice: `use_tool` (guarded_tool) and then the
memory action itself (`write_memory`, `share`), so a model can never write where the person
could not."""

from __future__ import annotations

from agents import FunctionTool, RunContextWrapper

from halo.commands.memory_actions import MemoryActions
from halo.core.turn import TurnRun
from halo.tools.guarded import guarded_tool


def memory_tools(actions: MemoryActions) -> list[FunctionTool]:
    @guarded_tool()
    async def remember(ctx: RunContextWrapper[TurnRun], fact: str) -> str:
        """Keep a lasting fact in this chat's memory, in the person's words (e.g. "my shoe size is 38").

        Use it when someone asks you to remember something or states a lasting preference.

        Args:
            fact: the fact, one sentence.
        """
        return await actions.remember(ctx.context.turn, fact)

    @guarded_tool()
    async def share(ctx: RunContextWrapper[TurnRun], text: str) -> str:
        """Share something from this private chat with the parents group, only when the person asks.

        Args:
            text: what to share, one or two sentences.
        """
        return await actions.share(ctx.context.turn, text)

    return [remember, share]
