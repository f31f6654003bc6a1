"""Graph isolation, property-based: over generated family facts, a turn's graph recall returns
facts only from scopes the policy lets that speaker read from that scope. A DM's facts never
reach the parents group's recall (young Tara's aside: the policy lets parents read hers),
and the parents group's never reach a child's DM."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from tests.graph_support import require_graph_extra

pytestmark = pytest.mark.slow  # a real FalkorDB

require_graph_extra()

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from config.loader import load_settings  # noqa: E402
from halo.core.envelope import Envelope, Speaker  # noqa: E402
from halo.core.scopes import resolve_scope  # noqa: E402
from halo.core.turn import Turn  # noqa: E402
from halo.runtime.app import build_halo  # noqa: E402
from tests.conftest import llm_yaml, write_home  # noqa: E402
from tests.fakes.graphiti_model import GraphitiStandIn  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI  # noqa: E402
from tests.graph_support import falkordb_server  # noqa: E402, F401
from tests.semantic_helpers import save_concept_model  # noqa: E402
from transcripts.lines import Message  # noqa: E402

PARENTS = "telegram:-1001234"
WRITERS = {PARENTS: "wags", "telegram:1001": "wags", "telegram:1002": "mom", "telegram:1003": "aarav",
           "telegram:1004": "tara"}  # fmt: skip
VIEWERS = [("mom", PARENTS), ("wags", PARENTS), ("aarav", "telegram:1003"), ("mom", "telegram:1002"),
           ("tara", "telegram:1004"), ("wags", "telegram:1001")]  # fmt: skip
SUBJECTS = ["Aarav", "Tara", "Wags", "Mom"]
THINGS = ["football", "piano", "dentist", "swimming"]
_clock = itertools.count()


@dataclass
class World:
    halo: object
    loop: asyncio.AbstractEventLoop


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, falkordb: str) -> Iterator[World]:
    fake = FakeOpenAI().start_in_thread()
    GraphitiStandIn().install(fake)
    root = tmp_path_factory.mktemp("graph-isolation")
    model = save_concept_model(root / "model", [t for t in THINGS])
    yaml = llm_yaml(fake) + (
        f"memory:\n  semantic: {{embedder: model2vec, model: '{model}'}}\n"
        f"  graph: {{enabled: true, url: '{falkordb}'}}\n"
    )
    home = write_home(root / "home", yaml)
    loop = asyncio.new_event_loop()
    halo = build_halo(load_settings(home))
    graph = halo.graph
    loop.run_until_complete(graph.start())
    assert graph.enabled, graph.reason
    yield World(halo, loop)
    loop.run_until_complete(halo.close())
    loop.close()
    fake.stop()


def turn_for(world: World, member_id: str, scope_id: str, text: str = "?") -> Turn:
    services = world.halo  # type: ignore[attr-defined]
    family = services.family
    member = family.member(member_id)
    envelope = Envelope("telegram", resolve_scope(family, scope_id), Speaker(member_id, member=member), text)
    return Turn(envelope, services.policy)


FACTS = st.lists(
    st.tuples(st.sampled_from(sorted(WRITERS)), st.sampled_from(SUBJECTS), st.sampled_from(THINGS)),
    min_size=1,
    max_size=4,
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=FACTS)
def test_graph_recall_never_crosses_a_scope_the_policy_refuses(world: World, facts) -> None:
    services = world.halo  # type: ignore[attr-defined]
    placed: dict[str, str] = {}  # unique value → the scope it was said in

    async def ingest() -> None:
        for scope_id, subject, thing in facts:
            value = f"Zq{uuid.uuid4().hex[:8]}"
            placed[value] = scope_id
            ts = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=next(_clock))
            text = f"Note: {subject}'s {thing} is on {value} now."
            line = Message(uuid.uuid4().hex, ts, scope_id, text, speaker=WRITERS[scope_id])
            await services.transcripts.append(line)
        for scope_id in {s for s, _, _ in facts}:
            result = await services.graph.ingestion.run(scope_id)
            assert result.stopped is None, result.stopped

    world.loop.run_until_complete(ingest())
    for member, scope_id in VIEWERS:
        turn = turn_for(world, member, scope_id)
        for _, subject, thing in facts:
            lines = world.loop.run_until_complete(
                world.halo.graph_recall.facts_about(turn, f"{subject}'s {thing}", limit=30, audit=False)
            )
            text = "\n".join(lines)
            for value, origin in placed.items():
                if value in text:  # the policy itself is the oracle, asked here
                    decision = services.policy.decide(
                        "read_memory",
                        principal=turn.member,
                        resource=resolve_scope(services.family, origin),
                        from_scope=turn.scope,
                        audit=False,
                    )
                    assert decision.allowed, f"{member} in {scope_id} got a fact from {origin}: {text}"


def test_who_reads_which_graph(world: World) -> None:
    def readable(member: str, scope_id: str) -> set[str]:
        known = set(world.halo.graph.known_scopes()) | {scope_id}  # type: ignore[attr-defined]
        return (
            set(world.halo.graph_recall.readable_graph_scopes(turn_for(world, member, scope_id), audit=False)) & known
        )

    assert PARENTS not in readable("aarav", "telegram:1003"), "the parents group never reaches a child's DM"
    assert not readable("mom", PARENTS) & {"telegram:1001", "telegram:1002", "telegram:1003"}, (
        "a parent's or an adolescent's DM never reaches the parents group"
    )
