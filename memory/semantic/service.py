"""Semantic memory as a service: the one face of per-scope indexes, their sync and search.

The composition root makes one `SemanticMemory`. It never decides who may read what:
callers pass the scopes the policy allowed, and it searches exactly those. Anything that
goes wrong here (sqlite-vec missing, the embedder offline, a sync failing) degrades recall
— to full-text only, or to none — and is said in the log and in `status()`; it never
stops a turn.

It keeps the index handles and does one scope's sync; *when* a scope is synced is
`memory.semantic.schedule`, and the embedder's loading and retries `memory.semantic.lazy_embedder`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic.embedders import Embedder, load_embedder
from memory.semantic.index import INDEX_FILE, ScopeIndex
from memory.semantic.lazy_embedder import EmbedderLoader, EmbedderState, LazyEmbedder
from memory.semantic.schedule import Health, ScopeHealth, SyncSchedule
from memory.semantic.search import Hit, SearchParams, search
from memory.semantic.sqlite import SqliteSupport, probe
from memory.semantic.sync import SyncReport, embed_pending, markdown_files, sync_markdown, sync_transcript
from memory.store import DiskMemory, MemoryStore
from transcripts import TranscriptStore

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds") if ts else None


class SemanticMemory:
    """Indexes every scope's memory and transcript; searches the scopes it is given."""

    def __init__(
        self,
        paths: HaloPaths,
        settings: SemanticSettings,
        *,
        embedder_loader: EmbedderLoader | None = None,
        transcripts: TranscriptStore | None = None,
        memory: MemoryStore | None = None,
    ) -> None:
        self.paths = paths
        # what is indexed of each conversation (on PostgreSQL, the lines this process holds)
        self.transcripts = transcripts or TranscriptStore(paths.transcripts)
        self.memory: MemoryStore = memory or DiskMemory(paths.home)  # the markdown it indexes
        self.settings = settings
        self.support: SqliteSupport = probe()
        self._embedder = LazyEmbedder(
            settings.embedder, embedder_loader or (lambda: load_embedder(settings)), vectors=self.support.vectors
        )
        self._schedule = SyncSchedule(
            enabled=self.enabled,
            interval_minutes=settings.sync_interval_minutes,
            sync=self._sync,
            scopes=self._scopes_on_disk,
            changed=self.changed_on_disk,
            before_run=self._rescan,
        )
        self._problem_said = False
        self._indexes: dict[str, ScopeIndex] = {}
        self._ids_by_hash: dict[str, str] = {}  # folder / transcript file name → scope id
        self._known: set[str] | None = None  # scopes with an index; None: scan the disk again

    # --- availability ------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.enabled and self.support.fts5

    @property
    def embedder_state(self) -> EmbedderState:
        return self._embedder.state

    @property
    def embedder_error(self) -> str | None:
        return self._embedder.error

    @property
    def sync_health(self) -> Health:
        return self._schedule.health

    @property
    def mode(self) -> str:
        if not self.enabled:
            return "off"
        if self.support.vectors and self._embedder.loaded is not None:
            return "hybrid"
        if self.support.vectors and self.embedder_state in ("not loaded", "loading"):
            return "starting"  # the embedder loads on first use; until then, full-text
        return "full-text only"

    def say_problems(self) -> None:
        """Once, at start: what is missing and what recall does without it."""
        if self._problem_said:
            return
        self._problem_said = True
        if not self.settings.enabled:
            log.info("semantic recall is disabled (memory.semantic.enabled: false)")
        elif self.support.problem:
            log.warning("semantic recall: %s", self.support.problem)

    async def embedder(self) -> Embedder | None:
        """The loaded embedder, loading it the first time (and retrying a failed one now and then)."""
        return await self._embedder.get()

    # --- indexes -----------------------------------------------------------------

    def index_path(self, scope_id: str) -> Any:
        return self.paths.scope_dir(scope_id) / INDEX_FILE

    def _index(self, scope_id: str, create: bool) -> ScopeIndex | None:
        index = self._indexes.get(scope_id)
        if index is None:
            path = self.index_path(scope_id)
            if not create and not path.exists():
                return None
            index = self._indexes[scope_id] = ScopeIndex(path, scope_id)
            if self._known is not None:
                self._known.add(scope_id)
        return index

    def known_scopes(self) -> list[str]:
        """Scopes with an index on disk. Asked every turn, so the disk is scanned only when the
        cache was dropped (start, each scheduled run); indexes this process creates are added."""
        if self._known is None:
            self._known = self._scan_known()
        return sorted(self._known | set(self._indexes))

    def _scan_known(self) -> set[str]:
        """Each index records its scope id; it is read once per folder."""
        found = set(self._indexes)
        if self.paths.scopes.is_dir():
            for path in self.paths.scopes.glob(f"*/{INDEX_FILE}"):
                folder = path.parent.name
                if folder not in self._ids_by_hash:
                    scope_id = ScopeIndex.stored_scope_id(path)
                    if scope_id is None:
                        continue
                    self._ids_by_hash[folder] = scope_id
                found.add(self._ids_by_hash[folder])
        return found

    def transcript_scopes(self) -> list[str]:
        """Scopes with a transcript."""
        return self.transcripts.scope_ids()

    def changed_on_disk(self, scope_id: str) -> bool:
        """Did its transcript grow or a markdown file change since the last sync? Only stats files:
        catches what no turn announced (group messages halo was not addressed in, hand edits)."""
        index = self._index(scope_id, create=False)
        if index is None:
            return self._has_material(scope_id)
        if self.transcripts.size(scope_id) != int(index.meta("transcript_offset") or 0):
            return True
        known = index.files()
        current = markdown_files(self.memory, scope_id)
        if known.keys() != current.keys():
            return True
        for source, relative in current.items():
            stamp = self.memory.stamp(relative)
            if stamp is None or (known[source].mtime, known[source].size) != (stamp.mtime, stamp.size):
                return True
        return False

    def _has_material(self, scope_id: str) -> bool:
        return self.transcripts.exists(scope_id) or bool(markdown_files(self.memory, scope_id))

    def _scopes_on_disk(self) -> set[str]:
        return set(self.known_scopes()) | set(self.transcript_scopes())

    def _rescan(self) -> None:
        self._known = None  # pick up indexes made or removed outside this process

    # --- sync (when: memory.semantic.schedule) -----------------------------------

    def mark_active(self, scope_id: str) -> None:
        """Something happened in this scope: the next scheduled run syncs it."""
        self._schedule.mark_active(scope_id)

    def request_sync(self, scope_id: str) -> None:
        """Queue a sync of this scope soon (after a distillation, an edit). Never blocks; a
        request while one is queued is folded into it. Needs a running event loop."""
        self._schedule.request_sync(scope_id)

    async def sync_scope(self, scope_id: str) -> SyncReport | None:
        """Sync one scope now; errors are recorded in health, not raised."""
        return await self._schedule.sync_scope(scope_id)

    async def sync_all(self, scope_ids: Iterable[str]) -> dict[str, SyncReport | None]:
        """One scheduler run: each scope in turn (one writer, and the CPU stays free for turns)."""
        return await self._schedule.sync_all(scope_ids)

    def active_scopes(self) -> list[str]:
        return self._schedule.active_scopes()

    def due_scopes(self) -> list[str]:
        """What a scheduled run syncs: scopes active since the last run — a turn, a request, or
        a change on disk."""
        return self._schedule.due_scopes()

    async def _sync(self, scope_id: str) -> SyncReport:
        """One scope's sync (the schedule holds its lock and records the outcome)."""
        report = SyncReport(scope_id)
        started = time.perf_counter()
        await self.transcripts.ready(scope_id)  # on PostgreSQL: held here before it is read (else it looks empty)
        await self.memory.ready(scope_id)  # and its markdown memory's rows
        if self._index(scope_id, create=False) is None and not self._has_material(scope_id):
            return report
        index = self._index(scope_id, create=True)
        assert index is not None
        report.rebuilt = await asyncio.to_thread(index.ensure_chunking)
        if report.rebuilt:
            log.info("semantic index %s: rebuilding from its files and transcript", scope_id)
        await asyncio.to_thread(sync_markdown, index, self.memory, report)
        await asyncio.to_thread(sync_transcript, index, self.transcripts, report)
        embedder = await self.embedder()
        if embedder is not None and index.support.vectors:
            await embed_pending(index, embedder, report, batch=max(self.settings.batch_size, 64))
        await asyncio.to_thread(index.collect_garbage)
        report.seconds = time.perf_counter() - started
        if report.rebuilt:
            log.info(
                "semantic index %s: rebuilt (%d chunks embedded in %.1fs)", scope_id, report.embedded, report.seconds
            )
        return report

    async def start(self, catch_up: Iterable[str] = ()) -> None:
        """Start the interval job and sync `catch_up` scopes (those with a transcript or an index)
        in the background, so edits made while halo was down are found."""
        self.say_problems()
        if not self.enabled or self._schedule.running:
            return
        self._embedder.load_in_background()
        self._schedule.start(sorted(set(catch_up) | self._scopes_on_disk()))

    async def close(self) -> None:
        """Stop scheduling, let a sync in progress finish its scope, close every index."""
        await self._schedule.close()
        await self._embedder.close()
        for scope_id in list(self._indexes):
            async with self._schedule.lock(scope_id):
                self._indexes.pop(scope_id).close()

    async def forget_scope(self, scope_id: str) -> None:
        """Close a scope's index before its folder is purged; no sync recreates it until the scope
        is active again (a sync between this and the purge's delete would write into a doomed folder)."""
        async with self._schedule.lock(scope_id):
            index = self._indexes.pop(scope_id, None)
            if index is not None:
                index.close()
            self._schedule.forget(scope_id)
            if self._known is not None:
                self._known.discard(scope_id)

    # --- search ------------------------------------------------------------------

    def params(self, limit: int | None = None, **overrides: Any) -> SearchParams:
        s = self.settings
        values: dict[str, Any] = {
            "limit": limit or s.top_k,
            "min_score": s.min_score,
            "vector_weight": s.vector_weight,
            "half_life_days": s.half_life_days,
            "mmr_lambda": s.mmr_lambda,
            "window_turns": s.window_turns,
            "day_weight": s.day_weight,
            "max_mirrored": s.max_mirrored_vectors,
        }
        values.update(overrides)
        return SearchParams(**values)

    async def query_vector(self, query: str) -> np.ndarray | None:
        """The query's vector, or None while the embedder is not ready: a turn never waits for a
        model to load (or for the hub to time out); it searches full-text and the load goes on."""
        return await self._embedder.query_vector(query)

    async def search(
        self, scope_ids: Iterable[str], query: str, *, limit: int | None = None, params: SearchParams | None = None
    ) -> list[Hit]:
        """Hybrid search over exactly these scopes (the caller has asked the policy), merged by score."""
        if not self.enabled or not query.strip():
            return []
        indexes = [i for s in dict.fromkeys(scope_ids) if (i := self._index(s, create=False)) is not None]
        if not indexes:
            return []
        vector = await self.query_vector(query)
        loaded = self._embedder.loaded
        identity = loaded.identity.key if vector is not None and loaded is not None else None
        chosen = params or self.params(limit)

        def run() -> list[Hit]:
            # an index whose vectors come from another model is searched by text alone
            same = [i for i in indexes if identity is not None and i.meta("embedder") == identity]
            other = [i for i in indexes if i not in same]
            hits = search(same, query, vector, chosen) if same else []
            if other:
                hits += search(other, query, None, chosen)
                hits = sorted(hits, key=lambda h: h.score, reverse=True)[: chosen.limit]
            return hits

        return await asyncio.to_thread(run)

    # --- health ------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why recall is less than hybrid, in a sentence, or None."""
        if not self.settings.enabled:
            return None
        if self.support.problem:
            return self.support.problem
        if self.embedder_state == "unavailable":
            return f"embedder unavailable, full-text search only: {self.embedder_error}"
        return None

    def status(self) -> dict[str, Any]:
        """Scheduler health (runs, failures, last success, last error), mode, embedder, and
        per-scope lag (seconds since unsynced activity, transcript bytes not yet indexed)."""
        now = time.time()
        scopes = []
        for scope_id in sorted(set(self.sync_health.scopes) | set(self._indexes)):
            health = self.sync_health.scopes.get(scope_id, ScopeHealth())
            index = self._indexes.get(scope_id)
            entry: dict[str, Any] = {
                "scope_id": scope_id,
                "last_sync": _iso(health.last_sync),
                "last_error": health.last_error,
                "lag_seconds": round(now - health.dirty_since, 1) if health.dirty_since else 0.0,
            }
            if index is not None:
                try:
                    stats = index.stats()
                    size = self.transcripts.size(scope_id)
                    stats["transcript_lag_bytes"] = max(0, size - int(index.meta("transcript_offset") or 0))
                    entry.update(stats)
                except Exception as exc:  # a status page never fails because one index is odd
                    entry["error"] = str(exc)
            scopes.append(entry)
        loaded = self._embedder.loaded
        embedder: dict[str, Any] = {
            "name": self.settings.embedder,
            "model": loaded.identity.model if loaded is not None else self.settings.resolved_model,
            "state": self.embedder_state,
            "error": self.embedder_error,
        }
        if loaded is not None:
            embedder["dim"] = loaded.identity.dim
        next_run = self._schedule.next_run()
        sync = self.sync_health
        return {
            "enabled": self.settings.enabled,
            "mode": self.mode,
            "problem": self.problem(),
            "running": self._schedule.running,
            "interval_minutes": self.settings.sync_interval_minutes,
            "next_run": next_run.isoformat(timespec="seconds") if next_run else None,
            "runs": sync.runs,
            "failures": sync.failures,
            "last_run": _iso(sync.last_run),
            "last_success": _iso(sync.last_success),
            "last_error": sync.last_error,
            "last_error_at": _iso(sync.last_error_at),
            "sqlite": self.support.as_dict(),
            "embedder": embedder,
            "scopes": scopes,
        }
