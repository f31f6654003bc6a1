"""When semantic indexes are synced: an interval job, syncs requested after a change, and their health.

A scope is due when something happened in it (a turn, a request) or its files changed on
disk since its last sync. Every `interval` minutes one run syncs the due scopes one after
another (one writer, and the CPU stays free for turns). A requested sync runs soon, in the
background; requests while one is queued fold into it. Each scope has one lock, so at most
one sync of it runs at a time, and a scope's index is closed or forgotten only between
syncs. What a sync does is the index side's business (`SemanticMemory`): this module only
calls it, and counts runs and failures for `/status`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from memory.semantic.sync import SyncReport

log = logging.getLogger(__name__)

SYNC_JOB = "semantic-sync"


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


class SyncSchedule:
    """Decides when each scope's index is synced; `sync` does one scope (and raises on failure).

    `scopes` lists every scope that has an index or a transcript, `changed` says whether a
    scope's files changed since its last sync (it may raise OSError), and `before_run` is
    called as a scheduled run starts (to drop cached scope lists). A disabled schedule syncs
    nothing."""

    def __init__(
        self,
        *,
        enabled: bool,
        interval_minutes: float,
        sync: Callable[[str], Awaitable[SyncReport]],
        scopes: Callable[[], Iterable[str]],
        changed: Callable[[str], bool],
        before_run: Callable[[], None],
    ) -> None:
        self.enabled = enabled
        self.interval_minutes = interval_minutes
        self.health = Health()
        self._sync = sync
        self._scopes = scopes
        self._changed = changed
        self._before_run = before_run
        self._locks: dict[str, asyncio.Lock] = {}
        self._queued: dict[str, asyncio.Task[SyncReport | None]] = {}
        self._forgotten: set[str] = set()  # purged: not synced again until new activity
        self._scheduler: AsyncIOScheduler | None = None
        self._closed = False

    def lock(self, scope_id: str) -> asyncio.Lock:
        """Held while the scope's index is written: a sync, a close, a forget."""
        return self._locks.setdefault(scope_id, asyncio.Lock())

    # --- what is due -----------------------------------------------------------------

    def mark_active(self, scope_id: str) -> None:
        """Something happened in this scope: the next scheduled run syncs it."""
        self._forgotten.discard(scope_id)
        health = self.health.scopes.setdefault(scope_id, ScopeHealth())
        if health.dirty_since is None:
            health.dirty_since = time.time()

    def active_scopes(self) -> list[str]:
        return sorted(s for s, h in self.health.scopes.items() if h.dirty_since is not None)

    def due_scopes(self) -> list[str]:
        """What a scheduled run syncs: scopes active since the last run — a turn, a request, or
        a change on disk."""
        due = set(self.active_scopes())
        for scope_id in set(self._scopes()):
            if scope_id not in due and scope_id not in self._forgotten:
                try:
                    if self._changed(scope_id):
                        due.add(scope_id)
                except OSError:
                    due.add(scope_id)  # let the sync say what is wrong
        return sorted(due)

    def forget(self, scope_id: str) -> None:
        """The scope is being purged: drop its health and leave it alone until it is active again.
        Call it holding `lock(scope_id)`."""
        self.health.scopes.pop(scope_id, None)
        self._forgotten.add(scope_id)

    # --- syncing ---------------------------------------------------------------------

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
        async with self.lock(scope_id):
            if self._closed or scope_id in self._forgotten:
                return None
            health = self.health.scopes.setdefault(scope_id, ScopeHealth())
            started = time.time()
            health.dirty_since = None
            try:
                report = await self._sync(scope_id)
            except Exception as exc:
                health.last_error = f"{type(exc).__name__}: {exc}"
                health.dirty_since = health.dirty_since or started
                self.health.failures += 1
                self.health.last_error = f"{scope_id}: {health.last_error}"
                self.health.last_error_at = time.time()
                log.exception("semantic sync of %s failed", scope_id)
                return None
            health.last_sync, health.last_error, health.last_report = time.time(), None, report
            return report

    async def sync_all(self, scope_ids: Iterable[str]) -> dict[str, SyncReport | None]:
        """One scheduler run: each scope in turn (one writer, and the CPU stays free for turns)."""
        self.health.runs += 1
        self.health.last_run = time.time()
        results: dict[str, SyncReport | None] = {}
        failures_before = self.health.failures
        try:
            for scope_id in scope_ids:
                results[scope_id] = await self.sync_scope(scope_id)
        except asyncio.CancelledError:
            if not self._closed:
                raise
            return results  # halo is closing (`halo chat` at end of input): the rest syncs next start
        if self.health.failures == failures_before:
            self.health.last_success = time.time()
        return results

    async def _scheduled_run(self) -> None:
        self._before_run()
        await self.sync_all(await asyncio.to_thread(self.due_scopes))

    # --- lifecycle -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def next_run(self) -> datetime | None:
        job = self._scheduler.get_job(SYNC_JOB) if self._scheduler is not None else None
        return job.next_run_time if job is not None else None

    def start(self, catch_up: list[str]) -> None:
        """Start the interval job, and sync the `catch_up` scopes once in the background."""
        if not self.enabled or self._scheduler is not None:
            return
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._scheduler.add_job(
            self._scheduled_run,
            IntervalTrigger(minutes=self.interval_minutes),
            id=SYNC_JOB,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,  # late on a busy loop is still due (APScheduler's default: 1 s, then skipped)
        )
        self._scheduler.add_job(
            self.sync_all, args=[catch_up], id="semantic-catch-up", max_instances=1, misfire_grace_time=None
        )
        self._scheduler.start()

    async def close(self) -> None:
        """Stop scheduling and cancel queued syncs; a sync in progress finishes its scope."""
        self._closed = True
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        pending = list(self._queued.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
