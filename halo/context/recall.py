"""Semantic recall in a turn: the context section, the agent's `recall` tool, `/recall`.

All three search only scopes the policy lets this turn's speaker read from this scope
(`read_memory`), asked here in code for every scope searched; the index service itself
searches whatever it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import timedelta

from agents import FunctionTool, RunContextWrapper

from halo.commands.builtin import Command
from halo.context.builder import ContextSection
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError, resolve_scope
from halo.core.turn import Turn, TurnRun
from halo.routing.plan import TurnPlan
from halo.tools.guarded import guarded_tool
from memory.documents import document_label
from memory.semantic import Hit, SemanticMemory
from transcripts import AuditLog
from transcripts.tokens import estimate_tokens

log = logging.getLogger(__name__)

RECENT_SECONDS = 3 * 3600  # this chat's own recent turns are in the session history already
TOOL_LIMIT = 8
COMMAND_LIMIT = 5


def readable_among(turn: Turn, scope_ids: Iterable[str], *, audit: bool) -> list[str]:
    """This turn's own scope and those of `scope_ids` the policy lets this turn read
    (`read_memory`, asked from this scope): the one rule for recall and graph memory."""
    allowed: list[str] = []
    for scope_id in sorted({turn.scope.id, *scope_ids}):
        scope = turn.scope if scope_id == turn.scope.id else _resolve(turn, scope_id)
        if scope is None:
            continue
        if turn.decide("read_memory", scope, audit=audit).allowed:
            allowed.append(scope_id)
    return allowed


def _resolve(turn: Turn, scope_id: str) -> Scope | None:
    try:
        return resolve_scope(turn.family, scope_id)
    except UnknownScopeError:
        return None


def scope_label(turn: Turn, scope_id: str) -> str:
    if scope_id == turn.scope.id:
        return "this chat"
    scope = _resolve(turn, scope_id)
    if scope is None:
        return scope_id
    if scope.type == "dm":
        owner = turn.family.member(scope.owner_id) if scope.owner_id else None
        return f"{owner.name}'s private chat" if owner else "a private chat"
    return {
        "parents_group": "the parents group",
        "family_group": "the family group",
        "work_channel": f"work channel {scope_id}",
        "home": "home events",
    }.get(scope.type, scope_id)


def describe(turn: Turn, hit: Hit) -> str:
    """Where a hit comes from. Dates need no mention: transcript chunks start with their time,
    daily notes are named by their day. A document is named as it was sent, so the model can
    cite it ("the school letter says…")."""
    document = document_label(hit.source)
    if document is not None:
        lines = hit.location.removeprefix(hit.source).strip()
        return f"[{scope_label(turn, hit.scope_id)} · document {document}, {lines}]"
    return f"[{scope_label(turn, hit.scope_id)} · {hit.location}]"


def memory_files_in_context(turn: Turn) -> set[str]:
    """This scope's files the memory context source shows whole (docs/ARCHITECTURE.md, "HALO_HOME": MEMORY.md,
    today's and yesterday's notes): recalling chunks of them again would only spend tokens."""
    today = turn.envelope.ts.astimezone().date()
    return {"MEMORY.md", f"daily/{today.isoformat()}.md", f"daily/{(today - timedelta(days=1)).isoformat()}.md"}


class RecallSource:
    """Adds the chunks most related to this message, each labelled with its source, inside
    its own token budget so the builder never has to cut them. Skips this chat's own recent
    turns (the session has them) and, given `already_in_context`, this scope's files that
    another source already shows whole."""

    def __init__(
        self,
        recall: Recall,
        title: str = "Recalled from memory",
        priority: int = 6,
        already_in_context: Callable[[Turn], set[str]] | None = None,
    ) -> None:
        self.recall = recall
        self.title = title
        self.priority = priority
        self.already_in_context = already_in_context

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        semantic = self.recall.semantic
        if not semantic.enabled or turn.envelope.text.lstrip().startswith("/"):
            return []
        try:
            hits = await self.recall.search_readable(turn, turn.envelope.text, audit=False)
        except Exception:  # recall helps a turn; it must never break one
            log.exception("semantic recall failed for %s", turn.scope.id)
            return []
        now = time.time()
        shown = self.already_in_context(turn) if self.already_in_context else set()
        hits = [
            h
            for h in hits
            if not (
                h.scope_id == turn.scope.id
                and (
                    h.source in shown or (h.source == "transcript" and h.ts is not None and now - h.ts < RECENT_SECONDS)
                )
            )
        ]
        budget = semantic.settings.context_tokens
        lines: list[str] = []
        for hit in hits:
            line = f"- {describe(turn, hit)} {hit.text.strip()}"
            cost = estimate_tokens(line)
            if cost > budget:
                continue
            lines.append(line)
            budget -= cost
        if not lines:
            return []
        intro = "Earlier notes and conversations that may relate to this message (they may be out of date):"
        return [ContextSection(self.title, "\n".join([intro, *lines]), self.priority, volatile=True)]


class Recall:
    """Semantic recall over this halo's index: what a turn may search, the tool, /recall."""

    def __init__(self, semantic: SemanticMemory, audit: AuditLog) -> None:
        self.semantic = semantic
        self.audit = audit

    def readable_scopes(self, turn: Turn, *, audit: bool) -> list[str]:
        """The indexed scopes this turn may read: its own, and any other the policy allows.

        `audit=False` for the per-turn context lookup (it would write a line per scope per turn);
        explicit searches (the tool, /recall) are audited decision by decision.
        """
        if not self.semantic.enabled:
            return []
        return readable_among(turn, self.semantic.known_scopes(), audit=audit)

    async def search_readable(
        self, turn: Turn, query: str, *, limit: int | None = None, audit: bool = True
    ) -> list[Hit]:
        """Search every scope this turn may read, merged by score."""
        if not query.strip():
            return []
        scopes = self.readable_scopes(turn, audit=audit)
        if not scopes:
            return []
        hits = await self.semantic.search(scopes, query, limit=limit)
        other = sorted({h.scope_id for h in hits} - {turn.scope.id})
        if other:  # reading another scope's memory is worth a line in the audit log
            self.audit.write(
                "memory_recalled",
                scope_id=turn.scope.id,
                by=turn.envelope.speaker.label,
                from_scopes=other,
                hits=len(hits),
            )
        return hits

    def tool(self) -> FunctionTool:
        @guarded_tool()
        async def recall(ctx: RunContextWrapper[TurnRun], query: str) -> str:
            """Search what was noted or said before (memory files and past conversations) for `query`.
            Only memory this conversation may read is searched. Returns the best matches with their sources."""
            turn = ctx.context.turn
            hits = await self.search_readable(turn, query, limit=TOOL_LIMIT)
            if not hits:
                return "Nothing found."
            return "\n\n".join(f"{describe(turn, h)}\n{h.text.strip()}" for h in hits)

        return recall

    def command(self) -> Command:
        return Command("recall", "Search what was noted or said before", self._command, usage="<words>")

    async def _command(self, turn: Turn, args: str) -> str:
        if not self.semantic.enabled:
            return "Recall is off here (memory.semantic is disabled or unavailable)."
        if not args:
            return "Usage: /recall <words to look for>"
        hits = await self.search_readable(turn, args, limit=COMMAND_LIMIT)
        if not hits:
            return f"Nothing found for “{args}”."
        lines = [f"Found {len(hits)} for “{args}”:"]
        for n, hit in enumerate(hits, start=1):
            text = " ".join(hit.text.split())
            lines.append(f"{n}. {describe(turn, hit)} {text[:300]}{'…' if len(text) > 300 else ''}")
        return "\n".join(lines)
