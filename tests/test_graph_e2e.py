"""Graph memory through the whole message path: parents talk over weeks, their scope goes
quiet, its facts become a graph; a parent asks, and the model is sent the current answer
with the date it changed — and nothing from a private DM."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.graph_support import require_graph_extra

pytestmark = pytest.mark.slow  # a real FalkorDB

require_graph_extra()

from halo.core.envelope import Envelope, Speaker  # noqa: E402
from halo.core.scopes import resolve_scope  # noqa: E402
from tests.conftest import llm_yaml  # noqa: E402
from tests.fakes.graphiti_model import GraphitiStandIn  # noqa: E402
from tests.fakes.llm_server import FakeOpenAI  # noqa: E402
from tests.graph_support import falkordb_server  # noqa: E402, F401
from tests.semantic_helpers import save_concept_model  # noqa: E402
from tests.waiting import eventually  # noqa: E402

PARENTS = "telegram:-1001234"
AARAV_DM = "telegram:1003"
MOM_DM = "telegram:1002"
SEPT = datetime(2026, 9, 1, 18, 0, tzinfo=UTC)
OCT = datetime(2026, 10, 6, 9, 0, tzinfo=UTC)


def graph_yaml(model: Path, url: str | None) -> str:
    return (
        "memory:\n"
        "  quiet_minutes: 0.001\n"
        f"  semantic: {{embedder: model2vec, model: '{model}'}}\n"
        f"  graph: {{enabled: true, url: {url or 'null'}}}\n"
    )


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return save_concept_model(tmp_path / "concept-model", ["aarav", "tuesdays", "thursdays", "saturdays"])


def say(running, scope_id: str, member_id: str, text: str, ts: datetime) -> Envelope:
    family = running.halo.family
    member = family.member(member_id)
    return Envelope("telegram", resolve_scope(family, scope_id), Speaker(str(member.telegram_user_id), member=member),
                    text, ts=ts)  # fmt: skip


async def ingested(running, scope_id: str) -> None:
    """Wait until the scope's graph watermark reaches the end of its transcript."""
    graph = running.halo.graph
    size = running.halo.transcripts.size(scope_id)

    def done() -> bool:
        scope = graph.status()["scopes"].get(scope_id)
        assert scope is not None and scope["watermark"] >= size, scope
        return True

    # a hang's deadline: graphiti's ingestion is a dozen model calls and FalkorDB queries, which
    # a machine busy with other work (CI under a CPU hog) stretches well past their idle seconds
    await eventually(done, within=120, what=f"{scope_id} ingested into its graph")


async def test_a_parent_gets_the_current_answer_with_its_date_and_nothing_from_a_dm(
    fake_llm: FakeOpenAI, settings_for, serve_halo, model_dir, falkordb
) -> None:
    GraphitiStandIn().install(fake_llm)
    running = await serve_halo(settings_for(llm_yaml(fake_llm) + graph_yaml(model_dir, falkordb)))
    await running.halo.start_background()
    graph = running.halo.graph
    assert graph.enabled, graph.reason
    handle = running.halo.gateway.handle

    await handle(say(running, PARENTS, "wags", "Note: Aarav's football is on Tuesdays now, pick-up at five.", SEPT))
    await running.halo.gateway.drain()
    await ingested(running, PARENTS)
    await handle(say(running, AARAV_DM, "aarav", "Note: Aarav's football is on Saturdays now, with my friends.", OCT))
    await handle(say(running, MOM_DM, "mom", "Note: Mom's football is on Sundays now, a surprise for Wags.", OCT))
    await handle(say(running, PARENTS, "mom", "Note: Aarav's football is on Thursdays from now on.", OCT))
    await running.halo.gateway.drain()
    for scope_id in (PARENTS, AARAV_DM, MOM_DM):
        await ingested(running, scope_id)

    fake_llm.reply("Thursdays, since 6 October.")
    reply = await handle(say(running, PARENTS, "mom", "When is Aarav's football now?", datetime.now(UTC)))
    assert reply.text == "Thursdays, since 6 October."
    prompt = fake_llm.last_prompt_text()
    assert "Aarav's football: Thursdays (since 2026-10-06; was: Aarav's football: Tuesdays" in prompt
    assert "Saturdays" not in prompt and "Sundays" not in prompt, "a private DM's facts reached the parents group"

    # the DM's own graph has its fact, and its owner's turn reads it
    fake_llm.reply("Saturdays.")
    await handle(say(running, AARAV_DM, "aarav", "When is my football?", datetime.now(UTC)))
    dm_prompt = fake_llm.last_prompt_text()
    assert "Aarav's football: Saturdays" in dm_prompt
    assert "Tuesdays" not in dm_prompt and "Thursdays" not in dm_prompt, "the parents group leaked into a DM"

    command = await handle(say(running, PARENTS, "wags", "/facts Aarav's football", datetime.now(UTC)))
    assert "Aarav's football: Thursdays (since 2026-10-06" in command.text and "Saturdays" not in command.text

    headers = {"Authorization": "Bearer wags-token"}
    async with running.http.get(running.url(f"/memory/graph?scopeId={PARENTS}"), headers=headers) as resp:
        body = await resp.json()
    assert resp.status == 200, body
    football = [f for f in body["facts"] if f["target"] == "football"]
    assert sorted((f["fact"], f["current"]) for f in football) == [
        ("Aarav's football: Thursdays", True),
        ("Aarav's football: Tuesdays", False),
    ]
    async with running.http.get(running.url("/status"), headers=headers) as resp:
        status = (await resp.json())["graph_memory"]
    assert status["enabled"] and status["tokens_today"] > 0
    await running.halo.gateway.drain()
    # every ingestion call is in halo's usage table too, exactly what graph memory counted
    rows = await running.halo.usage.store.totals("2000-01-01", "2999-12-31", "purpose")
    graph_rows = [row for row in rows if row.key == "graph"]
    assert graph_rows and {row.model for row in graph_rows} == {"fake-model"}
    assert sum(row.input_tokens + row.output_tokens for row in graph_rows) == status["tokens_today"]


async def test_halo_runs_its_own_falkordb_and_stops_it(fake_llm, settings_for, serve_halo, model_dir) -> None:
    GraphitiStandIn().install(fake_llm)
    settings = settings_for(llm_yaml(fake_llm) + graph_yaml(model_dir, None))
    running = await serve_halo(settings)
    await running.halo.start_background()
    graph = running.halo.graph
    assert graph.enabled, graph.reason
    server = graph.server
    assert server is not None and (settings.paths.home / "graph" / "falkordb").is_dir()
    process = server.process

    await running.halo.gateway.handle(say(running, PARENTS, "wags", "Note: Aarav's football is on Tuesdays now.", SEPT))
    await running.halo.gateway.drain()
    await ingested(running, PARENTS)

    await graph.close()
    assert process.returncode is not None, "halo stopped the FalkorDB it started"
