"""One plan per turn: what a model turn is given follows from its level and `routing:`, in one
place (halo/routing/plan.py). The prompts it makes are checked in tests/test_lean_prompts.py."""

from __future__ import annotations

from config.settings import RoutingSettings
from halo.routing.levels import Level, Route
from halo.routing.plan import plan_for


def test_small_talk_at_l1_gets_a_short_history_no_tools_and_durable_memory_only() -> None:
    plan = plan_for(Route(Level.L1, "small talk"), RoutingSettings())
    assert (plan.level, plan.reason) == (Level.L1, "small talk")
    assert (plan.history_items, plan.tools, plan.notes, plan.recall) == (8, False, False, False)


def test_every_other_level_gets_everything() -> None:
    for level in (Level.L2, Level.L3):
        plan = plan_for(Route(level, "the default"), RoutingSettings(l1_history_items=2))
        assert (plan.history_items, plan.tools, plan.notes, plan.recall) == (None, True, True, True)


def test_a_turn_capped_down_to_l1_keeps_its_memory_but_not_the_l1_limits() -> None:
    capped = Route(Level.L1, "triage: L3; capped: the budget", wanted=Level.L3)
    plan = plan_for(capped, RoutingSettings())
    assert (plan.notes, plan.recall) == (True, True)  # it asked for more than small talk
    assert (plan.history_items, plan.tools) == (8, False)  # but runs at L1's size


def test_routing_settings_open_up_l1() -> None:
    settings = RoutingSettings(l1_history_items=None, l1_tools=True, l1_recall=True)
    plan = plan_for(Route(Level.L1, "small talk"), settings)
    # l1_recall sends "the day's notes, recall, documents and graph facts at L1 too", as its description says
    assert (plan.history_items, plan.tools, plan.notes, plan.recall) == (None, True, True, True)
