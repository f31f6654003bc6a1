"""The model's list tools: `show_list`, `add_to_list`, `check_off`, on the conversation's own
scope only, under the same policy as `/list` (asked in `Lists`)."""

from __future__ import annotations

from agents import FunctionTool, RunContextWrapper

from halo.core.turn import TurnRun
from halo.lists.service import Lists
from halo.tools.guarded import guarded_tool


def list_tools(lists: Lists) -> list[FunctionTool]:
    @guarded_tool("internal")
    async def show_list(ctx: RunContextWrapper[TurnRun], name: str | None = None) -> str:
        """This chat's list, numbered (done items marked). `name`: a named list, e.g.
        "groceries"; none: the chat's default list."""
        return await lists.show(ctx.context.turn, name)

    @guarded_tool("internal")
    async def add_to_list(ctx: RunContextWrapper[TurnRun], items: list[str], name: str | None = None) -> str:
        """Add items (each a short phrase, e.g. ["milk", "eggs"]) to this chat's list, or the
        list called `name`."""
        return await lists.add(ctx.context.turn, name, items)

    @guarded_tool("internal")
    async def check_off(ctx: RunContextWrapper[TurnRun], item: str, name: str | None = None) -> str:
        """Mark an item done: its number from show_list, or its words."""
        return await lists.check_off(ctx.context.turn, name, item)

    return [show_list, add_to_list, check_off]
