"""Remember, forget, show and share: memory actions a person (or the agent for them) asks for.

Each asks the policy in code first (write_memory, read_memory, share) and answers in plain
words. The /commands and the agent's tools are thin wrappers around these.
"""

from __future__ import annotations

import re

from halo.core.scopes import parents_group_scope
from halo.core.turn import Turn
from memory.service import MemoryService
from transcripts import AuditLog

PAGE_SIZE = 10


def _speaker_name(turn: Turn) -> str:
    member = turn.member
    return member.name if member else turn.envelope.speaker.label


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class MemoryActions:
    """The memory actions, over this halo's memory files and audit log."""

    def __init__(self, memory: MemoryService, audit: AuditLog) -> None:
        self.memory = memory
        self.audit = audit

    async def remember(self, turn: Turn, text: str) -> str:
        memory = self.memory
        if not text.strip():
            return "Tell me what to remember, e.g. /remember my shoe size is 38"
        decision = turn.decide("write_memory")
        if not decision.allowed:
            return f"I can't keep memory here: {decision.reason}"
        result = await memory.remember(turn.scope.id, text, by=_speaker_name(turn), when=turn.envelope.ts)
        if result is None:
            return "That looks like a password or another secret, and I don't keep those."
        if not result.added:
            return f"I already remember that: {result.line}"
        replaced = " (it replaces what I had before)" if result.superseded else ""
        return f"Remembered: {result.line}{replaced}"

    async def forget(self, turn: Turn, text: str) -> str:
        memory = self.memory
        query = text.strip()
        if not query:
            return "Tell me what to forget, e.g. /forget my shoe size"
        decision = turn.decide("write_memory")
        if not decision.allowed:
            return f"I can't change memory here: {decision.reason}"
        mine = re.match(r"^my\b", query, re.I) is not None
        gone = await memory.forget(turn.scope.id, query, by=_speaker_name(turn) if mine else None)
        self.audit.write(
            "memory_forget",
            scope_id=turn.scope.id,
            by=turn.envelope.speaker.label,
            facts=gone.facts,
            daily_lines=gone.daily_lines,
        )
        if not gone.facts and not gone.daily_lines:
            return "I found nothing like that in this chat's memory."
        notes = f" and {_count(gone.daily_lines, 'line')} from its daily notes" if gone.daily_lines else ""
        return f"Done: I removed {_count(gone.facts, 'fact')} from this chat's memory{notes}."

    async def show(self, turn: Turn, args: str) -> str:
        memory = self.memory
        decision = turn.decide("read_memory")
        if not decision.allowed:
            return f"I can't show memory here: {decision.reason}"
        found = memory.facts(turn.scope.id)
        if not found:
            return "I don't remember anything in this chat yet. Try /remember <something>."
        pages = (len(found) + PAGE_SIZE - 1) // PAGE_SIZE
        try:
            page = int(args.strip() or "1")
        except ValueError:
            return "Usage: /memory [page number]"
        page = min(max(page, 1), pages)
        first = (page - 1) * PAGE_SIZE
        lines = [f"What I remember in this chat (page {page} of {pages}):"]
        lines += [f"{first + i + 1}. {fact}" for i, fact in enumerate(found[first : first + PAGE_SIZE])]
        if page < pages:
            lines.append(f"More: /memory {page + 1}")
        return "\n".join(lines)

    async def share(self, turn: Turn, text: str) -> str:
        memory = self.memory
        if not text.strip():
            return "Tell me what to share with the parents, e.g. /share the school trip is on Friday"
        group = parents_group_scope(turn.family)
        if group is None:
            return "There is no parents group set up in halo.yaml, so there is nowhere to share to."
        decision = turn.decide("share", group)
        if not decision.allowed:
            return f"I can't share that: {decision.reason}"
        line = await memory.share(group.id, text, by=_speaker_name(turn), when=turn.envelope.ts)
        if line is None:
            return "That looks like a password or another secret, and I don't share those."
        self.audit.write("memory_shared", scope_id=turn.scope.id, to_scope=group.id, by=turn.envelope.speaker.label)
        return f"Shared with the parents: {line}"
