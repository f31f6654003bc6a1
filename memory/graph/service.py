"""`GraphMemory`: graph memory's one face to halo — start, ingest quiet scopes, search, purge.

Built even when off, so `/status` can say why ("disabled", the install hint, the server
that would not start). Nothing here raises into a chat: a search that fails returns
nothing and is logged; ingestion failures back off and retry (memory.graph.ingest). The
caller decides which scopes a turn may read (the policy, in halo); this service searches
the groups it is given, one group at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from config.paths import HaloPaths
from config.settings import GraphSettings, LLMSettings
from memory.graph import group_id, missing_reason
from memory.scope_files import ScopeFiles
from memory.state import JobStates
from transcripts import TranscriptStore

if TYPE_CHECKING:
    from memory.graph.ingest import GraphIngestion
    from memory.graph.server import FalkorServer
    from memory.graph.store import EmbedderSource, GraphEntity, GraphFact, GraphStore, UsageSink

log = logging.getLogger(__name__)


class GraphMemory:
    def __init__(
        self,
        settings: GraphSettings,
        llm: LLMSettings,
        paths: HaloPaths,
        files: ScopeFiles,
        transcripts: TranscriptStore,
        state: JobStates,
        embedder: EmbedderSource,
        *,
        names: Callable[[str | None], str],
        may_write: Callable[[str | None, str], bool],
        scope_label: Callable[[str], str] = lambda scope_id: "a chat",
        on_usage: UsageSink | None = None,  # each ingestion call's reported usage (halo's usage table)
    ) -> None:
        self.settings = settings
        self.llm = llm
        self.paths = paths
        self.files = files
        self.transcripts = transcripts
        self.state = state
        self.embedder = embedder
        self.names = names
        self.may_write = may_write
        self.scope_label = scope_label
        self.on_usage = on_usage
        self.server: FalkorServer | None = None
        self.store: GraphStore | None = None
        self.ingestion: GraphIngestion | None = None
        self.reason: str | None = self._why_off()

    @property
    def data_dir(self):  # type: ignore[no-untyped-def]
        return self.paths.home / "graph"

    def _why_off(self) -> str | None:
        if not self.settings.enabled:
            return "disabled (memory.graph.enabled is false)"
        if (missing := missing_reason()) is not None:
            return missing
        if self.llm.provider not in ("openai", "openai-compatible"):
            return f"needs an OpenAI-compatible llm.provider for ingestion (it is {self.llm.provider})"
        return None

    @property
    def enabled(self) -> bool:
        """Running: the store answers and ingestion is wired."""
        return self.store is not None and self.reason is None

    def say_problems(self) -> None:
        if self.settings.enabled and self.reason:
            log.warning("graph memory is off: %s", self.reason)

    async def start(self) -> None:
        """Start (or connect to) FalkorDB, then pick up scopes a restart left behind.
        Never raises: a failure turns graph memory off and says why in `status()`."""
        if self.reason is not None:
            self.say_problems()
            return
        from memory.graph.ingest import GraphIngestion, TokenBudget
        from memory.graph.server import FalkorServer
        from memory.graph.store import GraphStore, ModelEndpoint

        try:
            if await self.embedder() is None:
                self.reason = "needs an embedder: memory.semantic.embedder is none or could not be loaded"
                log.warning("graph memory is off: %s", self.reason)
                return
        except Exception as exc:
            self.reason = f"needs an embedder, and it failed to load: {type(exc).__name__}: {exc}"
            log.warning("graph memory is off: %s", self.reason)
            return
        try:
            url = self.settings.url
            if url is None:
                self.server = FalkorServer(self.data_dir / "falkordb")
                url = await self.server.start()
            endpoint = ModelEndpoint(
                base_url=self.llm.base_url,
                api_key=self.llm.resolved_api_key(),
                model=self.llm.cheap_model or self.llm.model,
                max_tokens=self.settings.max_output_tokens,
                timeout_seconds=self.llm.timeout_seconds,
            )
            store = GraphStore(url, endpoint, self.embedder, self.on_usage)
            await store.ping()
        except Exception as exc:
            self.reason = f"FalkorDB unavailable: {type(exc).__name__}: {exc}"
            log.warning("graph memory is off: %s", self.reason)
            if self.server is not None:
                await self.server.stop()
                self.server = None
            return
        self.store = store
        self.ingestion = GraphIngestion(
            store,
            self.files,
            self.transcripts,
            self.state,
            TokenBudget(self.data_dir / "usage.json", self.settings.daily_token_budget),
            self.data_dir / "ingested",
            names=self.names,
            may_write=self.may_write,
            scope_label=self.scope_label,
        )
        for scope_id in await asyncio.to_thread(self.ingestion.backlog):
            self.ingestion.request(scope_id)

    def scope_quiet(self, scope_id: str) -> None:
        """The quiet-scope trigger (MemoryService.on_quiet)."""
        if self.ingestion is not None:
            self.ingestion.request(scope_id)

    def known_scopes(self) -> list[str]:
        return self.ingestion.scopes() if self.ingestion is not None else []

    async def search(self, scope_ids: Sequence[str], query: str, limit: int | None = None) -> list[GraphFact]:
        """Facts from the graphs of `scope_ids` (already allowed by the policy), each group
        searched on its own, with the history of each current fact. [] when off or failing."""
        if self.store is None or not query.strip():
            return []
        found: list[GraphFact] = []
        for scope_id in scope_ids:
            group = group_id(scope_id)
            try:
                if not await self.store.exists(group):
                    continue
                found += await self.store.search(group, query, limit or self.settings.search_limit)
            except Exception:
                log.exception("graph search of %s failed", scope_id)
        return found

    async def history(self, facts: Sequence[GraphFact]) -> dict[str, list[GraphFact]]:
        """For each current fact, every fact between the same two entities (what it replaced)."""
        if self.store is None:
            return {}
        out: dict[str, list[GraphFact]] = {}
        for fact in facts:
            if fact.current:
                try:
                    out[fact.uuid] = await self.store.history(fact.group, fact)
                except Exception:
                    log.exception("graph history lookup failed")
        return out

    async def contents(self, scope_id: str) -> tuple[list[GraphEntity], list[GraphFact]]:
        if self.store is None:
            return [], []
        return await self.store.contents(group_id(scope_id))

    async def purge(self, scope_id: str) -> bool:
        if self.ingestion is None:
            return False
        return await self.ingestion.purge(scope_id)

    def status(self) -> dict[str, Any]:
        base: dict[str, Any] = {"enabled": self.enabled, "reason": self.reason}
        if self.server is not None:
            base["server"] = {"embedded": True, "port": self.server.port, "data_dir": str(self.server.data_dir)}
        elif self.settings.url:
            base["server"] = {"embedded": False}
        if self.ingestion is not None:
            base.update(self.ingestion.status())
        return base

    async def close(self) -> None:
        if self.ingestion is not None:
            await self.ingestion.close()
        if self.store is not None:
            try:
                await self.store.close()
            except Exception:
                log.exception("closing the graph store failed")
            self.store = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
