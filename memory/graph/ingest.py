"""Background ingestion: a quiet scope's new facts and signal turns become episodes of its group.

One writer per group (Graphiti duplicates entities when two episodes of one group run at
once); groups run side by side. The watermark (a transcript byte offset in the
`memory_jobs` table, job "graph") and the set of MEMORY.md facts already sent move only
after an episode is in, so a model outage or a Graphiti error loses nothing: the scope backs
off (30 s doubling to 10 min) and is retried from the watermark. Tokens are counted per day
against `memory.graph.daily_token_budget`; an episode starts only if its expected cost fits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.graph import group_id
from memory.graph.episodes import Episode, build_episodes, fact_items
from memory.graph.store import GraphStore, TokenMeter
from memory.redact import redact
from memory.scope_files import ScopeFiles
from memory.scope_timers import ScopeTimers
from memory.state import JobStates
from transcripts import TranscriptStore

log = logging.getLogger(__name__)

DEFAULT_EPISODE_TOKENS = 6000  # measured: 5-6k prompt tokens per episode before we know better


@dataclass
class IngestResult:
    scope_id: str
    episodes: int = 0
    tokens: int = 0
    stopped: str | None = None  # "budget" or the error that stopped the run


class TokenBudget:
    """Tokens spent on graph ingestion per UTC day, kept in HALO_HOME/graph/usage.json."""

    def __init__(self, path: Path, per_day: int, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.per_day = per_day
        self.clock = clock
        self._data = self._load()
        self._reserved = 0  # expected cost of episodes running now (groups run side by side)

    def _today(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).date().isoformat()

    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    @property
    def spent_today(self) -> int:
        return int(self._data.get("days", {}).get(self._today(), {}).get("tokens", 0))

    @property
    def per_episode(self) -> int:
        """The average cost of an episode so far (what the next one is expected to cost)."""
        episodes, tokens = self._data.get("episodes", 0), self._data.get("tokens", 0)
        return round(tokens / episodes) if episodes else DEFAULT_EPISODE_TOKENS

    def reserve(self) -> int | None:
        """Reserve an episode's expected cost; None when it would not fit in today's budget.
        Episodes of different groups run at once: reserving keeps them all inside it."""
        cost = self.per_episode
        if self.spent_today + self._reserved + cost > self.per_day:
            return None
        self._reserved += cost
        return cost

    def release(self, reserved: int) -> None:
        self._reserved -= reserved

    def spend(self, tokens: int, *, episode: bool = True) -> None:
        """Count `tokens` for today; `episode` False for a failed one (it does not set the average)."""
        days = self._data.setdefault("days", {})
        today = days.setdefault(self._today(), {"tokens": 0, "episodes": 0})
        today["tokens"] += tokens
        today["episodes"] += int(episode)
        for old in sorted(days)[:-14]:  # two weeks are enough for /status
            del days[old]
        if episode:
            self._data["episodes"] = self._data.get("episodes", 0) + 1
            self._data["tokens"] = self._data.get("tokens", 0) + tokens
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._data))
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    def status(self) -> dict[str, Any]:
        return {
            "daily_token_budget": self.per_day,
            "tokens_today": self.spent_today,
            "tokens_per_episode": self.per_episode,
            "episodes_total": self._data.get("episodes", 0),
        }


class GraphIngestion:
    """Runs scopes' ingestion in the background, one writer per group."""

    def __init__(
        self,
        store: GraphStore,
        files: ScopeFiles,
        transcripts: TranscriptStore,
        state: JobStates,
        budget: TokenBudget,
        sent_dir: Path,
        *,
        names: Callable[[str | None], str],
        may_write: Callable[[str | None, str], bool],
        scope_label: Callable[[str], str] = lambda scope_id: "a chat",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.files = files
        self.transcripts = transcripts
        self.state = state
        self.budget = budget
        self.sent_dir = sent_dir
        self.names = names
        self.may_write = may_write
        self.scope_label = scope_label
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._again: set[str] = set()
        self._timers = ScopeTimers()  # retries after a backoff, and the runs in the background
        self.idle = asyncio.Event()
        self.idle.set()

    # --- triggering -------------------------------------------------------------------

    def request(self, scope_id: str) -> None:
        """A scope went quiet: ingest it in the background (again after a run in progress)."""
        lock = self._locks.setdefault(group_id(scope_id), asyncio.Lock())
        if lock.locked():
            self._again.add(scope_id)
            return
        self.idle.clear()
        self._timers.spawn(self._background(scope_id)).add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        if not self._timers.tasks:
            self.idle.set()

    async def _background(self, scope_id: str) -> None:
        while True:
            state = await asyncio.to_thread(self.state.get, scope_id, "graph")
            if state.waiting(self.clock()):
                self._retry_at(scope_id, state.next_retry or self.clock())
                return
            try:
                await self.run(scope_id)
            except Exception:  # a background job must never take the loop down
                log.exception("graph ingestion of %s failed", scope_id)
            if scope_id not in self._again:
                return
            self._again.discard(scope_id)

    def _retry_at(self, scope_id: str, at: float) -> None:
        self._timers.call_later(scope_id, max(at - self.clock(), 0.0), self.request)

    def backlog(self) -> list[str]:
        """Scopes with transcript past their graph watermark (work a restart left)."""
        states = {s.scope_id: s for s in self.state.all() if s.job == "graph"}
        waiting = []
        for scope_id in self.transcripts.scope_ids():
            state = states.get(scope_id)
            if state is None or state.offset < self.transcripts.size(scope_id):
                waiting.append(scope_id)
        return waiting

    # --- the work -------------------------------------------------------------------

    async def run(self, scope_id: str) -> IngestResult:
        """Ingest `scope_id` now, waiting for a run of its group in progress."""
        async with self._locks.setdefault(group_id(scope_id), asyncio.Lock()):
            return await self._run(scope_id)

    async def _run(self, scope_id: str) -> IngestResult:
        group = group_id(scope_id)
        result = IngestResult(scope_id)
        await self.transcripts.ready(scope_id)  # on PostgreSQL: held here before it is read
        state = await asyncio.to_thread(self.state.get, scope_id, "graph")
        episodes = await asyncio.to_thread(self._episodes, scope_id, state.offset)
        offset = state.offset
        for episode in episodes:
            if not episode.lines:
                continue
            reserved = self.budget.reserve()
            if reserved is None:
                result.stopped = "budget"
                log.info("graph ingestion of %s waits: today's token budget is spent", scope_id)
                break
            meter = TokenMeter()
            try:
                await self.store.add_episode(
                    group,
                    name=f"{episode.day.isoformat()} {self.scope_label(scope_id)}",
                    body=episode.body,
                    when=episode.when,
                    source=self.scope_label(scope_id),
                    meter=meter,
                )
            except Exception as exc:
                self.budget.release(reserved)
                self.budget.spend(meter.total, episode=False)  # what the failed calls cost still counts
                result.tokens += meter.total
                error = redact(f"{type(exc).__name__}: {exc}")[:300]
                result.stopped = error
                log.warning("graph ingestion of %s failed, retried later from the watermark: %s", scope_id, error)
                failed = await asyncio.to_thread(self._fail, scope_id, error)
                if failed.next_retry is not None:
                    self._retry_at(scope_id, failed.next_retry)
                return result
            self.budget.release(reserved)
            self.budget.spend(meter.total)
            result.episodes += 1
            result.tokens += meter.total
            offset = max(offset, episode.end_offset or offset)
            await asyncio.to_thread(self._commit, scope_id, offset, episode)
        if result.stopped is None:
            end = await asyncio.to_thread(self._transcript_end, scope_id, state.offset)
            await asyncio.to_thread(self._commit, scope_id, max(offset, end), None)
        return result

    def _transcript_end(self, scope_id: str, offset: int) -> int:
        if not self.transcripts.exists(scope_id):
            return offset
        reader = self.transcripts.read_from(scope_id, offset)
        for _ in reader:
            pass
        return reader.next_offset

    def _episodes(self, scope_id: str, offset: int) -> list[Episode]:
        sent = self._sent(scope_id)
        facts = fact_items(self.files.memory_text(scope_id), sent)
        if self.transcripts.exists(scope_id):
            reader = self.transcripts.read_from(scope_id, offset)
            lines = list(reader)
            end = reader.next_offset
        else:
            lines, end = [], offset
        return build_episodes(
            lines,
            end,
            facts,
            names=self.names,
            keep=lambda line: line.for_memory and self.may_write(line.speaker, scope_id),
        )

    def _sent_path(self, scope_id: str) -> Path:
        return self.sent_dir / f"{group_id(scope_id)}.json"

    def _sent(self, scope_id: str) -> set[str]:
        try:
            return set(json.loads(self._sent_path(scope_id).read_text()))
        except (OSError, ValueError):
            return set()

    def _commit(self, scope_id: str, offset: int, episode: Episode | None) -> None:
        if episode is not None and episode.fact_keys:
            sent = self._sent(scope_id) | set(episode.fact_keys)
            path = self._sent_path(scope_id)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(sorted(sent)))
            os.chmod(tmp, 0o600)
            tmp.replace(path)
        state = self.state.get(scope_id, "graph")
        self.state.put(state.succeeded(self.clock(), max(state.offset, offset), 1 if episode else 0))

    def _fail(self, scope_id: str, error: str) -> Any:
        failed = self.state.get(scope_id, "graph").failed(self.clock(), error)
        self.state.put(failed)
        return failed

    # --- scopes, status, lifecycle ----------------------------------------------------

    def scopes(self) -> list[str]:
        """Scopes that have sent anything to their graph."""
        return sorted({s.scope_id for s in self.state.all() if s.job == "graph" and s.runs})

    def status(self) -> dict[str, Any]:
        scopes = {s.scope_id: s.as_status() for s in self.state.all() if s.job == "graph"}
        running = sorted(g for g, lock in self._locks.items() if lock.locked())
        return {
            **self.budget.status(),
            "running_groups": running,
            "failing": sorted(s for s, st in scopes.items() if st["failures"]),
            "scopes": scopes,
        }

    async def purge(self, scope_id: str) -> bool:
        """Delete the scope's graph, its watermark and its sent facts (the admin purge)."""
        self._timers.cancel(scope_id)
        async with self._locks.setdefault(group_id(scope_id), asyncio.Lock()):
            existed = await self.store.delete(group_id(scope_id))
            with contextlib.suppress(FileNotFoundError):
                self._sent_path(scope_id).unlink()
            await asyncio.to_thread(self.state.delete_job, scope_id, "graph")
        return existed

    async def close(self) -> None:
        await self._timers.close()
