"""The embedder's lifecycle: loaded on first use or in the background, never waited for by a turn.

Loading a model (or reaching an embeddings API) can take seconds or fail. Until it is ready,
a query gets no vector and recall searches full-text; a failed load is tried again after
RETRY_EMBEDDER_SECONDS. The vectors of recent queries are kept, as a turn's query is often
asked again (recall, then a tool's search).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from memory.semantic.embedders import Embedder, EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

EmbedderState = Literal["off", "not loaded", "loading", "ready", "unavailable"]
EmbedderLoader = Callable[[], Awaitable[Embedder | None]]
RETRY_EMBEDDER_SECONDS = 600
QUERY_CACHE = 256


class LazyEmbedder:
    """The configured embedder (`name`), loaded by `loader` when first needed.

    `vectors` is False when SQLite cannot store vectors: then no model is ever loaded."""

    def __init__(self, name: str, loader: EmbedderLoader, *, vectors: bool) -> None:
        self.name = name
        self.vectors = vectors
        self.state: EmbedderState = "off" if name == "none" else "not loaded"
        self.error: str | None = None
        self.loaded: Embedder | None = None
        self._loader = loader
        self._tried = 0.0
        self._lock = asyncio.Lock()
        self._load_task: asyncio.Task[Embedder | None] | None = None
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    async def get(self) -> Embedder | None:
        """The loaded embedder, loading it the first time (and retrying a failed one now and then)."""
        if self.state in ("off", "ready") or not self.vectors:
            return self.loaded
        if self._waiting_to_retry():
            return None
        async with self._lock:
            if self.state in ("ready", "off"):
                return self.loaded
            if self._waiting_to_retry():
                return None
            self.state = "loading"
            self._tried = time.time()
            try:
                self.loaded = await self._loader()
            except Exception as exc:
                reason = str(exc) if isinstance(exc, EmbedderUnavailable) else f"{type(exc).__name__}: {exc}"
                self.state, self.error = "unavailable", reason
                log.warning(
                    "semantic recall: embedder %s unavailable, using full-text search only: %s", self.name, reason
                )
                return None
            if self.loaded is None:
                self.state = "off"
            else:
                self.state, self.error = "ready", None
                log.info("semantic recall: embedder %s ready", self.loaded.identity.key)
            return self.loaded

    def _waiting_to_retry(self) -> bool:
        return self.state == "unavailable" and time.time() - self._tried < RETRY_EMBEDDER_SECONDS

    def load_in_background(self) -> None:
        """Start loading (unless it is off, or a load is under way) without waiting for it."""
        if self.state == "off" or not self.vectors:
            return
        if self._load_task is None or self._load_task.done():
            self._load_task = asyncio.get_running_loop().create_task(self.get())

    async def query_vector(self, query: str) -> np.ndarray | None:
        """The query's vector, or None while the embedder is not ready: a turn never waits for a
        model to load (or for the hub to time out); it searches full-text and the load goes on."""
        if self.state != "ready":
            self.load_in_background()
            return None
        embedder = self.loaded
        if embedder is None:
            return None
        key = f"{embedder.identity.key}\0{query}"
        cached = self._query_vectors.get(key)
        if cached is None:
            cached = (await embedder.embed([query]))[0]
            self._query_vectors[key] = cached
            if len(self._query_vectors) > QUERY_CACHE:
                self._query_vectors.popitem(last=False)
        else:
            self._query_vectors.move_to_end(key)
        return cached

    async def close(self) -> None:
        """Stop a load in progress."""
        if self._load_task is not None:
            self._load_task.cancel()
            await asyncio.gather(self._load_task, return_exceptions=True)
