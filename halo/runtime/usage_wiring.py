"""Cheap first, wired: the model of each level, every model metered for its purpose, the
router and the budget. The composition root calls `build_levels` and `build_routing` once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents import Model

from config.family import Family
from config.settings import Settings
from halo.core.live_settings import LiveSettings
from halo.routing.levels import Level
from halo.routing.router import Router, Triage
from halo.runtime.providers import build_model
from halo.storage import HaloDB
from halo.usage.budget import Budget, TellParents
from halo.usage.meter import MeteredModel, UsageMeter, model_name
from halo.usage.prices import Prices
from halo.usage.store import Purpose, UsageStore
from transcripts import TranscriptStore
from transcripts.lines import FROM_HALO

log = logging.getLogger(__name__)


@dataclass
class Levels:
    """The raw models built (closed on shutdown) and the meter that wraps them per purpose."""

    meter: UsageMeter
    main: Model | None  # llm.model, or the model a bench or test handed in
    cheap: Model | None  # llm.cheap_model, else main
    strong: Model | None  # llm.strong_model, else main
    built: list[Model]  # the ones built here (their HTTP clients are halo's to close)

    def metered(self, model: Model | None, purpose: Purpose, level: Level | None = None) -> Model | None:
        if model is None:
            return None
        return MeteredModel(model, self.meter, purpose, level=str(level) if level is not None else None)

    def sink(self, purpose: Purpose) -> Callable[[str, int, int, int], Awaitable[None]]:
        """For a call made outside the Agents SDK (graph ingestion, transcription): records
        (model, input, cached, output tokens) for `purpose`."""

        async def record(model: str, input_tokens: int, cached_tokens: int, output_tokens: int) -> None:
            await self.meter.record(model, purpose, input_tokens, cached_tokens, output_tokens)

        return record

    def reply_models(self) -> dict[Level, Model]:
        found = {
            Level.L1: self.metered(self.cheap, "reply", Level.L1),
            Level.L2: self.metered(self.main, "reply", Level.L2),
            Level.L3: self.metered(self.strong, "reply", Level.L3),
        }
        return {level: model for level, model in found.items() if model is not None}


def build_levels(settings: Settings, db: HaloDB, override: Model | None) -> Levels:
    """The models of L1–L3; with `override`, every level is that model (tests, bench)."""
    llm = settings.llm
    meter = UsageMeter(UsageStore(db), lambda: settings.family.timezone)
    main = override if override is not None else build_model(llm)
    cheap = strong = main
    built = [main] if override is None and main is not None else []
    if override is None and main is not None:
        if llm.cheap_model and llm.cheap_model != llm.model:
            cheap = build_model(llm, llm.cheap_model)
            built.append(cheap) if cheap is not None else None
        if llm.strong_model and llm.strong_model != llm.model:
            strong = build_model(llm, llm.strong_model)
            built.append(strong) if strong is not None else None
    return Levels(meter, main, cheap, strong, [m for m in built if m is not None])


def build_routing(
    settings: Settings,
    live: LiveSettings,
    prices: Prices,
    levels: Levels,
    transcripts: TranscriptStore,
    tell_parents: TellParents,
    family: Callable[[], Family],
) -> tuple[Router, Budget]:
    """The router and the budget, both reading `routing:` and `budget:` from `live` at each
    message (they apply live); the triage model is built once, from `llm`."""
    budget = Budget(
        live.budget,
        levels.meter.store,
        levels.meter,
        prices,
        tell_parents,
        names=lambda member_id: _name(family(), member_id),
    )
    say_unpriced(settings, levels)
    # a triage call only earns its cost when its answer can change the model: with one model at
    # every level (no cheap_model or strong_model), each message would pay a second run for nothing
    distinct = {model_name(m) for m in (levels.cheap, levels.main, levels.strong) if m is not None}
    cheap = levels.metered(levels.cheap, "triage") if len(distinct) > 1 else None
    triage = Triage(cheap, tracing=settings.llm.tracing) if cheap is not None else None

    async def last_reply(scope_id: str) -> str | None:
        tail = await asyncio.to_thread(transcripts.tail, scope_id, 6)
        for line in reversed(tail):
            if isinstance(line, FROM_HALO):
                return line.text
        return None

    return Router(live.routing, triage=triage, budget=budget, last_reply=last_reply), budget


def say_unpriced(settings: Settings, levels: Levels) -> None:
    """With a budget, a model of no known price is one whose calls it cannot count: said at
    start and when a reloaded halo.yaml sets a budget or prices."""
    budget = settings.budget
    if budget.daily_usd is None and budget.member_daily_usd is None:
        return
    prices = Prices(settings.llm.prices)
    for model in {levels.main, levels.cheap, levels.strong} - {None}:
        name = model_name(model)  # type: ignore[arg-type]
        if prices.of(name) is None:
            log.warning("budget: %s has no known price (set llm.prices): its calls do not count", name)


def _name(family: Family, member_id: str) -> str:
    member = family.member(member_id)
    return member.name if member is not None else member_id


def usage_after_turn(budget: Budget) -> Callable[[Any, Any], Any]:
    """After each turn: the parents hear once when a budget nears its end, and when it is spent."""

    async def check_budget(turn: Any, reply: Any) -> None:
        await budget.check(turn.member.id if turn.member else None)

    return check_budget
