"""Embedders: text → unit float32 vectors, behind one small protocol.

`model2vec` (static embeddings, no torch, fast on a CPU) is the default; `openai` talks to
any OpenAI-compatible `/v1/embeddings`; `sentence-transformers` is an optional extra for a
local model folder; `none` means full-text recall only. Loading never raises into halo:
`load_embedder` returns the embedder or the reason it could not be loaded, and the index
then works on full-text search alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from config.settings import SemanticSettings

if TYPE_CHECKING:  # NumPy (~11 MiB resident) is imported where vectors are made: a process with
    # no embedder loaded (`none`, or a model that could not load) never holds it
    import numpy as np

    Vectors = np.ndarray  # shape (n, dim), float32, rows L2-normalised (zero rows stay zero)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EmbedderIdentity:
    """What a vector means. Vectors from two identities are never mixed in one index."""

    name: str
    model: str
    dim: int

    @property
    def key(self) -> str:
        return f"{self.name}/{self.model}/{self.dim}"


class Embedder(Protocol):
    """Turns texts into vectors. `embed` must not block the event loop: CPU-bound
    implementations run their work in a worker thread, in batches."""

    @property
    def identity(self) -> EmbedderIdentity: ...

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot be used; the message says why and what to do."""


def normalise(vectors: Any) -> Vectors:
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array.reshape(1, -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


class _ThreadedEmbedder:
    """Shared by the local embedders: batches, each one encoded in a worker thread."""

    def __init__(self, identity: EmbedderIdentity, encode: Callable[[list[str]], Any], batch_size: int) -> None:
        self._identity = identity
        self._encode = encode
        self.batch_size = batch_size

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    async def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self._identity.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            parts.append(normalise(await asyncio.to_thread(self._encode, batch)))
        return np.vstack(parts)


class Model2VecEmbedder(_ThreadedEmbedder):
    """A model2vec `StaticModel`: a token-vector lookup and a mean, microseconds a text."""

    def __init__(self, model: Any, name: str, batch_size: int = 64) -> None:
        self.model = model
        identity = EmbedderIdentity("model2vec", name, int(model.dim))
        super().__init__(identity, lambda batch: model.encode(batch, show_progress_bar=False), batch_size)

    @classmethod
    def load(cls, path_or_id: str, batch_size: int = 64) -> Model2VecEmbedder:
        """A local folder, or a hub id (downloads only where the hub is reachable).

        A model that is neither on this machine nor reachable is refused before model2vec and
        huggingface_hub are imported: trying cost ~0.4 s of CPU beside the first turn after a
        start and ~10 MiB held for nothing (bench/serve_startup.py)."""
        local = Path(path_or_id).expanduser()
        if not local.exists() and not hub_cached(path_or_id) and (why := hub_unreachable()) is not None:
            raise EmbedderUnavailable(
                f"model2vec model {path_or_id!r} could not be loaded: it is not on this machine and {why}; "
                "set memory.semantic.model to a local model folder, or allow the download"
            )
        try:
            from model2vec import StaticModel
        except ImportError as exc:
            raise EmbedderUnavailable(f"model2vec is not installed ({exc}); run `uv sync`") from exc
        try:
            model = StaticModel.from_pretrained(str(local) if local.exists() else path_or_id, force_download=False)
        except Exception as exc:
            raise EmbedderUnavailable(
                f"model2vec model {path_or_id!r} could not be loaded ({type(exc).__name__}: {_first_line(exc)}); "
                "set memory.semantic.model to a local model folder, or allow the download"
            ) from exc
        return cls(model, path_or_id, batch_size)


class SentenceTransformerEmbedder(_ThreadedEmbedder):
    """A sentence-transformers model from a local folder (optional extra: pulls in torch)."""

    def __init__(self, model: Any, name: str, batch_size: int = 32) -> None:
        self.model = model
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = int(dimension())  # renamed in sentence-transformers 6
        super().__init__(
            EmbedderIdentity("sentence-transformers", name, dim),
            lambda batch: model.encode(batch, batch_size=batch_size, show_progress_bar=False),
            batch_size,
        )

    @classmethod
    def load(cls, path: str, batch_size: int = 32) -> SentenceTransformerEmbedder:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "sentence-transformers is not installed; install the extra: "
                "`uv sync --extra sentence-transformers` (it brings torch)"
            ) from exc
        try:
            model = SentenceTransformer(str(Path(path).expanduser()), device="cpu")
        except Exception as exc:
            raise EmbedderUnavailable(f"sentence-transformers model {path!r} could not be loaded: {exc}") from exc
        return cls(model, path, batch_size)


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` (OpenAI, Ollama, vLLM …): network-bound, so
    it stays on the event loop and sends one request a batch."""

    def __init__(self, client: Any, model: str, dim: int, dimensions: int | None, batch_size: int = 64) -> None:
        self.client = client
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._identity = EmbedderIdentity("openai", model, dim)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    @classmethod
    async def load(
        cls,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout_seconds: float = 30.0,
    ) -> OpenAIEmbedder:
        """Connects and embeds one probe text, which also tells the dimension."""
        from openai import AsyncOpenAI

        if not api_key and not base_url:
            raise EmbedderUnavailable(
                "the openai embedder needs an api key (memory.semantic.api_key or OPENAI_API_KEY)"
            )
        client = AsyncOpenAI(api_key=api_key or "not-needed", base_url=base_url, timeout=timeout_seconds, max_retries=1)
        probe = cls(client, model, 0, dimensions, batch_size)
        try:
            dim = int((await probe._request(["halo"])).shape[1])
        except Exception as exc:
            raise EmbedderUnavailable(
                f"openai embeddings at {base_url or 'api.openai.com'} with model {model!r} failed: "
                f"{type(exc).__name__}: {_first_line(exc)}"
            ) from exc
        return cls(client, model, dim, dimensions, batch_size)

    async def _request(self, texts: list[str]) -> Vectors:
        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        response = await self.client.embeddings.create(model=self.model, input=texts, **extra)
        ordered = sorted(response.data, key=lambda d: d.index)
        return normalise([d.embedding for d in ordered])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self._identity.dim), dtype=np.float32)
        size = self.batch_size
        parts = [await self._request(list(texts[i : i + size])) for i in range(0, len(texts), size)]
        return np.vstack(parts)


async def load_embedder(
    settings: SemanticSettings, *, llm_base_url: str | None = None, llm_api_key: str | None = None
) -> Embedder | None:
    """The configured embedder, or None for `none`. Raises EmbedderUnavailable with the reason."""
    name = settings.embedder
    model = settings.resolved_model
    if name == "none":
        return None
    if name == "model2vec":
        assert model is not None
        return await asyncio.to_thread(Model2VecEmbedder.load, model, settings.batch_size)
    if name == "sentence-transformers":
        if not model:
            raise EmbedderUnavailable("sentence-transformers needs memory.semantic.model: a local model folder")
        return await asyncio.to_thread(SentenceTransformerEmbedder.load, model, settings.batch_size)
    assert model is not None
    api_key = settings.api_key.get_secret_value() if settings.api_key else llm_api_key
    return await OpenAIEmbedder.load(
        model=model,
        base_url=settings.base_url or llm_base_url,
        api_key=api_key,
        dimensions=settings.dimensions,
        batch_size=settings.batch_size,
    )


def hub_cached(model_id: str) -> bool:
    """Is this hub model in huggingface_hub's cache (HF_HUB_CACHE, HF_HOME/hub, or
    ~/.cache/huggingface/hub), without importing huggingface_hub?"""
    if model_id.count("/") != 1:
        return False
    if cache := os.environ.get("HF_HUB_CACHE"):
        root = Path(cache)
    elif home := os.environ.get("HF_HOME"):
        root = Path(home) / "hub"
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "huggingface" / "hub"
    snapshots = root / f"models--{model_id.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(snapshots.iterdir())


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be reached from here (HF_HUB_OFFLINE, no name, no route),
    or None when a connection opens."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host} cannot be reached ({exc.strerror or type(exc).__name__})"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""
