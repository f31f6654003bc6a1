"""Semantic memory as a service: per-scope indexes, their sync schedule, search and health.

The composition root makes one `SemanticMemory`. It never decides who may read what:
callers pass the scopes the policy allowed, and it searches exactly those. Anything that
goes wrong here (sqlite-vec missing, the embedder offline, a sync failing) degrades recall
— to full-text only, or to none — and is said in the log and in `status()`; it never
stops a turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic.embedders import Embedder, EmbedderUnavailable, load_embedder
from memory.semantic.index import INDEX_FILE, ScopeIndex
from memory.semantic.search import Hit, SearchParams, search
from memory.semantic.sqlite import SqliteSupport, probe
from memory.semantic.sync import SyncReport, embed_pending, markdown_files, sync_markdown, sync_transcript
from transcripts import TranscriptReader

log = logging.getLogger(__name__)

EmbedderState = Literal["off", "not loaded", "loading", "ready", "unavailable"]
EmbedderLoader = Callable[[], Awaitable[Embedder | None]]
RETRY_EMBEDDER_SECONDS = 600
QUERY_CACHE = 256


@dataclass(slots=True)
class ScopeHealth:
    last_sync: float | None = None
    last_error: str | None = None
    dirty_since: float | None = None  # activity not yet indexed
    last_report: SyncReport | None = None


@dataclass(slots=True)
class Health:
    runs: int = 0
    failures: int = 0
    last_run: float | None = None
    last_success: float | None = None
    last_error: str | None = None  # "<scope id>: <error>" of the latest failed scope sync
    last_error_at: float | None = None
    scopes: dict[str, ScopeHealth] = field(default_factory=dict)


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds") if ts else None


class SemanticMemory:
    """Indexes every scope's memory and transcript; searches the scopes it is given."""

    def __init__(
        self, paths: HaloPaths, settings: SemanticSettings, *, embedder_loader: EmbedderLoader | None = None
    ) -> None:
        self.paths = paths
        self.settings = settings
        self.support: SqliteSupport = probe()
        self.sync_health = Health()
        self._loader = embedder_loader or (lambda: load_embedder(settings))
        self._embedder: Embedder | None = None
        self.embedder_state: EmbedderState = "off" if settings.embedder == "none" else "not loaded"
        self.embedder_error: str | None = None
        self._embedder_tried = 0.0
        self._embedder_lock = asyncio.Lock()
        self._indexes: dict[str, ScopeIndex] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._queued: dict[str, asyncio.Task[SyncReport | None]] = {}
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._scheduler: AsyncIOScheduler | None = None
        self._problem_said = False
        self._closed = False
        self._load_task: asyncio.Task[Embedder | None] | None = None
        self._ids_by_hash: dict[str, str] = {}  # folder / transcript file name → scope id
        self._known: set[str] | None = None  # scopes with an index; None: scan the disk again
        self._forgotten: set[str] = set()  # purged: not indexed again until new activity

    # --- availability ------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.enabled and self.support.fts5

    @property
    def mode(self) -> str:
        if not self.enabled:
            return "off"
        if self.support.vectors and self._embedder is not None:
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
        if self.embedder_state in ("off", "ready") or not self.support.vectors:
            return self._embedder
        if self.embedder_state == "unavailable" and time.time() - self._embedder_tried < RETRY_EMBEDDER_SECONDS:
            return None
        async with self._embedder_lock:
            if self.embedder_state in ("ready", "off"):
                return self._embedder
            if self.embedder_state == "unavailable" and time.time() - self._embedder_tried < RETRY_EMBEDDER_SECONDS:
                return None
            self.embedder_state = "loading"
            self._embedder_tried = time.time()
            try:
                self._embedder = await self._loader()
            except Exception as exc:
                reason = str(exc) if isinstance(exc, EmbedderUnavailable) else f"{type(exc).__name__}: {exc}"
                self.embedder_state, self.embedder_error = "unavailable", reason
                log.warning(
                    "semantic recall: embedder %s unavailable, using full-text search only: %s",
                    self.settings.embedder,
                    reason,
                )
                return None
            if self._embedder is None:
                self.embedder_state = "off"
            else:
                self.embedder_state, self.embedder_error = "ready", None
                log.info("semantic recall: embedder %s ready", self._embedder.identity.key)
            return self._embedder

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
        """Scopes with a transcript (its first line names the scope; read once per file)."""
        found: set[str] = set()
        if self.paths.transcripts.is_dir():
            for path in self.paths.transcripts.glob("*.jsonl"):
                if path.stem not in self._ids_by_hash:
                    reader = TranscriptReader(path)
                    first = next(reader, None)
                    reader.close()
                    if first is None:
                        continue
                    self._ids_by_hash[path.stem] = first[1].scope_id
                found.add(self._ids_by_hash[path.stem])
        return sorted(found)

    def changed_on_disk(self, scope_id: str) -> bool:
        """Did its transcript grow or a markdown file change since the last sync? Only stats files:
        catches what no turn announced (group messages halo was not addressed in, hand edits)."""
        index = self._index(scope_id, create=False)
        if index is None:
            return self._has_material(scope_id)
        transcript = self.paths.transcript(scope_id)
        size = transcript.stat().st_size if transcript.exists() else 0
        if size != int(index.meta("transcript_offset") or 0):
            return True
        known = index.files()
        current = markdown_files(self.paths.scope_dir(scope_id))
        if known.keys() != current.keys():
            return True
        for source, path in current.items():
            stat = path.stat()
            if (known[source].mtime, known[source].size) != (stat.st_mtime, stat.st_size):
                return True
        return False

    def _has_material(self, scope_id: str) -> bool:
        return self.paths.transcript(scope_id).exists() or bool(markdown_files(self.paths.scope_dir(scope_id)))

    # --- sync --------------------------------------------------------------------

    def mark_active(self, scope_id: str) -> None:
        """Something happened in this scope: the next scheduled run syncs it."""
        self._forgotten.discard(scope_id)
        health = self.sync_health.scopes.setdefault(scope_id, ScopeHealth())
        if health.dirty_since is None:
            health.dirty_since = time.time()

    def request_sync(self, scope_id: str) -> None:
        """Queue a sync of this scope soon (after a distillation, an edit). Never blocks; a
        request while one is queued is folded into it. Needs a running event loop."""
        if not self.enabled:
            return
        self.mark_active(scope_id)
        queued = self._queued.get(scope_id)
        if queued is not None and not queued.done():
            return
        self._queued[scope_id] = asyncio.get_running_loop().create_task(self._run_queued(scope_id))

    async def _run_queued(self, scope_id: str) -> SyncReport | None:
        await asyncio.sleep(0)  # let the caller finish its turn first
        self._queued.pop(scope_id, None)
        return await self.sync_scope(scope_id)

    async def sync_scope(self, scope_id: str) -> SyncReport | None:
        """Sync one scope now; errors are recorded in health, not raised."""
        if not self.enabled or self._closed:
            return None
        lock = self._locks.setdefault(scope_id, asyncio.Lock())
        async with lock:
            if self._closed or scope_id in self._forgotten:
                return None
            health = self.sync_health.scopes.setdefault(scope_id, ScopeHealth())
            started = time.time()
            health.dirty_since = None
            try:
                report = await self._sync(scope_id)
            except Exception as exc:
                health.last_error = f"{type(exc).__name__}: {exc}"
                health.dirty_since = health.dirty_since or started
                self.sync_health.failures += 1
                self.sync_health.last_error = f"{scope_id}: {health.last_error}"
                self.sync_health.last_error_at = time.time()
                log.exception("semantic sync of %s failed", scope_id)
                return None
            health.last_sync, health.last_error, health.last_report = time.time(), None, report
            return report

    async def _sync(self, scope_id: str) -> SyncReport:
        report = SyncReport(scope_id)
        started = time.perf_counter()
        if self._index(scope_id, create=False) is None and not self._has_material(scope_id):
            return report
        index = self._index(scope_id, create=True)
        assert index is not None
        report.rebuilt = await asyncio.to_thread(index.ensure_chunking)
        if report.rebuilt:
            log.info("semantic index %s: rebuilding from its files and transcript", scope_id)
        await asyncio.to_thread(sync_markdown, index, self.paths.scope_dir(scope_id), report)
        await asyncio.to_thread(sync_transcript, index, self.paths.transcript(scope_id), report)
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

    async def sync_all(self, scope_ids: Iterable[str]) -> dict[str, SyncReport | None]:
        """One scheduler run: each scope in turn (one writer, and the CPU stays free for turns)."""
        self.sync_health.runs += 1
        self.sync_health.last_run = time.time()
        results: dict[str, SyncReport | None] = {}
        failures_before = self.sync_health.failures
        for scope_id in scope_ids:
            results[scope_id] = await self.sync_scope(scope_id)
        if self.sync_health.failures == failures_before:
            self.sync_health.last_success = time.time()
        return results

    def active_scopes(self) -> list[str]:
        return sorted(s for s, h in self.sync_health.scopes.items() if h.dirty_since is not None)

    def due_scopes(self) -> list[str]:
        """What a scheduled run syncs: scopes active since the last run — a turn, a request, or
        a change on disk."""
        due = set(self.active_scopes())
        for scope_id in set(self.known_scopes()) | set(self.transcript_scopes()):
            if scope_id not in due and scope_id not in self._forgotten:
                try:
                    if self.changed_on_disk(scope_id):
                        due.add(scope_id)
                except OSError:
                    due.add(scope_id)  # let the sync say what is wrong
        return sorted(due)

    async def _scheduled_run(self) -> None:
        self._known = None  # pick up indexes made or removed outside this process
        await self.sync_all(await asyncio.to_thread(self.due_scopes))

    async def start(self, catch_up: Iterable[str] = ()) -> None:
        """Start the interval job and sync `catch_up` scopes (those with a transcript or an index)
        in the background, so edits made while halo was down are found."""
        self.say_problems()
        if not self.enabled or self._scheduler is not None:
            return
        if self.support.vectors and self.embedder_state != "off":
            self._load_in_background()
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._scheduler.add_job(
            self._scheduled_run,
            IntervalTrigger(minutes=self.settings.sync_interval_minutes),
            id="semantic-sync",
            max_instances=1,
            coalesce=True,
        )
        scopes = sorted(set(catch_up) | set(self.known_scopes()) | set(self.transcript_scopes()))
        self._scheduler.add_job(self.sync_all, args=[scopes], id="semantic-catch-up", max_instances=1)
        self._scheduler.start()

    async def close(self) -> None:
        """Stop scheduling, let a sync in progress finish its scope, close every index."""
        self._closed = True
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        pending = [*self._queued.values(), *([self._load_task] if self._load_task else [])]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for scope_id in list(self._indexes):
            async with self._locks.setdefault(scope_id, asyncio.Lock()):
                self._indexes.pop(scope_id).close()

    async def forget_scope(self, scope_id: str) -> None:
        """Close a scope's index before its folder is purged; no sync recreates it until the scope
        is active again (a sync between this and the purge's delete would write into a doomed folder)."""
        async with self._locks.setdefault(scope_id, asyncio.Lock()):
            index = self._indexes.pop(scope_id, None)
            if index is not None:
                index.close()
            self.sync_health.scopes.pop(scope_id, None)
            self._forgotten.add(scope_id)
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
            "max_mirrored": s.max_mirrored_vectors,
        }
        values.update(overrides)
        return SearchParams(**values)

    def _load_in_background(self) -> None:
        if self._load_task is None or self._load_task.done():
            self._load_task = asyncio.get_running_loop().create_task(self.embedder())

    async def query_vector(self, query: str) -> np.ndarray | None:
        """The query's vector, or None while the embedder is not ready: a turn never waits for a
        model to load (or for the hub to time out); it searches full-text and the load goes on."""
        if self.embedder_state != "ready":
            if self.embedder_state != "off" and self.support.vectors:
                self._load_in_background()
            return None
        embedder = self._embedder
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
        identity = self._embedder.identity.key if vector is not None and self._embedder is not None else None
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
                    transcript = self.paths.transcript(scope_id)
                    size = transcript.stat().st_size if transcript.exists() else 0
                    stats["transcript_lag_bytes"] = max(0, size - int(index.meta("transcript_offset") or 0))
                    entry.update(stats)
                except Exception as exc:  # a status page never fails because one index is odd
                    entry["error"] = str(exc)
            scopes.append(entry)
        embedder: dict[str, Any] = {
            "name": self.settings.embedder,
            "model": self._embedder.identity.model if self._embedder is not None else self.settings.resolved_model,
            "state": self.embedder_state,
            "error": self.embedder_error,
        }
        if self._embedder is not None:
            embedder["dim"] = self._embedder.identity.dim
        job = self._scheduler.get_job("semantic-sync") if self._scheduler is not None else None
        sync = self.sync_health
        return {
            "enabled": self.settings.enabled,
            "mode": self.mode,
            "problem": self.problem(),
            "running": self._scheduler is not None,
            "interval_minutes": self.settings.sync_interval_minutes,
            "next_run": job.next_run_time.isoformat(timespec="seconds") if job and job.next_run_time else None,
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
