"""The routing rules against the labelled corpus (tests/data/routing_corpus.jsonl), no model:
the guarantees bench/routing.py measures on the real pipeline, kept in CI.

- no message labelled L2 or L3 is routed to L0 or L1 (erring down loses quality; up only costs);
- every acknowledgement is L0 (no model).

The triage call is off here, so what the rules cannot place goes to L2, as it does when the
triage fails; commands never reach the router (the gateway answers them first).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from config.loader import load_settings
from config.settings import RoutingSettings
from halo.core.turn import Turn
from halo.routing.levels import Level
from halo.routing.router import Router
from policy import PolicyEngine
from tests.conftest import write_home
from tests.routing_support import CORPUS_FAMILY, Labelled, corpus_envelope, load_corpus

CORPUS = load_corpus()


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Labelled, Level, str]]:
    home = write_home(Path(tmp_path_factory.mktemp("home")), family=CORPUS_FAMILY)
    settings = load_settings(home)
    policy = PolicyEngine(settings.family_view())
    routing = RoutingSettings(enabled=True, triage=False)
    router = Router(lambda: routing)

    async def route_all() -> list[tuple[Labelled, Level, str]]:
        found = []
        for message in CORPUS:
            if message.kind == "command":
                continue
            route = await router.route(Turn(corpus_envelope(policy.family, message), policy))
            found.append((message, route.level, route.reason))
        return found

    return asyncio.run(route_all())


def test_the_corpus_is_big_and_covers_every_kind() -> None:
    kinds = Counter(m.kind for m in CORPUS)
    assert len(CORPUS) >= 200
    assert {"acknowledgement", "greeting", "logistics", "homework", "planning", "document", "status", "command"} <= set(
        kinds
    )
    assert {m.level for m in CORPUS} == set(Level)


def test_no_message_that_needs_the_model_goes_to_a_lesser_one(routed: list[tuple[Labelled, Level, str]]) -> None:
    too_low = [
        (m.text, m.level.name, level.name, why) for m, level, why in routed if m.level >= Level.L2 and level < Level.L2
    ]
    assert too_low == []


def test_every_acknowledgement_needs_no_model(routed: list[tuple[Labelled, Level, str]]) -> None:
    missed = [
        (m.text, level.name, why) for m, level, why in routed if m.kind == "acknowledgement" and level != Level.L0
    ]
    assert missed == []


def test_small_talk_mostly_reaches_the_cheap_model(routed: list[tuple[Labelled, Level, str]]) -> None:
    """Not a guarantee, a floor: if the rules stop recognising small talk, the savings go."""
    small = [level for m, level, _ in routed if m.level == Level.L1]
    assert sum(level == Level.L1 for level in small) >= 0.6 * len(small)
