"""Memory, wired to halo: who a speaker is, what the policy lets into memory, what a folder is.

`memory/` knows files and transcripts but not the family or the policy; this module gives
it those answers as plain functions, and the after-turn hook that feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from agents import Model

from config.settings import Settings
from halo.core.scope_takers import ScopeTakers
from halo.core.scopes import UnknownScopeError, resolve_scope
from halo.core.turn import Turn
from halo.pipeline.reply import AfterTurnHook, Reply
from halo.safety.gate import verdict
from halo.storage.memory_store import RowMemory
from memory.extraction.extract import ModelChunkExtractor, ModelExtraction
from memory.scope_files import ScopeFiles, ScopeInfo
from memory.semantic import SemanticMemory
from memory.service import LogEntry, MemoryService
from memory.state import JobStates, JobStateStore
from memory.store import MemoryStore
from policy import PolicyEngine
from transcripts import TranscriptStore

_DESCRIPTIONS = {
    "parents_group": "the parents group",
    "family_group": "the whole-family group",
    "work_channel": "a work channel",
    "home": "home events",
}


def build_memory(
    settings: Settings,
    policy: PolicyEngine,
    transcripts: TranscriptStore,
    extraction_model: Model | None,
    store: MemoryStore | None = None,
) -> MemoryService:
    """The MemoryService for this HALO_HOME; model extraction only with `memory.extractor: llm` and a model.
    `store`: where the memory is kept (files by default; on PostgreSQL its rows, which keep the
    distillation's and extraction's progress too: halo/storage/job_rows.py)."""

    def names(label: str | None) -> str:
        if label is None:
            return "someone"
        member = policy.family.member(label)
        return member.name if member else label

    def may_write(label: str | None, scope_id: str) -> bool:
        family = policy.family
        member = family.member(label) if label else None
        if member is None:
            return False
        try:
            scope = resolve_scope(family, scope_id)
        except UnknownScopeError:
            return False
        return policy.decide("write_memory", principal=member, resource=scope, from_scope=scope, audit=False).allowed

    def describe(scope_id: str) -> ScopeInfo:
        family = policy.family
        try:
            scope = resolve_scope(family, scope_id)
        except UnknownScopeError:
            return ScopeInfo(scope_id)
        owner = family.member(scope.owner_id) if scope.owner_id else None
        # who may talk there, by the policy; a DM is its owner's alone (dm-owner-only), so only they are asked
        candidates = [owner] if scope.type == "dm" and owner else [] if scope.type == "dm" else family.members
        members = [
            m.id for m in candidates if policy.decide("converse", principal=m, resource=scope, audit=False).allowed
        ]
        if scope.type == "dm":
            text = f"a private chat with {owner.name}" if owner else "a private chat"
        else:
            text = _DESCRIPTIONS.get(scope.type, "this chat")
        return ScopeInfo(scope_id, scope.type, scope.owner_id, members, text)

    paths = settings.paths
    files = ScopeFiles(paths, describe, store)
    local_state = JobStateStore(paths.halo_db)
    state: JobStates = store.job_states(local_state) if isinstance(store, RowMemory) else local_state
    extraction = None
    if settings.memory.extractor == "llm" and extraction_model is not None:
        extraction = ModelExtraction(
            files,
            transcripts,
            state,
            ModelChunkExtractor(
                extraction_model, max_tokens=settings.llm.max_output_tokens, tracing=settings.llm.tracing
            ),
            names=names,
            may_write=may_write,
            model_name=settings.llm.cheap_model or settings.llm.model,
            chunk_turns=settings.memory.extraction_chunk_turns,
            overlap_turns=settings.memory.extraction_overlap_turns,
        )
    return MemoryService(
        settings.memory, files, transcripts, state, names=names, may_write=may_write, extraction=extraction
    )


def scope_takers(
    rows: RowMemory | None, memory: MemoryService, semantic: SemanticMemory, transcripts: TranscriptStore
) -> ScopeTakers:
    """What runs before this process first uses a scope, on PostgreSQL: the transcript's lines
    first, then the memory's rows, then the semantic index brought up to date from both, then a
    memory request the last holder left undistilled (it crashed after its reply)."""
    if rows is None:
        return ScopeTakers()
    return ScopeTakers(
        [transcripts, MemoryTake(rows, memory.files, semantic)], before_answering=[MemoryCatchUp(memory)]
    )


@dataclass(frozen=True, slots=True)
class MemoryTake:
    """The scope taker that holds a scope's memory rows here and syncs its semantic index."""

    rows: RowMemory
    files: ScopeFiles
    semantic: SemanticMemory

    async def take(self, scope_id: str) -> None:
        await self.rows.take(scope_id)
        self.files.refreshed(scope_id)  # what it remembered of the files (the daily logs' ends) is stale
        if self.semantic.enabled:
            await self.semantic.sync_scope(scope_id)


@dataclass(frozen=True, slots=True)
class MemoryCatchUp:
    """The scope taker that runs `MemoryService.catch_up`."""

    memory: MemoryService

    async def take(self, scope_id: str) -> None:
        await self.memory.catch_up(scope_id)


def memory_after_turn(memory: MemoryService) -> AfterTurnHook:
    """The gateway hook: the day's transcript lines, then distillation / extraction triggers."""

    async def after_turn(turn: Turn, reply: Reply) -> None:
        env = turn.envelope
        if (state := verdict(turn)) is not None and state.kept_out:  # a child's flagged words: not in the day's log
            return
        speaker = env.speaker.member.name if env.speaker.member else env.speaker.label
        entries = [LogEntry(env.ts, "user", env.text, speaker)]
        if reply.text:
            entries.append(LogEntry(datetime.now(UTC), "halo", reply.text))
        await memory.log_turn(env.scope.id, entries)
        await memory.after_turn(env.scope.id, env.text)

    return after_turn
