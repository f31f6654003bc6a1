"""`services.memory`: everything the rest of halo asks of memory, and when distillation runs.

Callers (commands, tools, the admin API) ask the policy first; this service writes only
where it is told. Automatic work happens after a reply and never makes a chat wait:
distillation every N transcript items (sooner when a message says "remember"/"forget"),
model extraction once a scope has been quiet for a while. A failing scope backs off
(30 s doubling to 10 min); its state is in `status()` for `/status`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from config.settings import MemorySettings
from memory import daily, facts
from memory.distill import Distiller, DistillResult, MayWrite, Names
from memory.extraction.extract import ExtractionResult, ModelExtraction
from memory.redact import REDACTED, only_redacted, redact
from memory.rules import Durable, Forget, classify, classify_sentence
from memory.scope_files import ScopeFiles
from memory.scope_timers import ScopeTimers
from memory.state import JobStates
from memory.store import Stamp
from memory.when import absolute_dates, day_of, hhmm
from transcripts import TranscriptStore
from transcripts.write_behind import WriteBehind

log = logging.getLogger(__name__)

ERROR_CHARS = 300
LOG_EVERY_SECONDS = 1.0  # daily log lines are batched: a turn pays no thread hop or file lock for them


class DistillationDisabled(RuntimeError):
    """`memory.distillation_enabled` is false: the admin API answers 409."""


class ExtractionUnavailable(RuntimeError):
    """Model extraction is off (`memory.extractor` is not `llm`) or no model is configured."""


@dataclass(frozen=True, slots=True)
class Remembered:
    added: bool
    superseded: int
    line: str


@dataclass(frozen=True, slots=True)
class Forgotten:
    facts: int  # lines removed from MEMORY.md
    daily_lines: int  # note and transcript lines removed from the daily files


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of a daily file's transcript section."""

    ts: datetime
    role: Literal["user", "halo"]
    text: str
    speaker: str | None = None  # the name shown for a user line


