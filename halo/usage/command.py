"""`/usage`: what halo's models cost today and yesterday, per person, for parents."""

from __future__ import annotations

from datetime import date, timedelta

from halo.commands.builtin import PARENTS_CHATS, Command, refuse_unless_admin
from halo.core.turn import Turn
from halo.usage.meter import UsageMeter
from halo.usage.prices import Prices
from halo.usage.report import usage_report


def usage_command(meter: UsageMeter, prices: Prices) -> Command:
    async def usage(turn: Turn, args: str) -> str:
        if refusal := refuse_unless_admin(turn, "see what halo costs"):
            return refusal  # the policy's `admin` action decides, as for every parent-only command
        today = date.fromisoformat(meter.today())
        yesterday = (today - timedelta(days=1)).isoformat()
        report = await usage_report(meter.store, prices, yesterday, today.isoformat(), "member")
        lines = []
        for day, label in ((yesterday, "Yesterday"), (today.isoformat(), "Today")):
            rows = [row for row in report["rows"] if row["day"] == day]
            total = sum(row["usd"] for row in rows)
            people = ", ".join(f"{row['key'] or 'halo itself'} ${row['usd']:.4f}" for row in rows) or "nothing"
            lines.append(f"{label}: ${total:.4f} ({people})")
        if report["unknownPrice"]:
            lines.append("Unknown price (not counted): " + ", ".join(report["unknownPrice"]))
        return "\n".join(lines)

    return Command(
        "usage", "what the models cost today and yesterday, per person (parents)", usage, where=PARENTS_CHATS
    )
