"""Isolation, property-based: whoever asks, from wherever, with whatever words, recall never
returns a chunk of a scope the policy does not let that speaker read from that scope."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import load_settings
from config.paths import scope_hash
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.turn import Turn
from halo.runtime.app import build_halo
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Model2VecEmbedder
from tests.conftest import write_home
from tests.semantic_helpers import concept_model

SCOPES = [
    "telegram:1001",
    "telegram:1002",
    "telegram:1003",
    "telegram:1004",  # DMs: wags, mom, aarav, tara
    "web:wags",
    "web:mom",
    "web:aarav",
    "web:priya",
    "telegram:-1001234",  # the parents group
    "telegram:-777",  # a group halo.yaml does not name
    "discord:3001",  # the work channel
    "discord:2001",  # priya's DM on discord
]
COMMON = ["dentist", "soccer", "plans", "secret", "notes", "birthday"]


def secret(scope_id: str) -> str:
    """A word only this scope's notes contain (and no other scope's word contains)."""
    return f"zq{scope_hash(scope_id)[:10]}zq"


@dataclass
class World:
    halo: object
    semantic: SemanticMemory
    loop: asyncio.AbstractEventLoop


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = write_home(tmp_path_factory.mktemp("isolation") / "home", "llm: {provider: none}\n")
    halo_settings = load_settings(home)
    loop = asyncio.new_event_loop()
    halo = build_halo(halo_settings)
    model = Model2VecEmbedder(concept_model([secret(s) for s in SCOPES] + COMMON), "concept")

    async def load() -> Model2VecEmbedder:
        return model

    semantic = SemanticMemory(halo_settings.paths, halo_settings.memory.semantic, embedder_loader=load)
    halo.semantic = semantic
    for scope_id in SCOPES:
        folder = halo_settings.paths.scope_dir(scope_id)
        (folder / "daily").mkdir(parents=True)
        (folder / "MEMORY.md").write_text(f"# Notes\nThe {secret(scope_id)} dentist soccer plans of this chat.\n")
        (folder / "daily" / "2026-10-01.md").write_text(f"- birthday secret notes {secret(scope_id)}\n")
    loop.run_until_complete(semantic.sync_all(SCOPES))
    yield World(halo, semantic, loop)
    loop.run_until_complete(halo.close())
    loop.close()


def turn_for(world: World, member_id: str | None, scope_id: str) -> Turn:
    services = world.halo  # type: ignore[attr-defined]
    family = services.family
    member = family.member(member_id) if member_id else None
    scope = resolve_scope(family, scope_id)
    platform = scope_id.split(":", 1)[0]
    envelope = Envelope(platform, scope, Speaker(member_id or "999", member=member), "?")  # type: ignore[arg-type]
    return Turn(envelope, services.policy)


MEMBERS = st.sampled_from(["wags", "mom", "aarav", "tara", "priya", None])
QUERIES = st.lists(st.sampled_from([secret(s) for s in SCOPES] + COMMON), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(member=MEMBERS, scope_id=st.sampled_from(SCOPES), query=QUERIES)
def test_recall_never_crosses_a_scope_the_policy_refuses(world: World, member, scope_id, query) -> None:
    turn = turn_for(world, member, scope_id)
    hits = world.loop.run_until_complete(world.halo.recall.search_readable(turn, query, limit=10, audit=False))
    policy = turn.policy
    for hit in hits:
        decision = policy.decide(
            "read_memory",
            principal=turn.member,
            resource=resolve_scope(turn.family, hit.scope_id),
            from_scope=turn.scope,
            unknown_id="999",
            audit=False,
        )
        assert decision.allowed, f"{member} in {scope_id} got a chunk of {hit.scope_id}: {decision.reason}"
        for other in SCOPES:
            if secret(other) in hit.text:
                assert other == hit.scope_id  # a chunk carries only its own scope's words


def test_who_reads_what(world: World) -> None:
    """The property above, pinned to the family's rules so a policy regression shows here too."""

    def readable(member: str | None, scope_id: str) -> set[str]:
        return set(world.halo.recall.readable_scopes(turn_for(world, member, scope_id), audit=False))

    assert readable("mom", "telegram:1002") == {"telegram:1002", "telegram:-1001234", "telegram:1004"}, (
        "her DM, the parents group, and young Tara's DM"
    )
    assert readable("mom", "telegram:-1001234") == {"telegram:-1001234", "telegram:1004"}
    assert readable("aarav", "telegram:1003") == {"telegram:1003"}, "an adolescent without visibility: own DM only"
    assert readable("tara", "telegram:1004") == {"telegram:1004"}
    assert readable("priya", "discord:3001") == {"discord:3001"}, "work reads work only"
    assert readable("wags", "discord:3001") == {"discord:3001"}
    assert readable("aarav", "telegram:1002") == set(), "nobody reads from someone else's DM"
    assert readable(None, "telegram:1001") == set(), "an unknown sender reads nothing"
    assert readable("mom", "telegram:-777") == set(), "an unconfigured group reads nothing"

    turn = turn_for(world, "aarav", "telegram:1003")
    hits = world.loop.run_until_complete(
        world.halo.recall.search_readable(turn, f"{secret('telegram:1002')} dentist", limit=10)
    )
    assert {h.scope_id for h in hits} <= {"telegram:1003"}
    assert not any(secret("telegram:1002") in h.text for h in hits)


def test_index_files_live_in_their_scope_folder(world: World) -> None:
    paths = world.semantic.paths
    for scope_id in SCOPES:
        assert (paths.scope_dir(scope_id) / "semantic.db").exists()
    assert len({Path(paths.scope_dir(s)).name for s in SCOPES}) == len(SCOPES)
