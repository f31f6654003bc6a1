"""Hybrid ranking: the labelled recall set, decay, diversity, the minimum score, several scopes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import SemanticMemory
from memory.semantic.embedders import Model2VecEmbedder
from memory.semantic.search import fts_query, query_terms
from tests.recall_set import all_text, evaluate, table, write_docs
from tests.semantic_helpers import CountingEmbedder, concept_model, words_of

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC).timestamp()
SCOPE = "web:mom"


def make(paths: HaloPaths, embedder: object | None, **settings: object) -> SemanticMemory:
    async def load() -> object | None:
        return embedder

    return SemanticMemory(paths, SemanticSettings(**settings), embedder_loader=load)  # type: ignore[arg-type]


@pytest.fixture
def paths(tmp_path: Path) -> HaloPaths:
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    return paths


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder(Model2VecEmbedder(concept_model(words_of(all_text())), "concept"))


def test_query_terms_drop_stopwords_and_quote_everything() -> None:
    assert query_terms("What did I say about the dentist last month?") == ["dentist"]
    assert query_terms("when does the little one get her shot") == ["little", "shot"]
    assert fts_query('Patel AND "OR" NEAR(dentist*') == '"patel" OR "near" OR "dentist"'
    assert fts_query("the of a") == ""


async def test_recall_at_5_on_the_labelled_set(paths, embedder, capsys) -> None:
    write_docs(paths.scope_dir(SCOPE))
    semantic = make(paths, embedder)
    await semantic.sync_scope(SCOPE)
    results = await evaluate(semantic, SCOPE, NOW)
    with capsys.disabled():
        print("\nrecall@5, hand-built concept StaticModel (48 dims):\n" + table(results))
    bm25, vectors, hybrid = results["bm25"], results["vectors"], results["hybrid"]
    assert bm25["name"] == 1.0 and bm25["date"] == 1.0, "exact names and dates are full-text's strength"
    assert vectors["paraphrase"] > bm25["paraphrase"], "paraphrases are the vectors' strength"
    assert hybrid["all"] >= max(bm25["all"], vectors["all"])
    assert hybrid["all"] >= 0.9
    await semantic.close()


async def test_recency_weighs_only_when_the_question_asks_for_it(paths, embedder) -> None:
    folder = paths.scope_dir(SCOPE)
    (folder / "daily").mkdir(parents=True)
    same = "The plumber fixed the bathroom tap."
    (folder / "MEMORY.md").write_text(same + "\n")
    (folder / "daily" / "2025-11-01.md").write_text(same + " Old note.\n")
    (folder / "daily" / "2026-10-30.md").write_text(same + " New note.\n")
    semantic = make(paths, embedder)
    await semantic.sync_scope(SCOPE)

    hits = await semantic.search([SCOPE], "plumber bathroom tap", params=semantic.params(limit=3, now=NOW))
    by_source = {h.source: h for h in hits}
    assert set(by_source) == {"MEMORY.md", "daily/2025-11-01.md", "daily/2026-10-30.md"}, "old but relevant stays"
    old, new = by_source["daily/2025-11-01.md"], by_source["daily/2026-10-30.md"]
    assert old.score > 0.99 * old.relevance, "a year old and not asked for the recent: not buried"
    assert hits.index(new) < hits.index(old), "the newer first when they are as relevant"

    hits = await semantic.search([SCOPE], "plumber bathroom tap lately", params=semantic.params(limit=3, now=NOW))
    by_source = {h.source: h for h in hits}
    memory, old, new = by_source["MEMORY.md"], by_source["daily/2025-11-01.md"], by_source["daily/2026-10-30.md"]
    assert memory.score == memory.relevance, "MEMORY.md does not decay"
    assert old.score < 0.1 * old.relevance * 2 and new.score > 0.95 * new.relevance, "'lately' asks for the recent"
    await semantic.close()


async def test_mmr_keeps_near_duplicates_from_crowding_out(paths, embedder) -> None:
    folder = paths.scope_dir(SCOPE)
    folder.mkdir(parents=True)
    for n in range(1, 7):
        (folder / f"practice-{n}.md").write_text(f"Soccer practice for Aarav at five, week {n}.\n")
    (folder / "gloves.md").write_text("Aarav's soccer gloves are in the car boot.\n")
    semantic = make(paths, embedder)
    await semantic.sync_scope(SCOPE)
    query = "Aarav soccer practice"
    plain = await semantic.search([SCOPE], query, params=semantic.params(limit=3, now=NOW, mmr_lambda=1.0))
    assert "gloves" not in " ".join(h.text for h in plain), "by score alone, the near-duplicates win"
    hits = await semantic.search([SCOPE], query, params=semantic.params(limit=3, now=NOW, mmr_lambda=0.5))
    assert "gloves" in " ".join(h.text for h in hits), "with MMR the different chunk makes the top 3"
    await semantic.close()


async def test_minimum_score_keeps_small_talk_empty(paths, embedder) -> None:
    write_docs(paths.scope_dir(SCOPE))
    semantic = make(paths, embedder)
    await semantic.sync_scope(SCOPE)
    assert await semantic.search([SCOPE], "thanks, that's all!") == []
    hits = await semantic.search([SCOPE], "Okafor")
    assert hits and hits[0].source == "car.md" and (hits[0].start_line, hits[0].end_line) == (1, 1)
    assert all(h.relevance >= semantic.settings.min_score for h in hits)
    await semantic.close()


async def test_several_scopes_merge_by_score(paths, embedder) -> None:
    for scope, text in [
        ("web:mom", "The dentist is Dr. Patel on Elm Street."),
        ("telegram:-1001234", "Dentist bills go to the joint account."),
        ("web:wags", "Soccer cleats are size six."),
    ]:
        folder = paths.scope_dir(scope)
        folder.mkdir(parents=True)
        (folder / "MEMORY.md").write_text(text + "\n")
    semantic = make(paths, embedder)
    await semantic.sync_all(["web:mom", "telegram:-1001234", "web:wags"])
    hits = await semantic.search(["web:mom", "telegram:-1001234"], "dentist Patel")
    assert [h.scope_id for h in hits] == ["web:mom", "telegram:-1001234"]
    assert hits[0].score >= hits[1].score
    only = await semantic.search(["telegram:-1001234"], "dentist Patel")
    assert {h.scope_id for h in only} == {"telegram:-1001234"}, "a scope not given is never searched"
    assert sorted(semantic.known_scopes()) == ["telegram:-1001234", "web:mom", "web:wags"]
    await semantic.close()


def test_vector_search_above_the_mirror_limit_uses_vec0(paths, embedder) -> None:
    import asyncio

    write_docs(paths.scope_dir(SCOPE))
    semantic = make(paths, embedder)
    asyncio.run(semantic.sync_scope(SCOPE))
    from memory.semantic.index import ScopeIndex

    index = ScopeIndex(semantic.index_path(SCOPE), SCOPE)
    query = asyncio.run(embedder.embed(["teeth straightened"]))[0]
    mirrored = index.vector_candidates(query, 5, max_mirrored=10_000)
    direct = index.vector_candidates(query, 5, max_mirrored=0)
    assert [i for i, _ in mirrored] == [i for i, _ in direct]
    assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(mirrored, direct, strict=True))
    index.close()
    asyncio.run(semantic.close())
