"""`/remind`, `/remind!` (urgent: quiet hours do not hold it) and `/reminders [cancel N]`,
answered in code; `/reminders done ID` is what a fired reminder's Done button runs."""

from __future__ import annotations

from halo.commands.builtin import Command
from halo.core.turn import Turn
from halo.reminders.service import Reminders


def reminder_commands(reminders: Reminders) -> list[Command]:
    async def remind(turn: Turn, args: str) -> str:
        return await reminders.set_from_command(turn, args)

    async def remind_urgent(turn: Turn, args: str) -> str:
        return await reminders.set_from_command(turn, args, urgent=True)

    async def reminders_command(turn: Turn, args: str) -> str:
        verb, _, rest = args.strip().partition(" ")
        if not verb:
            return await reminders.listing(turn)
        if verb.lower() == "cancel" and rest.strip().lstrip("#").isdigit():
            return await reminders.cancel(turn, int(rest.strip().lstrip("#")))
        if verb.lower() == "done" and rest.strip().isdigit():
            return await reminders.done(turn, int(rest.strip()))
        return "Usage: /reminders · /reminders cancel N"

    return [
        Command("remind", "Remind you or someone at a time", remind, usage="[me|parents|name] <when> <text>"),
        Command("remind!", "The same, urgent: quiet hours do not hold it", remind_urgent, usage="…", in_menu=False),
        Command("reminders", "Your reminders, numbered; cancel one", reminders_command, usage="[cancel N]"),
    ]
