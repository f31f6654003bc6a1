"""What a parent does to a whole scope from outside a conversation: look, clear, purge.

The admin API (and later the CLI) calls these. Clearing starts the model's session again
(a marker line in the transcript; nothing is removed); purging deletes everything halo
keeps about a scope — transcript (and so the session), the memory folder with its index —
and is audited. Neither trusts a scope id it cannot parse.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from config.family import Family
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError, member_scopes, resolve_scope
from memory.scope_files import scope_ids_on_disk

if TYPE_CHECKING:
    from config.paths import HaloPaths
    from memory.graph.service import GraphMemory
    from memory.semantic import SemanticMemory
    from memory.service import MemoryService
    from transcripts import AuditLog, TranscriptStore
    from transcripts.session import TranscriptSessions

log = logging.getLogger(__name__)

# What the admin accepts as a scope id, said once for the parser and the OpenAPI document:
# a member-named scope (web, cli) or a home area, or a numeric chat id (telegram, discord).
SCOPE_ID_PATTERN = r"(?:web|cli|home):[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}|(?:telegram|discord):-?[0-9]{1,20}"
_SCOPE_ID = re.compile(SCOPE_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class ScopeSummary:
    """One scope as the dashboard lists it."""

    scope: Scope
    item_count: int  # items in the derived session
    transcript_lines: int
    last_activity: datetime | None  # time of the newest transcript line
    has_memory: bool  # MEMORY.md exists
    configured: bool  # named by halo.yaml (a member's DM, a configured group or channel)


@dataclass(frozen=True, slots=True)
class PurgeResult:
    scope_id: str
    session_items: int
    transcript: bool  # a transcript existed and was deleted
    memory: bool  # a memory folder existed and was deleted


def parse_scope_id(family: Family, scope_id: str) -> Scope:
    """A Scope for a well-formed id; UnknownScopeError says what is wrong otherwise."""
    if not _SCOPE_ID.fullmatch(scope_id):
        raise UnknownScopeError(
            f"{scope_id[:80]!r} is not a scope id: expected web:<member>, cli:<member>, home:<area>, "
            "telegram:<chat id> or discord:<channel id>"
        )
    return resolve_scope(family, scope_id)


class ScopeAdmin:
    """Look at, clear and purge whole scopes, over exactly the stores a scope lives in."""

    def __init__(
        self,
        *,
        sessions: TranscriptSessions,
        transcripts: TranscriptStore,
        memory: MemoryService,
        semantic: SemanticMemory,
        graph: GraphMemory | None,
        paths: HaloPaths,
        audit: AuditLog,
        family: Callable[[], Family],
    ) -> None:
        self.sessions = sessions
        self.transcripts = transcripts
        self.memory = memory
        self.semantic = semantic
        self.graph = graph
        self.paths = paths
        self.audit = audit
        self.family = family  # live: members change while halo runs

    async def active_scope_ids(self) -> list[str]:
        """Scopes with a stored session or a transcript: what `/sessions` lists."""
        counts = await self.sessions.item_counts()
        found = set(counts) | set(await asyncio.to_thread(self.transcripts.scope_ids))
        return sorted(found)

    async def known_scope_ids(self) -> set[str]:
        """Every scope halo has something about, or that halo.yaml names."""
        configured = {scope.id for scope in member_scopes(self.family())}
        on_disk = await asyncio.to_thread(scope_ids_on_disk, self.paths.scopes)
        return set(await self.active_scope_ids()) | configured | on_disk

    async def scope_summaries(self) -> list[ScopeSummary]:
        """Configured and active scopes with their counts and last activity, configured first."""
        family = self.family()
        configured = {scope.id: scope for scope in member_scopes(family)}
        counts = await self.sessions.item_counts()
        ids = set(configured) | set(await self.active_scope_ids())

        def gather() -> list[ScopeSummary]:
            summaries = []
            for scope_id in ids:
                try:
                    scope = configured.get(scope_id) or resolve_scope(family, scope_id)
                except UnknownScopeError:
                    log.warning("skipping unparseable scope id %r found in the store", scope_id)
                    continue
                last = self.transcripts.tail(scope_id, 1)
                summaries.append(
                    ScopeSummary(
                        scope=scope,
                        item_count=counts.get(scope_id, 0),
                        transcript_lines=self.transcripts.count(scope_id),
                        last_activity=last[0].ts if last else None,
                        has_memory=self.memory.memory_stamp(scope_id) is not None,
                        configured=scope_id in configured,
                    )
                )
            return summaries

        summaries = await asyncio.to_thread(gather)
        summaries.sort(key=lambda s: (not s.configured, s.scope.id))
        return summaries

    async def clear_session(self, scope_id: str, *, actor: str) -> int | None:
        """Forget the derived session (the model's history); the transcript stays. Returns items
        removed, or None when the scope has no transcript: nothing to clear, and none is made."""
        if self.transcripts.count(scope_id) == 0:
            return None
        removed = len(await self.sessions.all_items(scope_id))
        await self.sessions.clear(scope_id, why=f"session cleared by {actor}")
        self.audit.write("admin_clear", scope_id=scope_id, actor=actor, items_removed=removed)
        return removed

    async def purge_scope(self, scope_id: str, *, actor: str) -> PurgeResult:
        """Delete the scope's session, transcript, memory folder and index. Final: callers must have
        asked for explicit confirmation, and should hold the gateway's scope lock.

        The transcript goes before memory's state: a distillation running meanwhile then finds
        nothing to read, and the watermark it leaves is deleted with the rest, so the next
        transcript of this scope is distilled from its start. The index is closed after that (a
        distillation asks for a sync) and is not rebuilt until the scope is active again."""
        items = len(await self.sessions.all_items(scope_id))
        transcript = await self.transcripts.purge(scope_id)
        memory_files = await self.memory.purge(scope_id)  # its files and its state in halo.db
        await self.semantic.forget_scope(scope_id)
        graph = self.graph is not None and await self.graph.purge(scope_id)  # its group's whole graph
        folder = await asyncio.to_thread(_remove_tree, self.paths.scope_dir(scope_id))
        memory = memory_files or folder
        outcome = PurgeResult(scope_id, items, transcript, memory)
        self.audit.write(
            "admin_purge",
            scope_id=scope_id,
            actor=actor,
            session_items=items,
            transcript=transcript,
            memory=memory,
            graph=graph,
        )
        return outcome


def _remove_tree(folder: Path) -> bool:
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True
