"""A model turn's plan: everything the turn is given, decided once, read by every consumer.

The router picks the level (halo/routing/router.py); `plan_for` turns that level and halo.yaml's
`routing:` into what the turn gets. The model run reads the history length from it, the agent
its model and tools, the context builder its sources. None of them decides these again.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import RoutingSettings
from halo.routing.levels import Level, Route


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """`history_items`: the last N items of the session (None: all of it). `tools`: offered
    (the policy still decides which, and each tool asks it again). `notes`: today's and
    yesterday's notes beside the durable memory. `recall`: the sources a message's words pick
    (recall, documents, the graph)."""

    route: Route
    history_items: int | None = None
    tools: bool = True
    notes: bool = True
    recall: bool = True

    @property
    def level(self) -> Level:
        return self.route.level

    @property
    def reason(self) -> str:
        return self.route.reason


def plan_for(route: Route, routing: RoutingSettings) -> TurnPlan:
    """L1 is small talk and short questions the rules found need little: the last few history
    items, no tool schemas and the durable memory only, unless `routing:` says otherwise. A
    turn capped down to L1 (a budget, a profile) wanted more: it keeps its memory."""
    if route.level != Level.L1:
        return TurnPlan(route)
    small_talk = not route.capped
    return TurnPlan(
        route,
        history_items=routing.l1_history_items,
        tools=routing.l1_tools,
        notes=not small_talk or routing.l1_recall,
        recall=not small_talk or routing.l1_recall,
    )
