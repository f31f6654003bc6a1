"""The model's reminder tools: the same parser, policy and answers as `/remind` and `/reminders`.

Tool class "internal": the policy lets anyone use them where they may converse; whom a
reminder may be for is the `remind` decision, asked inside `Reminders.set`.
"""

from __future__ import annotations

from agents import FunctionTool, RunContextWrapper

from halo.core.turn import TurnRun
from halo.reminders.service import Reminders
from halo.tools.guarded import guarded_tool


def reminder_tools(reminders: Reminders) -> list[FunctionTool]:
    @guarded_tool("internal")
    async def set_reminder(
        ctx: RunContextWrapper[TurnRun], when: str, text: str, who: str = "me", urgent: bool = False
    ) -> str:
        """Set a reminder. `who`: "me" (the person you are talking to), "parents", or a
        family member's name. `when`, in the family's time zone, one of: in 20m, in 2h,
        at 18:30, tomorrow 7:30, at 7 tomorrow, mon 9:00, every weekday 7:30, every day 20:00,
        every sunday 18:00. `text`: what to remind them of, e.g. "pack your football kit".
        `urgent`: goes even in quiet hours. Returns the confirmation to pass on, or why not."""
        return await reminders.set_from_words(ctx.context.turn, who, when, text, urgent=urgent)

    @guarded_tool("internal")
    async def list_reminders(ctx: RunContextWrapper[TurnRun]) -> str:
        """The reminders this person set or is reminded by, numbered (the numbers
        cancel_reminder takes)."""
        return await reminders.listing(ctx.context.turn)

    @guarded_tool("internal")
    async def cancel_reminder(ctx: RunContextWrapper[TurnRun], number: int) -> str:
        """Cancel reminder `number` as list_reminders numbers them (only whoever set it may)."""
        return await reminders.cancel(ctx.context.turn, number)

    return [set_reminder, list_reminders, cancel_reminder]