class MemoryService:
    def __init__(
        self,
        settings: MemorySettings,
        files: ScopeFiles,
        transcripts: TranscriptStore,
        state: JobStates,
        *,
        names: Names,
        may_write: MayWrite,
        extraction: ModelExtraction | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.files = files
        self.transcripts = transcripts
        self.state = state
        self.names = names
        self.distiller = Distiller(files, transcripts, state, names=names, may_write=may_write, clock=clock)
        self.extraction = extraction
        self.clock = clock
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._counted: dict[str, tuple[int, int]] = {}  # scope → (offset counted up to, items since watermark)
        self._timers = ScopeTimers()  # the quiet timers, and the extractions they start
        self.on_change: list[Callable[[str], None]] = []  # told a scope's memory files changed (index sync)
        self.on_quiet: list[Callable[[str], None]] = []  # told a scope went quiet (graph ingestion)
        # (scope, day, line): the per-turn log, derived from the fsync'd transcript, written in batches
        self._daily_log: WriteBehind[tuple[str, date, str]] = WriteBehind(
            self._write_log, LOG_EVERY_SECONDS, "daily log lines"
        )

    # --- reading --------------------------------------------------------------------

    def memory_path(self, scope_id: str) -> str:
        """Where a person finds the scope's MEMORY.md (it may not exist yet): a path, or the table."""
        return self.files.store.where(self.files.memory_path(scope_id))

    def memory_stamp(self, scope_id: str) -> Stamp | None:
        """When MEMORY.md last changed and its size; None while there is none."""
        return self.files.store.stamp(self.files.memory_path(scope_id))

    async def file_text(self, relative: str, *, scope_id: str | None = None) -> str | None:
        """A memory file's text (a scope's when `scope_id` names it, else the family's own)."""
        await self.files.store.ready(scope_id)
        return await asyncio.to_thread(self.files.store.text, relative)

    async def replace_file(self, relative: str, text: str, *, scope_id: str | None = None) -> None:
        """A parent's edit (the admin API): the file replaced whole, under the scope's lock, and
        a sync of the scope's index asked for."""
        if scope_id is None:
            await self.files.store.ready(None)
            await asyncio.to_thread(self.files.store.write, relative, text)
            return
        await self._write(scope_id, lambda: self.files.store.write(relative, text))

    def read(self, scope_id: str) -> str:
        """MEMORY.md as the store holds it, "" when there is none. Callers check read_memory first."""
        return self.files.memory_text(scope_id)

    def facts(self, scope_id: str) -> list[str]:
        """The current facts (struck-through ones left out), oldest first, with their origin."""
        return [f"{f.body} ({f.meta})" if f.meta else f.body for f in facts.live(self.read(scope_id))]

    # --- writing on request (the caller has asked the policy) --------------------------

    async def remember(self, scope_id: str, text: str, *, by: str, when: datetime) -> Remembered | None:
        """Keep `text` as a fact of the scope ("my X is Y" supersedes an older value).
        None when nothing but a secret was given: secrets are never kept."""
        clean = redact(text.strip())
        if not clean or only_redacted(clean):
            return None
        day = day_of(when)
        action = classify_sentence(f"remember {clean}")
        if action is None and REDACTED in clean:
            return None  # "my password is [redacted]": nothing worth keeping is left
        meta = f"{by}, {day.isoformat()}"
        if isinstance(action, Durable) and action.key is not None and action.value is not None:
            value = absolute_dates(action.value, day)
            body = facts.render_keyed(by, action.key, value)
            keyed: dict[str, Any] = {"subject": by, "key": action.key, "value": value}
        else:
            body = absolute_dates(clean if not isinstance(action, Durable) else action.text, day)
            body = " ".join(body.split())
            keyed = {}
        header = self.files.memory_header(scope_id)
        result: list[facts.Added] = []

        def change(current: str) -> str:
            updated, added = facts.add_fact(current, body, meta, header=header, day=day, **keyed)
            result[:] = [added]
            return updated

        await self._write(scope_id, lambda: self.files.update_memory(scope_id, change))
        return Remembered(result[0].added, result[0].superseded, body)

    async def forget(self, scope_id: str, query: str, *, by: str | None = None) -> Forgotten:
        """Remove the facts, notes and log lines holding every word of `query`.
        `by` limits it to what that person said or is about ("forget my …")."""
        removed = [0]

        def change(current: str) -> str:
            updated, removed[0] = facts.forget(current, query, by)
            return updated

        def work() -> Forgotten:
            self.files.update_memory(scope_id, change)
            return Forgotten(removed[0], self.files.forget_in_daily(scope_id, query, by))

        return await self._write(scope_id, work)

    async def share(self, to_scope_id: str, text: str, *, by: str, when: datetime) -> str | None:
        """Write `text` into another scope's memory (the parents group) with the sharer and date.
        The caller has asked the policy `share`. None when only a secret was given."""
        clean = " ".join(redact(text).split())
        if not clean or only_redacted(clean):
            return None
        day = day_of(when)
        body = absolute_dates(clean, day)
        meta = f"shared by {by}, {day.isoformat()}"
        header = self.files.memory_header(to_scope_id)
        await self._write(
            to_scope_id,
            lambda: self.files.update_memory(
                to_scope_id, lambda current: facts.add_fact(current, body, meta, section=facts.SHARED, header=header)[0]
            ),
        )
        return body

    async def log_turn(self, scope_id: str, entries: list[LogEntry]) -> None:
        """`[user]` / `[halo]` lines in today's daily file, redacted (every platform, after the reply)."""
        if not self.settings.daily_transcript or not entries:
            return
        for entry in entries:
            text = redact(entry.text)
            if entry.role == "user":
                if _asks_to_forget(text):
                    text = "(asked me to forget something)"
                line = f"{entry.speaker}: {daily.one_line(text, daily.LOG_CHARS)}" if entry.speaker else text
            else:
                line = daily.shorten_reply(text)
            self._daily_log.add((scope_id, day_of(entry.ts), daily.log_line(hhmm(entry.ts), entry.role, line)))

    async def flush_log(self, scope_id: str | None = None) -> None:
        """Write the daily log lines held back (all of them, or one scope's): before a change that
        must see them (a forget), on drain and on close. Derived from the fsync'd transcript, so
        a crash loses at most the last second of them, as a power cut would the unsynced rest."""
        await self._daily_log.flush(None if scope_id is None else lambda item: item[0] == scope_id)

    async def _write_log(self, batch: list[tuple[str, date, str]]) -> None:
        by_scope: dict[str, dict[date, list[str]]] = {}
        for scope_id, day, line in batch:
            by_scope.setdefault(scope_id, {}).setdefault(day, []).append(line)
        for scope_id in by_scope:
            await self.files.store.ready(scope_id)
        await asyncio.to_thread(self._write_log_files, by_scope)

    def _write_log_files(self, by_scope: dict[str, dict[date, list[str]]]) -> None:
        for scope_id, days in by_scope.items():
            try:
                with self.files.lock(scope_id):
                    self.files.ensure(scope_id)
                    for day, lines in days.items():
                        self.files.log_daily(scope_id, day, lines)
            except Exception:  # one scope's folder unwritable: the others still get theirs
                log.exception("could not write the daily log of %s", scope_id)

    async def _write(self, scope_id: str, work: Callable[[], Any], *, durable: bool = True) -> Any:
        """Run `work` under the scope's file lock; `durable` writes (facts, notes) are announced.
        The scope's held-back log lines are written first, so a forget reaches them too."""
        await self.files.store.ready(scope_id)  # PostgreSQL: the scope's rows held here
        await self.flush_log(scope_id)

        def locked() -> Any:
            with self.files.lock(scope_id):
                self.files.ensure(scope_id)
                return work()

        result = await asyncio.to_thread(locked)
        if durable:
            self._changed(scope_id)
        return result

    def _changed(self, scope_id: str) -> None:
        for listener in self.on_change:
            listener(scope_id)

    # --- distillation -----------------------------------------------------------------

    async def distill(self, scope_id: str) -> DistillResult:
        """Distil `scope_id` now, waiting for a run in progress. Raises DistillationDisabled, or
        the run's own error (also recorded for /status, with backoff for automatic runs)."""
        if not self.settings.distillation_enabled:
            raise DistillationDisabled("distillation is disabled (memory.distillation_enabled is false)")
        async with self._lock(scope_id, "distill"):
            return await self._distill(scope_id)

    async def _distill(self, scope_id: str) -> DistillResult:
        await self.transcripts.ready(scope_id)  # on PostgreSQL: held here before it is read
        await self.files.store.ready(scope_id)
        await self.flush_log(scope_id)  # a forget it carries out reaches the newest log lines too
        try:
            result = await asyncio.to_thread(self.distiller.run, scope_id)
        except Exception as exc:
            await asyncio.to_thread(self._record_failure, scope_id, "distill", exc)
            raise
        self._changed(scope_id)
        counted = self._counted.get(scope_id)
        if counted is not None and counted[0] <= result.to_offset:
            self._counted[scope_id] = (result.to_offset, 0)
        else:
            self._counted.pop(scope_id, None)
        return result

    @staticmethod
    def is_memory_request(text: str) -> bool:
        """ "remember …", "my X is Y", "forget …": distilled right after the reply, model or not."""
        return _has_memory_cue(text)

    async def after_turn(self, scope_id: str, user_text: str) -> None:
        """After a reply: distil when N items are waiting (or the message asked to remember or
        forget), and restart the scope's quiet timer for model extraction."""
        if self.settings.distillation_enabled:
            known = self._counted.get(scope_id)
            upto, pending = await asyncio.to_thread(self._count_pending, scope_id, known)
            self._counted[scope_id] = (upto, pending)
            if pending >= self.settings.distillation_every_n_items or _has_memory_cue(user_text):
                await self._auto(scope_id, "distill")
        if self._extraction_on() or self.on_quiet:
            self._restart_quiet_timer(scope_id)

    async def catch_up(self, scope_id: str) -> None:
        """On taking a scope from another process (PostgreSQL): a memory request that process
        answered but crashed before distilling ("remember …" after its reply) is distilled now,
        before this process answers in the scope. The request is in the transcript, and the
        distillation's watermark only moves with the memory it wrote, so nothing is done twice."""
        self._counted.pop(scope_id, None)  # the last holder may have moved the watermark
        await self.transcripts.ready(scope_id)
        if self.settings.distillation_enabled and await asyncio.to_thread(self._cue_waiting, scope_id):
            await self._auto(scope_id, "distill")

    def _cue_waiting(self, scope_id: str) -> bool:
        """Does a message past the distillation's watermark ask to remember or forget?"""
        reader = self.transcripts.read_from(scope_id, self.state.get(scope_id, "distill").offset)
        try:
            return any(line.role == "user" and _has_memory_cue(line.text) for _, line in reader)
        finally:
            reader.close()

    async def _auto(self, scope_id: str, job: Literal["distill", "extract"]) -> None:
        """An automatic run: skipped while one is in progress or the scope is backing off."""
        lock = self._lock(scope_id, job)
        if lock.locked():
            return
        state = await asyncio.to_thread(self.state.get, scope_id, job)
        if state.waiting(self.clock()):
            return
        async with lock:
            try:
                if job == "distill":
                    await self._distill(scope_id)
                else:
                    await self._extract(scope_id)
            except Exception as exc:
                log.warning("memory %s of %s failed (will retry with backoff): %s", job, scope_id, exc)

    def _count_pending(self, scope_id: str, known: tuple[int, int] | None) -> tuple[int, int]:
        """(offset counted up to, items after the watermark): counted on from what is already
        known, so a turn reads only its own new lines (the watermark comes from halo.db once)."""
        upto, count = known or (self.state.get(scope_id, "distill").offset, 0)
        reader = self.transcripts.read_from(scope_id, upto)
        count += sum(1 for _ in reader)
        return reader.next_offset, count

    def _record_failure(self, scope_id: str, job: Literal["distill", "extract"], exc: BaseException) -> None:
        error = redact(f"{type(exc).__name__}: {exc}")[:ERROR_CHARS]
        with self.files.lock(scope_id):
            self.state.put(self.state.get(scope_id, job).failed(self.clock(), error))

    # --- model extraction ---------------------------------------------------------------

    def _extraction_on(self) -> bool:
        return self.settings.extractor == "llm" and self.extraction is not None

    async def extract(self, scope_id: str) -> ExtractionResult:
        """Run model extraction for `scope_id` now. Raises ExtractionUnavailable when it is off."""
        if not self._extraction_on():
            raise ExtractionUnavailable(
                "model extraction is off: set memory.extractor to llm and configure llm.provider"
            )
        async with self._lock(scope_id, "extract"):
            return await self._extract(scope_id)

    async def _extract(self, scope_id: str) -> ExtractionResult:
        assert self.extraction is not None
        await self.transcripts.ready(scope_id)
        try:
            result = await self.extraction.run(scope_id)
        except Exception as exc:
            await asyncio.to_thread(self._record_failure, scope_id, "extract", exc)
            raise
        self._changed(scope_id)
        return result

    def _restart_quiet_timer(self, scope_id: str) -> None:
        self._timers.call_later(scope_id, self.settings.quiet_minutes * 60, self._quiet)

    def _quiet(self, scope_id: str) -> None:
        for listener in self.on_quiet:
            listener(scope_id)
        if self._extraction_on():
            self._timers.spawn(self._auto(scope_id, "extract"))

    async def start(self) -> None:
        """On start-up: scopes with transcript not yet extracted get a quiet timer, so work left
        by a restart is picked up without waiting for the next message."""
        if not self._extraction_on():
            return
        for scope_id in await asyncio.to_thread(self._extraction_backlog):
            self._restart_quiet_timer(scope_id)

    def _extraction_backlog(self) -> list[str]:
        states = {s.scope_id: s for s in self.state.all() if s.job == "extract"}
        backlog = []
        for scope_id in self.transcripts.scope_ids():
            state = states.get(scope_id)
            size = self.transcripts.size(scope_id)
            if state is None or state.pending or state.offset < size:
                backlog.append(scope_id)
        return backlog

    # --- lifecycle and status -----------------------------------------------------------

    def _lock(self, scope_id: str, job: str) -> asyncio.Lock:
        return self._locks.setdefault((scope_id, job), asyncio.Lock())

    async def status(self) -> dict[str, Any]:
        """For `/status` under "distillation". Times are ISO 8601 UTC; `watermark` is a transcript
        byte offset; `pending_items` is known once the scope has had a turn since start-up.

        The jobs are read in a thread: on SQLite a read on the loop that waits for halo.db's write
        lock would wait for a transaction that needs the loop to commit (a 30 s stall, then
        "database is locked")."""
        scopes: dict[str, dict[str, Any]] = {}
        for state in await asyncio.to_thread(self.state.all):
            if state.job == "graph":
                continue  # graph memory reports its own (GraphMemory.status)
            entry = scopes.setdefault(state.scope_id, {})
            entry[state.job] = state.as_status()
            if state.job == "distill" and state.scope_id in self._counted:
                entry["distill"]["pending_items"] = self._counted[state.scope_id][1]
        running = sorted({scope for (scope, job), lock in self._locks.items() if lock.locked()})
        return {
            "enabled": self.settings.distillation_enabled,
            "every_n_items": self.settings.distillation_every_n_items,
            "extractor": self.settings.extractor if self._extraction_on() else "deterministic",
            "quiet_minutes": self.settings.quiet_minutes,
            "running": running,
            "failing": sorted(s for s, jobs in scopes.items() if any(j["failures"] for j in jobs.values())),
            "scopes": scopes,
        }

    async def purge(self, scope_id: str) -> bool:
        """For the admin purge (after its confirmation): delete the scope's memory files and its
        distillation state. True when there was anything to delete."""
        self._timers.cancel(scope_id)
        async with self._lock(scope_id, "distill"), self._lock(scope_id, "extract"):
            existed = await asyncio.to_thread(self.files.purge, scope_id)
            await asyncio.to_thread(self.state.delete_scope, scope_id)
        self._counted.pop(scope_id, None)
        return existed

    async def close(self) -> None:
        await self._daily_log.close()
        await self._timers.close()
        await asyncio.to_thread(self.state.close)


def _has_memory_cue(text: str) -> bool:
    return any(isinstance(a, Durable | Forget) for a in classify(text))


def _asks_to_forget(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.lower().startswith("/forget") or any(isinstance(a, Forget) for a in classify(text))
