"""Daily model budgets: the family's and each member's, the day in family.timezone.

Spent is summed from the usage table at today's prices. At `notice_share` of a budget the
parents are told once (and once more when it is spent); a spent budget caps a message at
L1, and past the cheap model's small overrun at L0: the member is told plainly and the
message is kept. A new day starts a new budget.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from config.settings import BudgetSettings
from halo.routing.levels import Level
from halo.usage.meter import UsageMeter
from halo.usage.prices import Prices
from halo.usage.store import UsageStore

log = logging.getLogger(__name__)

TellParents = Callable[[str], Awaitable[Any]]
SPENT_REPLY = "Today's model budget is spent; your message is saved. I can still answer commands (try /help)."


@dataclass(frozen=True, slots=True)
class Spend:
    """Today's spend in USD, for the family and for one member; unknown-price calls excluded."""

    day: str
    family: float
    member: float


class Budget:
    """`settings` is read at each use: halo.yaml's `budget:` applies live."""

    def __init__(
        self,
        settings: Callable[[], BudgetSettings],
        store: UsageStore,
        meter: UsageMeter,
        prices: Prices,
        tell_parents: TellParents,
        names: Callable[[str], str] = lambda member_id: member_id,
    ) -> None:
        self.settings = settings
        self.store = store
        self.meter = meter
        self.prices = prices
        self.tell_parents = tell_parents
        self.names = names

    @property
    def active(self) -> bool:
        settings = self.settings()
        return settings.daily_usd is not None or settings.member_daily_usd is not None

    async def spend(self, member_id: str | None) -> Spend:
        day = self.meter.today()
        family = member = 0.0
        for total in await self.store.totals(day, day, "member"):
            cost = self.prices.cost(total.model, total.input_tokens, total.cached_tokens, total.output_tokens)
            if cost is None:
                continue
            family += cost
            if member_id is not None and total.key == member_id:
                member += cost
        return Spend(day, family, member)

    def _shares(self, spend: Spend) -> list[tuple[str, float, float]]:
        """(whose, spent, limit) for each budget that applies."""
        settings = self.settings()
        found = []
        if settings.daily_usd is not None:
            found.append(("family", spend.family, settings.daily_usd))
        if settings.member_daily_usd is not None:
            found.append(("member", spend.member, settings.member_daily_usd))
        return found

    async def cap(self, member_id: str | None) -> tuple[Level, str | None]:
        """The highest level a message may use now, and why it is capped (None: not capped)."""
        if not self.active:
            return Level.L3, None
        spend = await self.spend(member_id)
        worst: tuple[Level, str | None] = (Level.L3, None)
        for whose, spent, limit in self._shares(spend):
            if whose == "member" and member_id is None:
                continue
            if spent >= limit * (1 + self.settings().cheap_overrun_share):
                return Level.L0, f"the {whose} budget is spent (${spent:.2f} of ${limit:.2f})"
            if spent >= limit:
                worst = (Level.L1, f"the {whose} budget is spent (${spent:.2f} of ${limit:.2f})")
        return worst

    async def check(self, member_id: str | None) -> list[str]:
        """Tell the parents once per day per budget when it reaches the notice share and when it
        is spent; returns the notices sent (after each turn, and so never more than once)."""
        if not self.active:
            return []
        spend = await self.spend(member_id)
        sent = []
        for whose, spent, limit in self._shares(spend):
            if whose == "member" and member_id is None:
                continue
            who = "The family" if whose == "family" else self.names(member_id or "")
            key = "family" if whose == "family" else f"member:{member_id}"
            text = None
            now = self.meter.clock()
            if spent >= limit:
                await self.store.first_notice(spend.day, f"{key}:notice", now)  # the early notice is late now
                if await self.store.first_notice(spend.day, f"{key}:spent", now):
                    text = (
                        f"{who} has spent today's model budget (${spent:.2f} of ${limit:.2f}). Until midnight "
                        "halo answers with the cheap model only, and then not at all; messages are kept."
                    )
            elif spent >= limit * self.settings().notice_share and await self.store.first_notice(
                spend.day, f"{key}:notice", now
            ):
                share = round(100 * spent / limit)
                text = (
                    f"{who} has used {share}% of today's model budget (${spent:.2f} of ${limit:.2f}). "
                    "When it is spent, halo answers with the cheap model only until midnight."
                )
            if text is not None:
                await self.tell_parents(text)
                sent.append(text)
        return sent
