"""Graph memory on a real FalkorDB with the stand-in model: temporal facts, failures, purge."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests import processes
from tests.graph_support import require_graph_extra

pytestmark = pytest.mark.slow  # a real FalkorDB

require_graph_extra()

from config.settings import GraphSettings, LLMSettings  # noqa: E402
from memory.graph import group_id  # noqa: E402
from memory.graph.service import GraphMemory  # noqa: E402
from memory.graph.store import render_facts  # noqa: E402
from memory.semantic.embedders import Model2VecEmbedder  # noqa: E402
from tests.fakes.graphiti_model import GraphitiStandIn  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI  # noqa: E402
from tests.graph_support import falkordb_server  # noqa: E402, F401
from tests.memory_support import MemoryKit, names  # noqa: E402
from tests.semantic_helpers import concept_model  # noqa: E402

PARENTS = "telegram:-1001234"
SEPT = datetime(2026, 9, 1, 18, 0, tzinfo=UTC)
OCT = datetime(2026, 10, 6, 9, 0, tzinfo=UTC)
EMBEDDER = Model2VecEmbedder(concept_model(), "concept-test")


async def _embedder():
    return EMBEDDER


def make_graph(kit: MemoryKit, url: str | None, fake: FakeOpenAI, **settings) -> GraphMemory:
    return GraphMemory(
        GraphSettings(enabled=True, url=url, **settings),
        LLMSettings(provider="openai-compatible", model="main", cheap_model="cheap", base_url=fake.base_url,
                    api_key="test-key"),
        kit.paths,
        kit.files,
        kit.transcripts,
        kit.state,
        _embedder,
        names=names,
        may_write=kit.may_write,
    )  # fmt: skip


@pytest.fixture
async def llm():
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def graph(tmp_path, falkordb, llm):
    kit = MemoryKit(tmp_path / "home")
    memory = make_graph(kit, falkordb, llm)
    stand_in = GraphitiStandIn().install(llm)
    await memory.start()
    assert memory.enabled, memory.reason
    yield kit, memory, stand_in
    await memory.close()


async def test_a_changed_fact_is_superseded_not_duplicated_and_history_stays(graph, llm):
    kit, memory, _ = graph
    await kit.say(PARENTS, "Note: Aarav's football is on Tuesdays now, pick-up at five.", "wags", ts=SEPT)
    first = await memory.ingestion.run(PARENTS)
    await kit.say(PARENTS, "Note: Aarav's football is on Thursdays from now on.", "mom", ts=OCT)
    second = await memory.ingestion.run(PARENTS)

    assert (first.episodes, second.episodes) == (1, 1)
    _, facts = await memory.contents(PARENTS)
    football = [f for f in facts if f.source == "Aarav" and f.target == "football"]
    current = [f for f in football if f.current]
    assert [f.fact for f in current] == ["Aarav's football: Thursdays"]
    assert current[0].valid_at == OCT
    old = [f for f in football if not f.current]
    assert [f.fact for f in old] == ["Aarav's football: Tuesdays"]
    assert (old[0].valid_at, old[0].invalid_at) == (SEPT, OCT)

    found = await memory.search([PARENTS], "when is Aarav's football?")
    lines = render_facts(found, await memory.history(found))
    assert lines[0] == (
        "Aarav's football: Thursdays (since 2026-10-06; was: Aarav's football: Tuesdays, 2026-09-01 – 2026-10-06)"
    )
    # the cheap model did the work, inside the output cap
    models = {r.json["model"] for r in llm.chat_requests}
    assert models == {"cheap"}
    assert max(r.json["max_tokens"] for r in llm.chat_requests) <= 2048


async def test_the_watermark_moves_only_past_what_is_in(graph, llm):
    kit, memory, stand_in = graph
    await kit.say(PARENTS, "Note: Aarav's piano is on Mondays now.", "wags", ts=SEPT)
    stand_in.fail_after = sum(stand_in.calls.values()) + 1  # the entity call passes, the next one fails
    failed = await memory.ingestion.run(PARENTS)

    assert failed.episodes == 0 and "500" in (failed.stopped or "")
    state = kit.state.get(PARENTS, "graph")
    assert state.offset == 0 and state.failures == 1 and state.next_retry is not None
    assert memory.status()["failing"] == [PARENTS]
    assert memory.status()["tokens_today"] == failed.tokens > 0, "the call that answered still cost tokens"

    stand_in.fail_after = None  # the model is back: the same turn goes in, once
    retried = await memory.ingestion.run(PARENTS)
    assert retried.episodes == 1
    _, facts = await memory.contents(PARENTS)
    assert [f.fact for f in facts if f.target == "piano"] == ["Aarav's piano: Mondays"]
    assert kit.state.get(PARENTS, "graph").failures == 0


async def test_tokens_are_counted_and_the_budget_stops_ingestion(tmp_path, falkordb, llm):
    kit = MemoryKit(tmp_path / "home")
    GraphitiStandIn().install(llm)
    memory = make_graph(kit, falkordb, llm, daily_token_budget=9000)
    await memory.start()
    try:
        for n, day in enumerate((1, 2, 3, 4)):
            ts = datetime(2026, 9, day, 10, 0, tzinfo=UTC)
            await kit.say(PARENTS, f"Note: Tara's swimming lesson is on day {n} now.", "mom", ts=ts)
        result = await memory.ingestion.run(PARENTS)
        status = memory.status()
        assert result.stopped == "budget"
        assert 0 < result.episodes < 4
        assert status["tokens_today"] == result.tokens <= 9000
        # what the model reported, counted: at least every prompt token it was sent
        assert status["tokens_today"] >= sum(u["prompt_tokens"] for u in _usages(llm)) > 0
    finally:
        await memory.close()


def _usages(llm: FakeOpenAI):
    from tests.fakes.llm_server import Reply, _chat_usage  # the fake's own accounting

    for request in llm.chat_requests:
        yield _chat_usage(llm._prompt_of(request.json), Reply())


async def test_purge_deletes_the_scopes_graph_only(graph):
    kit, memory, _ = graph
    dm = "telegram:1002"
    await kit.say(PARENTS, "Note: Aarav's chess is on Fridays now.", "wags", ts=SEPT)
    await kit.say(dm, "Note: Mom's yoga is on Sundays now.", "mom", ts=SEPT)
    await memory.ingestion.run(PARENTS)
    await memory.ingestion.run(dm)

    assert await memory.purge(dm) is True
    assert not await memory.store.exists(group_id(dm))
    assert await memory.store.exists(group_id(PARENTS))
    assert await memory.search([dm], "yoga") == []


def test_graphiti_telemetry_is_off_once_graph_memory_is_loaded() -> None:
    """In a fresh interpreter without pytest (Graphiti turns telemetry off under pytest itself)."""
    import os
    import sys

    code = (
        "import memory.graph.store\n"
        "from graphiti_core.telemetry.telemetry import is_telemetry_enabled\n"
        "print(is_telemetry_enabled())"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRAPHITI_TELEMETRY_ENABLED"}
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
